"""The run's sizes in an exported model folder: the inference YAML's whole numbers follow the run's."""
from __future__ import annotations

import pytest

from speechkit.errors import HparamsError
from speechkit.export.run_sizes import adapt_sizes, find_run_hparams

INFERENCE = """\
d_model: 256  # the width
num_layers: 4
vocab_size: 0x20
beam_size: 8
lm_weight: 0.5
encoder: !new:speechkit.models.TransformerEncoder
  d_model: !ref <d_model>
"""


def test_whole_numbers_the_run_sets_once_are_taken_and_the_rest_kept():
    run = ("model: !include:ASR.yaml\n  d_model: 128\n  vocab_size: 40\n"
           "lm_weight: 0\nbeam_size: 8\ndecoder: {num_layers: 2}\nencoder: {num_layers: 6}\n")
    text, changed, ambiguous = adapt_sizes(INFERENCE, run, "run.yaml")
    assert changed == {"d_model": (256, 128), "vocab_size": (32, 40)}
    assert ambiguous == {"num_layers": [2, 6]}  # two modules, two sizes: left as it is
    assert text.splitlines()[:5] == ["d_model: 128  # the width", "num_layers: 4", "vocab_size: 40",
                                     "beam_size: 8", "lm_weight: 0.5"]  # a float is never a size
    assert text.splitlines()[6] == "  d_model: !ref <d_model>"  # nested keys are not rewritten


def test_a_run_without_the_keys_changes_nothing():
    assert adapt_sizes(INFERENCE, "lr: 0.1\n", "run.yaml") == (INFERENCE, {}, {})


def test_an_unreadable_run_yaml_is_an_error_naming_it():
    with pytest.raises(HparamsError, match="run.yaml: not readable YAML"):
        adapt_sizes(INFERENCE, "a: [1, 2\n", "run.yaml")


def test_the_run_is_the_nearest_experiment_folder_above_the_checkpoints(tmp_path):
    run = tmp_path / "results" / "asr" / "1234"
    checkpoint = run / "save" / "CKPT+2024"
    checkpoint.mkdir(parents=True)
    (run / "hyperparams.yaml").write_text("d_model: 128\n")
    assert find_run_hparams(checkpoint) is None  # no command.txt: not an experiment folder
    (run / "command.txt").write_text("python train.py hparams/train.yaml\n")
    assert find_run_hparams(checkpoint) == (run / "hyperparams.yaml").resolve()
    assert find_run_hparams(run / "save") == (run / "hyperparams.yaml").resolve()
    assert find_run_hparams(checkpoint, levels=1) is None
