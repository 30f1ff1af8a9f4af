"""The command-line paths of exported graphs and streaming: a recipe checkpoint exported with --format,
fetched from the Hub and a URL with backend="onnx"; `speechkit transcribe --backend onnx` and `--stream` in
real processes."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import soundfile
import torch

import speechkit
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.cli import main as speechkit_main
from speechkit.errors import UnsafeSourceError
from speechkit.pretrained import EncoderASR
from speechkit.tokenizers import SentencePieceTokenizer
from tests.helpers.export_models import speech_like, write_recognizer
from tests.integration.pretrained.test_recipe_export import INFERENCE, SMALL, TEMPLATE

pytest.importorskip("onnxruntime")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_recipe_checkpoint_exported_as_graphs_and_fetched_from_every_source(tmp_path, hub_server,
                                                                             file_server):
    warnings.simplefilter("ignore")
    tokenizer = SentencePieceTokenizer.train(["a bad cab", "dead beef", "a fed bee", "bad face"] * 10,
                                             tmp_path / "tok", vocab_size=30, model_type="char",
                                             hard_vocab_limit=False)
    sizes = dict(SMALL, vocab_size=tokenizer.vocab_size)
    modules = speechkit.load_hparams(TEMPLATE, sizes)["modules"]
    Checkpointer(tmp_path / "save", {**modules, "counter": EpochCounter(3)}).save_checkpoint(
        meta={"WER": 20.0}, epoch=1)
    (tmp_path / "inference.yaml").write_text(INFERENCE.format(**sizes))
    folder = tmp_path / "exported"
    assert speechkit_main(["export", "--checkpoints", str(tmp_path / "save"), "--hparams",
                           str(tmp_path / "inference.yaml"), "--min-key", "WER", "--output", str(folder),
                           "--file", f"tokenizer={tokenizer.model_path}", "--format", "onnx",
                           "--format", "torchscript"]) == 0
    card = (folder / "README.md").read_text()
    assert "| WER | 20.0 |" in card and "`recognizer.onnx` (onnx, opset 17" in card
    assert "`recognizer.pt` (torchscript" in card

    wavs, lengths = speech_like([12_345, 8_000, 10_001], seed=9)
    expected = EncoderASR.from_hparams(str(folder)).transcribe_batch(wavs, lengths)[0]
    assert all(expected)
    hub_server.repos["org/asr-onnx"] = {"main": {p.name: p.read_bytes() for p in folder.iterdir()}}
    for path in folder.iterdir():
        file_server.files[f"/asr-onnx/{path.name}"] = path.read_bytes()
    sources = {"local": str(folder), "hub": "org/asr-onnx", "url": f"{file_server.url}/asr-onnx"}
    for name, source in sources.items():
        for backend in ("onnx", "torchscript"):
            asr = EncoderASR.from_hparams(source, savedir=tmp_path / f"s-{name}-{backend}", backend=backend,
                                          trust_remote_code=backend == "torchscript" and name != "local")
            assert asr.transcribe_batch(wavs, lengths)[0] == expected, (name, backend)
    with pytest.raises(UnsafeSourceError, match="TorchScript file holds code"):
        EncoderASR.from_hparams("org/asr-onnx", savedir=tmp_path / "refused", backend="torchscript")


def _speechkit(*args, timeout=240) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "speechkit", *args], capture_output=True, text=True,
                            timeout=timeout, env=env, cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.mark.slow  # five processes, each importing torch
def test_transcribe_backends_and_stream_in_real_processes(tmp_path):
    warnings.simplefilter("ignore")
    model = write_recognizer(tmp_path / "model", streaming=True)
    wavs, lengths = speech_like([30_000], seed=2)
    audio = tmp_path / "speech.wav"
    soundfile.write(audio, wavs[0].numpy(), 16000, subtype="FLOAT")
    exported = tmp_path / "exported"
    _speechkit("export", "--model", str(model), "--format", "onnx", "--output", str(exported))

    offline = _speechkit("transcribe", str(model), str(audio)).stdout
    text = offline.strip().split("\t")[1]
    assert text
    assert _speechkit("transcribe", str(exported), str(audio), "--backend", "onnx").stdout == offline

    streamed = _speechkit("transcribe", "--stream", "--chunk-ms", "320", str(model), str(audio)).stdout
    lines = streamed.strip().splitlines()
    assert lines[-1] == offline.strip()
    partials = [line.split("\t", 1)[1] for line in lines[:-1]]
    assert lines[0].startswith(f"{audio} [partial]\t") and len(partials) >= 2
    assert len(set(partials)) == len(partials)  # a line only when the partial text changes
    assert all(text.startswith(p) for p in partials)

    through_onnx = _speechkit("transcribe", "--stream", "--backend", "onnx", str(exported), str(audio))
    assert through_onnx.stdout == streamed  # the stream_step graph, its states as inputs and outputs


def test_stream_of_an_offline_model_is_refused_by_name(tmp_path):
    model = write_recognizer(tmp_path / "model", streaming=False)
    audio = tmp_path / "a.wav"
    soundfile.write(audio, torch.zeros(4000).numpy(), 16000)
    assert speechkit_main(["transcribe", "--stream", str(model), str(audio)]) == 1
