"""Every command that loads a model takes the same model-source flags, with the same help and defaults, and
each flag reaches the load: the commands run on real model folders served by a real HTTP server on
127.0.0.1, so ``--allow`` is seen by the allowlist, ``--refresh`` by the server (a full download instead
of a 304), ``--offline`` and ``--cache-dir`` by the cache, the limits by the download, ``--savedir`` on disk,
``--kind``/``--revision`` in the source's description and ``--backend`` in the loaded graphs."""
from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys

import numpy as np
import pytest
import soundfile

from speechkit.cli import COMMANDS, build_command_parser, main
from speechkit.commands.model_source import SOURCE_KINDS, from_hparams_options
from speechkit.pretrained.sources.fetching import FetchFrom
from speechkit.pretrained.sources.model_source import ModelSource
from tests.helpers import download_cache
from tests.helpers.job_models import write_manifest, write_model, write_separation_model, write_speaker_model
from tests.helpers.processes import REPO, clean_env
from tests.integration.pretrained.conftest import FileServer

#: The commands that build a model, and the one that only fetches it.
LOADING = ["transcribe", "separate", "embed", "verify", "diarize", "infer", "serve", "evaluate"]
SHARED = ["--kind", "--revision", "--offline", "--refresh", "--cache-dir", "--max-yaml-bytes",
          "--max-file-bytes", "--stall-timeout", "--download-timeout"]
BUILDING = ["--trust-remote-code", "--allow", "--device", "--backend"]
#: A name outside the allowlist, added to every served YAML: a `!name:` only refers to it (nothing runs).
UNVETTED = "tests.helpers.folders.folder_digest"


def _actions(command: str) -> dict:
    parser = build_command_parser(command)
    return {option: action for action in parser._actions for option in action.option_strings}


def test_every_model_command_takes_the_same_flags_with_the_same_help_and_defaults():
    reference = _actions("transcribe")
    for command in LOADING + ["fetch"]:
        actions = _actions(command)
        flags = SHARED + (BUILDING if command != "fetch" else [])
        flags += ["--savedir"] if command != "serve" else []
        for flag in flags:
            assert flag in actions, f"speechkit {command} lacks {flag}"
            mine, theirs = actions[flag], reference[flag]
            if flag != "--device":
                assert (mine.help, mine.choices, mine.nargs, mine.const) == \
                    (theirs.help, theirs.choices, theirs.nargs, theirs.const), (command, flag)
            if flag not in ("--device", "--savedir"):  # fetch needs a savedir; launched commands a rank's GPU
                assert mine.default == theirs.default, (command, flag)
    assert "--trust-remote-code" not in _actions("fetch")  # fetch reads the YAML as data, builds nothing
    assert _actions("fetch")["--savedir"].required
    assert _actions("evaluate")["--device"].default is None and _actions("infer")["--device"].default is None
    assert "local rank" in _actions("infer")["--device"].help


def test_the_kind_choices_are_the_fetchers():
    assert SOURCE_KINDS == tuple(kind.value for kind in FetchFrom)


def test_the_flags_map_onto_from_hparams():
    parser = build_command_parser("separate")
    args = parser.parse_args(["m", "a.wav", "--out", "o", "--savedir", "s", "--revision", "v2", "--offline",
                              "--refresh", "--cache-dir", "c", "--max-yaml-bytes", "7", "--stall-timeout",
                              "3", "--trust-remote-code", "--allow", "x.Y", "--allow", "z.W", "--backend",
                              "onnx"])
    options = from_hparams_options(args)
    limits = options.pop("limits")
    assert options == dict(savedir="s", revision="v2", allow_network=False, force_download=True,
                           cache_dir="c", trust_remote_code=True, allow=["x.Y", "z.W"], backend="onnx")
    assert (limits.max_yaml_bytes, limits.stall_timeout_s) == (7, 3.0)
    # The same settings resolve into the one object from_hparams fetches through (all but the backend).
    settings = {key: value for key, value in options.items() if key != "backend"}
    resolved = ModelSource.resolve("org/m", limits=limits, **settings)
    assert (resolved.revision, resolved.allow_network, resolved.force_download, resolved.allow,
            str(resolved.savedir)) == ("v2", False, True, ("x.Y", "z.W"), "s")
    assert "savedir" not in from_hparams_options(build_command_parser("serve").parse_args(["m"]))
    assert set(from_hparams_options(build_command_parser("fetch").parse_args(["m", "--savedir", "s"]))) == {
        "savedir", "revision", "allow_network", "force_download", "cache_dir", "limits"}
    assert COMMANDS["evaluate"][0] == "speechkit.commands.evaluate"


