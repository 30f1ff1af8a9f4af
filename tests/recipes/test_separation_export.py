"""The separation recipe's model, trained with its defaults for a few epochs (the tiny preset), exports to
ONNX through ``speechkit export --checkpoints ... --format onnx`` and serves the same sources from the
graph: the export check holds for a trained model, not only for random weights."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from speechkit.cli import main as speechkit_main
from tests.recipes.recipe_helpers import run_script, separation_args, write_speaker_corpus

pytestmark = pytest.mark.slow
pytest.importorskip("onnxruntime")

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "SynthSpeech" / "separation"


def test_the_trained_separator_exports_to_onnx(tmp_path):
    from speechkit.export.graphs import speech_like_waveforms
    from speechkit.pretrained import Pretrained

    corpus = write_speaker_corpus(tmp_path / "corpus")
    args = separation_args(corpus, tmp_path / "run")
    args[args.index("--number_of_epochs") + 1] = "2"
    run_script(RECIPE / "train.py", args, timeout=900)
    tiny = (RECIPE / "hparams" / "inference.yaml").read_text() \
        .replace("enc_dim: 128", "enc_dim: 16").replace("kernel_size: 32", "kernel_size: 16") \
        .replace("bottleneck_dim: 64", "bottleneck_dim: 8").replace("hidden_dim: 128", "hidden_dim: 16") \
        .replace("blocks_per_repeat: 6", "blocks_per_repeat: 2").replace("repeats: 2", "repeats: 1")
    (tmp_path / "inference.yaml").write_text(tiny)
    out = tmp_path / "model-onnx"
    assert speechkit_main(["export", "--checkpoints", str(tmp_path / "run" / "save"), "--hparams",
                           str(tmp_path / "inference.yaml"), "--min-key", "loss", "--format", "onnx",
                           "--output", str(out)]) == 0
    entry = json.loads((out / "export.json").read_text())["artefacts"]["separator.onnx"]
    assert entry["max_rel_diff"] < 1e-4
    wav = speech_like_waveforms([6000])
    exported = Pretrained.from_hparams(str(out), backend="onnx").separate_batch(wav)
    reference = Pretrained.from_hparams(str(out)).separate_batch(wav)
    assert torch.allclose(exported, reference, atol=1e-5 + 1e-4 * float(reference.abs().max()))
