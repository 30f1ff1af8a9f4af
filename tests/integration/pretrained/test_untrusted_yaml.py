"""Hostile hyperparams.yaml files served over HTTP: from_hparams refuses each one before anything runs.

Every payload would create ``{marker}`` (or a file in it) if it ran; each is served by the real test HTTP
server, loaded with ``from_hparams`` without trust_remote_code, and must raise ``UnsafeSourceError`` naming
the tag or value, the target, the file and the line, with ``{marker}`` still absent.
"""
from __future__ import annotations

import pathlib
import re

import pytest
import torch

from speechkit.errors import UnsafeSourceError
from speechkit.pretrained import EncoderASR, Pretrained
from speechkit.pretrained.loading import save_weights

HEAD = "sample_rate: 16000\nlin: !new:torch.nn.Linear [2, 2]\n"  # the payload starts on line 3
TAIL = ("modules: {lin: !ref <lin>}\nencoder_pipeline: [lin]\n"
        "tokenizer: !new:speechkit.data.encoders.CTCLabelEncoder\n")

# (id, payload, text the error must quote, line of the refused node counted from the payload's first line)
PAYLOADS = [
    # The ones found against the previous deny-list.
    ("collect_env.run", 'pwn: !apply:torch.utils.collect_env.run ["touch {marker}"]',
     "!apply:torch.utils.collect_env.run", 0),
    ("benchmark.Timer", "t: !new:torch.utils.benchmark.Timer {{stmt: \"open('{marker}', 'w')\"}}",
     "!new:torch.utils.benchmark.Timer", 0),
    ("xeon.run_cpu.main", 'x: !apply:torch.backends.xeon.run_cpu.main [["touch", "{marker}"]]',
     "!apply:torch.backends.xeon.run_cpu.main", 0),
    ("show_pickle.main", 'x: !apply:torch.utils.show_pickle.main [["show_pickle", "{marker}"]]',
     "!apply:torch.utils.show_pickle.main", 0),
    ("hipify", "x: !apply:torch.utils.hipify.hipify_python.hipify {{project_directory: {marker}}}",
     "!apply:torch.utils.hipify.hipify_python.hipify", 0),
    ("run_and_read_all", "x: !apply:torch.utils.collect_env.run_and_read_all\n"
                         '  - !name:torch.utils.collect_env.run\n  - "touch {marker}"',
     "!apply:torch.utils.collect_env.run_and_read_all", 0),
    ("FileBaton", "x: !new:torch.utils.file_baton.FileBaton [{marker}]",
     "!new:torch.utils.file_baton.FileBaton", 0),
    ("SentencePieceTokenizer.train", 'x: !apply:speechkit.tokenizers.SentencePieceTokenizer.train [["a b"], '
                                     "{marker}]", "SentencePieceTokenizer.train", 0),
    ("trim_manifest_files", "x: !apply:speechkit.data.trim.trim_manifest_files [{{}}, {marker}]",
     "!apply:speechkit.data.trim.trim_manifest_files", 0),
    ("prepare_librispeech", "x: !apply:speechkit.data.librispeech.prepare_librispeech [/tmp, {marker}]",
     "!apply:speechkit.data.librispeech.prepare_librispeech", 0),
    # A dangerous function handed to a safe class.
    ("name-into-safe-class",
     "opt: !new:torch.optim.SGD [[!new:torch.nn.Parameter [!apply:torch.zeros [1]]], 0.1]\n"
     "sched: !new:torch.optim.lr_scheduler.LambdaLR\n  optimizer: !ref <opt>\n"
     "  lr_lambda: !name:torch.utils.collect_env.run", "!name:torch.utils.collect_env.run", 3),
    ("name-partial-into-safe-class", "seq: !new:torch.nn.Sequential\n"
                                     '  - !name:os.system ["touch {marker}"]', "!name:os.system", 1),
    # Anchors, aliases and merge keys: the anchored node is checked where it is defined.
    ("alias", 'cmd: &cmd !apply:torch.utils.collect_env.run ["touch {marker}"]\nseq: [*cmd, *cmd]',
     "!apply:torch.utils.collect_env.run", 0),
    ("anchor-in-args", 'seq: !new:torch.nn.Sequential [&a !apply:os.system ["touch {marker}"]]\nb: *a',
     "!apply:os.system", 0),
    ("merge-key", 'base: &base {{x: !apply:os.system ["touch {marker}"]}}\nuse:\n  <<: *base\n  y: 1',
     "!apply:os.system", 0),
    # Modules, includes, plain Python tags, tag directives and escapes.
    ("module-os", "m: !module:os", "!module:os", 0),
    ("module-torch", "m: !module:torch.utils.collect_env", "!module:torch.utils.collect_env", 0),
    ("include-remote", "x: !include:{url}/evil/extra.yaml", "!include:", 0),
    ("include-sibling", "x: !include:extra.yaml", "!include:extra.yaml", 0),
    ("python-apply", 'x: !!python/object/apply:os.system ["touch {marker}"]',
     "python/object/apply:os.system", 0),
    ("python-name", "x: !!python/name:os.system", "python/name:os.system", 0),
    ("tag-directive-python", '%TAG !p! tag:yaml.org,2002:python/\n---\n' + HEAD
     + 'x: !p!object/apply:os.system ["touch {marker}"]', "python/object/apply:os.system", 2),
    ("tag-directive-apply", '%TAG !h! !apply:\n---\n' + HEAD + 'x: !h!os.system ["touch {marker}"]',
     "!apply:os.system", 2),
    ("tag-percent-escape", 'x: !apply:os%2Esystem ["touch {marker}"]', "!apply:os.system", 0),
    ("tag-on-key", '? !apply:os.system ["touch {marker}"]\n: 1', "!apply:os.system", 0),
    ("applyref", 'x: !applyref:os.system ["touch {marker}"]', "!applyref:os.system", 0),
    ("applyref-torch", 'x: !applyref:torch.utils.collect_env.run ["touch {marker}"]',
     "!applyref:torch.utils.collect_env.run", 0),
    ("tuple-smuggle", 'x: (!!python/object/apply:os.system ["touch {marker}"],)', "python/object/apply", 0),
    ("explicit-tuple", 'x: !tuple (!!python/object/apply:os.system ["touch {marker}"],)',
     "python/object/apply", 0),
    # Dotted attribute tricks, getattr chains and builtins.
    ("module-attribute-os", 'x: !apply:torch.utils.data.dataloader.os.system ["touch {marker}"]',
     "dataloader.os.system", 0),
    ("module-attribute-torch", 'x: !apply:torch.nn.functional.torch.utils.collect_env.run ["touch {marker}"]',
     "torch.nn.functional.torch.utils.collect_env.run", 0),
    ("module-attribute-sys", "x: !name:torch.nn.modules.module.sys", "torch.nn.modules.module.sys", 0),
    ("class-attribute", "x: !apply:torch.nn.Module.load_state_dict [1, 2]",
     "torch.nn.Module.load_state_dict", 0),
    ("dunder-globals", "x: !name:torch.nn.functional.relu.__globals__", "relu.__globals__", 0),
    ("ref-getattr", "x: !ref <lin.__class__>", "<lin.__class__>", 0),
    ("copy-getattr", "x: !copy <lin.forward>", "<lin.forward>", 0),
    ("ref-through-string", 's: "<lin.__class__.__init__.__globals__>"\nx: !ref <s>', "<lin.__class__", 0),
    ("apply-getattr", "x: !apply:getattr [!ref <lin>, __class__]", "!apply:getattr", 0),
    ("builtins-exec", "x: !apply:builtins.exec [\"open('{marker}', 'w')\"]", "!apply:builtins.exec", 0),
    ("builtins-eval", "x: !apply:eval [\"open('{marker}', 'w')\"]", "!apply:eval", 0),
    ("functional-builtins", "x: !name:torch.nn.functional.__builtins__", "__builtins__", 0),
    ("torch-load", "x: !apply:torch.load [{marker}]", "!apply:torch.load", 0),
    ("torch-hub", "x: !apply:torch.hub.load [a/b, c]", "!apply:torch.hub.load", 0),
    ("torch-from-file", "x: !apply:torch.from_file [{marker}, true, 10]", "!apply:torch.from_file", 0),
    ("write-manifest", "x: !apply:speechkit.data.manifest.write_json_manifest [{{}}, {marker}]",
     "write_json_manifest", 0),
    ("from-hparams", "x: !apply:speechkit.pretrained.interfaces.EncoderASR.from_hparams [/tmp]",
     "EncoderASR.from_hparams", 0),
    ("loadable-with-path", "tok: !name:speechkit.tokenizers.SentencePieceTokenizer [{marker}]",
     "SentencePieceTokenizer", 0),
    ("loadable-built", "tok: !new:speechkit.tokenizers.SentencePieceTokenizer [{marker}]",
     "!new:speechkit.tokenizers.SentencePieceTokenizer", 0),
    ("unknown-tag", "x: !pwn thing", "!pwn", 0),
]