# -- each flag reaches the load ------------------------------------------------------------------------


_isolated_cache = download_cache._isolated_cache  # autouse, shared: pytest finds it under this name


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("model-source")
    rng = np.random.default_rng(0)
    audio = []
    for index in range(2):
        t = np.arange(3 * 16000) / 16000
        wave = 0.3 * np.sin(2 * np.pi * (150 + 70 * index) * t) + 0.02 * rng.standard_normal(t.size)
        audio.append(root / f"a{index}.wav")
        soundfile.write(audio[-1], wave.astype(np.float32), 16000)
    manifest = write_manifest(root / "data", count=2, max_words=2)
    rows = json.loads(manifest.read_text())
    for row in rows.values():
        row["text"] = row.pop("words")
    manifest.write_text(json.dumps(rows))
    return {"asr": write_model(root / "asr"), "separator": write_separation_model(root / "separator"),
            "speaker": write_speaker_model(root / "speaker"), "audio": audio, "manifest": manifest}


@pytest.fixture
def server(folders):
    with FileServer() as served:
        for name in ("asr", "separator", "speaker"):
            for path in folders[name].iterdir():
                data = path.read_bytes()
                if path.name == "hyperparams.yaml":
                    data += f"\nunvetted: !name:{UNVETTED}\n".encode()
                served.files[f"/{name}/{path.name}"] = data
        yield served


def command_line(command: str, model: str, folders: dict, out, port: int = 0) -> list:
    """A full command line of ``command`` with the model ``model``, its inputs from ``folders`` and its
    outputs in the folder ``out``."""
    a, b = (str(p) for p in folders["audio"])
    manifest = str(folders["manifest"])
    return {
        "transcribe": ["transcribe", model, a, "--no-progress"],
        "separate": ["separate", model, a, "--out", str(out / "separated"), "--no-progress"],
        "embed": ["embed", model, manifest, "--output", str(out / "embeddings"), "--no-progress"],
        "verify": ["verify", a, b, "--model", model],
        "diarize": ["diarize", a, "--model", model, "--rttm", str(out / "a.rttm"), "--num-speakers", "1"],
        "infer": ["infer", model, manifest, "--output", str(out / "job"), "--no-progress", "--device", "cpu"],
        "evaluate": ["evaluate", model, manifest, "--output", str(out / "eval"), "--no-progress",
                     "--device", "cpu"],
        "serve": ["serve", model, "--port", str(port)],
        "fetch": ["fetch", model, "--savedir", str(out / "fetched")],
    }[command]


#: command -> the served folder it loads
MODEL_OF = {"transcribe": "asr", "separate": "separator", "embed": "speaker", "verify": "speaker",
            "diarize": "speaker", "infer": "asr", "evaluate": "asr", "serve": "separator", "fetch": "speaker"}


def _allowed(text: str) -> list:
    """``--allow NAME`` for every name outside speechkit and torch that the YAML ``text`` names."""
    names = sorted(set(re.findall(r"!(?:new|name|apply):(tests\.[\w.]+)", text)) - {UNVETTED}) + [UNVETTED]
    return [flag for name in names for flag in ("--allow", name)]


def _run(argv, capsys) -> tuple:
    status = main(argv)
    captured = capsys.readouterr()
    return status, captured.err


