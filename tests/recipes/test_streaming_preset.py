"""The streaming preset of the speech recognition template: trains (unidirectional encoder, global
normalization statistics saved with the checkpoint), exports with inference_streaming.yaml, and its stream
gives the offline transcript of the exported model, also as ONNX."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main
from speechkit.pretrained import EncoderASR
from speechkit.templating import copy_template
from tests.recipes.recipe_helpers import TINY_MODEL, run_script

pytestmark = pytest.mark.slow  # recipe processes (a few seconds each)
pytest.importorskip("onnxruntime")


def _resized(inference: Path, out: Path) -> Path:
    sizes = {flag[8:]: value for flag, value in zip(TINY_MODEL[::2], TINY_MODEL[1::2])}
    lines = inference.read_text().splitlines()
    out.write_text("\n".join(f"{line.split(':')[0]}: {sizes[line.split(':')[0]]}"
                             if line.split(":")[0] in sizes else line for line in lines) + "\n")
    return out


def test_streaming_preset_trains_exports_and_streams_as_offline(tiny_corpus, tmp_path):
    warnings.simplefilter("ignore")
    dest = copy_template("speech_recognition", tmp_path / "my_asr")
    run_script(dest / "Tokenizer" / "train.py",
               ["hparams/tokenizer.yaml", "--data_folder", str(tiny_corpus), "--token_type", "char",
                "--vocab_size", "40"])
    asr = dest / "ASR"
    run_script(asr / "train.py", ["hparams/train.yaml", "--data_folder", str(tiny_corpus), *TINY_MODEL,
                                  "--model.streaming", "True", "--lm_weight", "0", "--debug",
                                  "--noprogressbar", "--number_of_epochs", "1"])
    save = asr / "results" / "asr" / "1234" / "save"
    best = Checkpointer(save).find_checkpoint(min_key="WER").path
    statistics = torch.load(best / "normalize.ckpt", weights_only=True)
    assert float(statistics["count"]) > 0  # the training frames' statistics, saved with the model

    model = tmp_path / "streaming-model"
    tokenizer = dest / "Tokenizer" / "results" / "tokenizer" / "tokenizer.model"
    inference = _resized(asr / "hparams" / "inference_streaming.yaml", asr / "hparams" / "tiny.yaml")
    # Trained with --lm_weight 0: the folder's beam search keeps the LM's initial weights, on purpose here.
    inference.write_text(inference.read_text() + "untrained_loadables: [lm]\n")
    assert speechkit_main(["export", "--checkpoints", str(save), "--hparams", str(inference), "--min-key",
                           "WER", "--file", f"tokenizer={tokenizer}", "--output", str(model), "--format",
                           "onnx"]) == 0
    recognizer = EncoderASR.from_hparams(str(model))
    assert torch.equal(recognizer.mods["normalize"].count, statistics["count"])
    audio = recognizer.load_audio(tiny_corpus / "test" / "utt-test-000.flac")
    offline = recognizer.transcribe_file(str(tiny_corpus / "test" / "utt-test-000.flac"))
    stream = recognizer.stream()
    for piece in audio.split(5120):
        stream.accept(piece)
    assert stream.finish() == offline
    onnx = EncoderASR.from_hparams(str(model), backend="onnx")
    assert onnx.transcribe_file(str(tiny_corpus / "test" / "utt-test-000.flac")) == offline