def _document(payload: str) -> str:
    if payload.startswith("%TAG"):
        return payload + "\n" + TAIL
    return HEAD + payload + "\n" + TAIL


@pytest.mark.parametrize("payload, quoted, line_offset", [p[1:] for p in PAYLOADS],
                         ids=[p[0] for p in PAYLOADS])
def test_hostile_yaml_is_refused_before_anything_runs(payload, quoted, line_offset, file_server, tmp_path,
                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative writes would land here too
    marker = tmp_path / "PWNED"
    text = _document(payload.format(marker=marker, url=file_server.url))
    file_server.files["/evil/hyperparams.yaml"] = text.encode()
    file_server.files["/evil/extra.yaml"] = f'x: !apply:os.system ["touch {marker}"]\n'.encode()
    before = set(tmp_path.iterdir())
    with pytest.raises(UnsafeSourceError) as info:
        EncoderASR.from_hparams(f"{file_server.url}/evil", savedir=tmp_path / "model")
    message = str(info.value)
    assert not marker.exists()
    assert set(tmp_path.iterdir()) - before <= {tmp_path / "model", tmp_path / "speechkit-cache"}
    fetched = sorted(p.name for p in (tmp_path / "model").iterdir())
    assert fetched == ["hyperparams.yaml"]  # refused before any weights file was fetched
    assert f"hyperparams.yaml from URL '{file_server.url}/evil', line {3 + line_offset}:" in message, message
    assert quoted in message, message
    assert re.search(r"tag '[^']+'|plain value", message), message


def test_trust_remote_code_still_builds_anything(file_server, tmp_path):
    marker = tmp_path / "made-by-yaml"
    file_server.files["/t/hyperparams.yaml"] = (HEAD + f"x: !apply:os.makedirs [{marker}]\n" + TAIL).encode()
    asr = EncoderASR.from_hparams(f"{file_server.url}/t", savedir=tmp_path / "s", trust_remote_code=True)
    assert marker.is_dir() and isinstance(asr.mods["lin"], torch.nn.Linear)


def test_allow_adds_exact_names_only(tiny_asr, file_server, tmp_path):
    folder = tiny_asr.write_model_folder(tmp_path / "model")
    for path in folder.iterdir():
        file_server.files[f"/tiny/{path.name}"] = path.read_bytes()
    names = ["tiny_asr.FrameToneEncoder", "tiny_asr.CharTokenizer"]
    with pytest.raises(UnsafeSourceError, match="!new:tiny_asr.CharTokenizer"):
        EncoderASR.from_hparams(f"{file_server.url}/tiny", savedir=tmp_path / "a", allow=names[:1])
    asr = EncoderASR.from_hparams(f"{file_server.url}/tiny", savedir=tmp_path / "b", allow=names)
    wav = tiny_asr.synthesize("bad cafe")
    assert asr.transcribe_batch(wav.unsqueeze(0), torch.tensor([wav.shape[0]]))[0] == ["bad cafe"]


ROOT = pathlib.Path(__file__).parents[3]
SHIPPED = sorted(path for pattern in ("inference.yaml", "features.yaml")
                 for path in [*ROOT.glob(f"recipes/**/{pattern}"), *ROOT.glob(f"templates/**/{pattern}")])


def test_shipped_inference_yamls_are_found():
    assert len(SHIPPED) >= 2, SHIPPED


@pytest.mark.parametrize("inference_yaml", SHIPPED, ids=[str(p.relative_to(ROOT)) for p in SHIPPED])
def test_shipped_model_folder_loads_from_a_url_without_trust(inference_yaml, file_server, tmp_path):
    """The folder ``speechkit export`` makes from a shipped inference.yaml (random weights, a real tokenizer)
    loads from a URL under the allowlist."""
    from speechkit.experiment.hparams import load_hparams, standalone_hparams_text
    from speechkit.pretrained.pretrainer import declared_files
    from speechkit.tokenizers import SentencePieceTokenizer

    text = standalone_hparams_text(inference_yaml)  # as the export writes it (extensions resolved)
    built = load_hparams(inference_yaml)  # trusted: our own file, to write matching weights
    files = declared_files(text)
    (tmp_path / "weights").mkdir()
    for name, path in files.items():
        loadable = built["pretrainer"].loadables[name]
        if isinstance(loadable, torch.nn.Module):
            save_weights(loadable.state_dict(), tmp_path / "weights" / path)
    if "tokenizer" in files:
        tokenizer = SentencePieceTokenizer.train(["a bad cab", "dead beef", "a fed bee"] * 10,
                                                 tmp_path / "tok", vocab_size=12, model_type="char",
                                                 hard_vocab_limit=False)
        model_bytes = pathlib.Path(tokenizer.model_path).read_bytes()
        (tmp_path / "weights" / files["tokenizer"]).write_bytes(model_bytes)
    (tmp_path / "weights" / "hyperparams.yaml").write_text(text)
    for path in (tmp_path / "weights").iterdir():
        file_server.files[f"/shipped/{path.name}"] = path.read_bytes()
    asr = Pretrained.from_hparams(f"{file_server.url}/shipped", savedir=tmp_path / "s")
    if "tokenizer" in files:
        assert isinstance(asr.hparams["tokenizer"], SentencePieceTokenizer)
    for name, module in asr.mods.items():
        if name in files:
            expected = built["pretrainer"].loadables[name].state_dict()
            assert all(torch.equal(module.state_dict()[k], v) for k, v in expected.items()), name