@pytest.mark.parametrize("command", [c for c in LOADING if c != "serve"])
def test_each_flag_reaches_the_load(command, folders, server, tmp_path, capsys):
    name = MODEL_OF[command]
    url = f"{server.url}/{name}"
    allowed = _allowed(server.files[f"/{name}/hyperparams.yaml"].decode())
    weights = next(p for p in server.files if p.startswith(f"/{name}/") and not p.endswith(".yaml"))
    runs = iter(range(100))

    def run(*flags, savedir="s"):  # each run writes into a new folder (a finished job would not load again)
        out = tmp_path / f"out{next(runs)}"
        return _run(command_line(command, url, folders, out) + ["--savedir", str(tmp_path / savedir), *flags],
                    capsys)

    status, err = run(*allowed[:-2])  # every name the YAML builds allowed but the last
    assert status == 1 and f"'{UNVETTED}' is not on the allowlist" in err, err
    status, err = run(*allowed)
    assert status == 0, err
    assert (tmp_path / "s" / "hyperparams.yaml").exists()  # --savedir
    status, err = run("--trust-remote-code")  # the cached copies are revalidated: 304, no download
    assert status == 0, err
    assert server.not_modified[weights] == 1 and server.gets(weights) == 2
    status, err = run("--trust-remote-code", "--refresh")  # downloaded anew
    assert status == 0, err
    assert server.not_modified[weights] == 1 and server.gets(weights) == 3
    status, err = run(*allowed, "--offline", "--cache-dir", str(tmp_path / "empty"), savedir="s2")
    assert status == 1 and "offline" in err, err
    status, err = run(*allowed, "--max-yaml-bytes", "8", savedir="s3")
    assert status == 1 and "8" in err and "hyperparams.yaml" in err, err
    status, err = run("--kind", "huggingface", "--revision", "v7", "--offline", savedir="s4")
    assert status == 1 and "(revision v7)" in err and "Hugging Face" in err, err
    status, err = run(*allowed, "--backend", "onnx", savedir="s5")  # the folder holds no exported graphs
    assert status == 1 and "export.json" in err and server.gets(f"/{name}/export.json") == 1, err


@pytest.mark.slow
def test_serve_takes_the_flags_to_the_load(folders, server, tmp_path):
    # In its own process: serve sets up logging and signal handlers. The port is taken, so a server whose
    # models loaded stops right after the load instead of serving.
    url = f"{server.url}/separator"
    weights = "/separator/separator.safetensors"
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()

    def serve(*flags) -> tuple:
        argv = command_line("serve", url, folders, tmp_path, port=busy.getsockname()[1])
        done = subprocess.run([sys.executable, "-m", "speechkit", *argv, *flags], cwd=REPO, env=clean_env(),
                              capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr

    try:
        status, err = serve()
        assert status == 1 and f"'{UNVETTED}' is not on the allowlist" in err, err
        status, err = serve("--allow", UNVETTED)  # loaded, then the bind fails
        assert status != 0 and "address already in use" in err and server.gets(weights) == 1, err
        status, err = serve("--trust-remote-code", "--refresh")
        assert status != 0 and "address already in use" in err, err
        assert server.gets(weights) == 2 and server.not_modified[weights] == 0
        status, err = serve("--allow", UNVETTED, "--offline", "--cache-dir", str(tmp_path / "empty"))
        assert status == 1 and "offline" in err, err
    finally:
        busy.close()


def test_fetch_takes_the_fetching_flags(folders, server, tmp_path, capsys):
    url = f"{server.url}/speaker"
    argv = command_line("fetch", url, folders, tmp_path)
    assert _run(argv, capsys)[0] == 0 and (tmp_path / "fetched" / "hyperparams.yaml").exists()
    assert _run(argv + ["--refresh"], capsys)[0] == 0
    assert server.not_modified["/speaker/hyperparams.yaml"] == 0
    assert server.gets("/speaker/hyperparams.yaml") == 2
    status, err = _run(argv + ["--max-yaml-bytes", "8", "--refresh"], capsys)
    assert status == 1 and "hyperparams.yaml" in err, err
    status, err = _run(["fetch", "org/none", "--savedir", str(tmp_path / "h"), "--kind", "huggingface",
                        "--revision", "v7", "--offline"], capsys)
    assert status == 1 and "(revision v7)" in err, err


def test_the_former_evaluate_spelling_still_runs_the_command():
    done = subprocess.run([sys.executable, "-m", "speechkit.pretrained.evaluate", "--help"], cwd=REPO,
                          env=clean_env(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "usage: speechkit evaluate" in done.stdout and "--allow" in done.stdout


def test_a_namespace_without_the_building_flags_maps_to_fetching_options():
    args = argparse.Namespace(revision=None, offline=False, refresh=False, cache_dir=None, max_yaml_bytes=1,
                              max_file_bytes=2, stall_timeout=3.0, download_timeout=4.0)
    assert set(from_hparams_options(args)) == {"revision", "allow_network", "force_download", "cache_dir",
                                               "limits"}
