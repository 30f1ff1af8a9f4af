"""speechkit export: --output never replaces the working directory or a folder export did not write, and the
model card gives the test-set score and how the checkpoint was really chosen."""
from __future__ import annotations

import pytest
import torch

from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main

INFERENCE_YAML = """\
sample_rate: 16000
interface: EncoderASR
encoder: !new:tiny_asr.FrameToneEncoder
tokenizer: !new:tiny_asr.CharTokenizer
modules:
  encoder: !ref <encoder>
encoder_pipeline: [encoder]
decoding: {blank_index: 0}
pretrainer: !new:speechkit.pretrained.Pretrainer
  loadables:
    encoder: !ref <encoder>
    tokenizer: !ref <tokenizer>
  paths:
    encoder: encoder.safetensors
    tokenizer: tokenizer.json
"""


@pytest.fixture
def run_folder(tiny_asr, tmp_path):
    """A run's output folder: save/ with the one checkpoint a run keeping the best by loss would keep, and a
    train_log.txt whose last line is the test stage."""
    model = torch.nn.ModuleDict({"encoder": tiny_asr.FrameToneEncoder()})
    model["encoder"].load_state_dict(tiny_asr.true_weights())
    tokenizer = tiny_asr.CharTokenizer(tiny_asr.SYMBOLS)
    Checkpointer(tmp_path / "run" / "save", {"model": model, "tokenizer": tokenizer}).save_checkpoint(
        meta={"loss": 0.4, "WER": 12.5}, epoch=3)
    (tmp_path / "run" / "train_log.txt").write_text(
        "epoch: 3 | stage: valid | loss: 0.4 | WER: 12.5 | duration: 1.0s\n"
        "stage: test | loss: 0.45 | WER: 14.25 | CER: 6.5 | duration: 2.0s\n")
    (tmp_path / "inference.yaml").write_text(INFERENCE_YAML)
    return tmp_path


def _export(root, output, *extra):
    return speechkit_main(["export", "--checkpoints", str(root / "run" / "save"), "--hparams",
                           str(root / "inference.yaml"), "--output", str(output), "--min-key", "WER",
                           "--map", "encoder=model:encoder.", "--no-verify", *extra])


def test_output_dot_with_force_never_wipes_the_working_directory(run_folder, monkeypatch, capsys):
    work = run_folder / "work"
    work.mkdir()
    (work / "my_notes.txt").write_text("a day of work")
    monkeypatch.chdir(work)
    assert _export(run_folder, ".", "--force") == 1
    assert "is the working directory" in capsys.readouterr().err
    assert _export(run_folder, "..", "--force") == 1
    assert (work / "my_notes.txt").read_text() == "a day of work"


def test_force_replaces_only_a_folder_export_wrote(run_folder, capsys):
    other = run_folder / "data"
    (other / "audio").mkdir(parents=True)
    (other / "train.json").write_text("{}")
    assert _export(run_folder, other, "--force") == 1
    assert "replaces only a model folder speechkit export wrote" in capsys.readouterr().err
    assert (other / "train.json").read_text() == "{}"
    assert _export(run_folder, run_folder / "run", "--force") == 1  # holds the checkpoints
    assert "holds the input" in capsys.readouterr().err
    model = run_folder / "model"
    assert _export(run_folder, model) == 0
    assert _export(run_folder, model, "--force") == 0  # an exported folder is replaced


def test_the_card_gives_the_test_score_and_the_real_selection(run_folder):
    assert _export(run_folder, run_folder / "model") == 0
    card = (run_folder / "model" / "README.md").read_text()
    assert "| WER | 14.25 |" in card and "| CER | 6.5 |" in card  # the test set, not the validation WER
    assert "Validation figures of that checkpoint" in card and "| WER | 12.5 |" in card
    assert "lowest validation `WER` among 1 kept checkpoint(s)" in card
    assert "the run chose which to keep (`ckpt_keep`) by validation loss" in card
    assert "best by `WER`" not in card


def test_exporting_graphs_never_wipes_the_working_directory_or_the_source(run_folder, monkeypatch, capsys):
    model = run_folder / "model"
    assert _export(run_folder, model) == 0
    work = run_folder / "work"
    work.mkdir()
    (work / "my_notes.txt").write_text("a day of work")
    monkeypatch.chdir(work)
    graphs = ["export", "--model", str(model), "--format", "onnx", "--force", "--output"]
    assert speechkit_main([*graphs, "."]) == 1
    assert "is the working directory" in capsys.readouterr().err
    assert speechkit_main([*graphs, str(model)]) == 1
    assert "holds the input" in capsys.readouterr().err
    assert (work / "my_notes.txt").read_text() == "a day of work" and (model / "hyperparams.yaml").is_file()
