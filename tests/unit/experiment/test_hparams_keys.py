"""A key the recipe reads but the YAML lacks stops the run when the Brain is built (not at the first
validation), and every unknown or missing key gets the nearest keys of the file, not a list of them all."""

from __future__ import annotations

import importlib.util
import sys
import textwrap

import pytest
import ruamel.yaml
import torch

import speechkit
from speechkit.errors import HparamsError
from speechkit.experiment.hparams import load_hparams
from speechkit.experiment.hparams_keys import Hparams, check_keys_read, did_you_mean, keys_read_by
from speechkit.stage import Stage
from tests.helpers.processes import REPO

YAML = textwrap.dedent("""\
    lr: 0.1
    lm_wieght: 0.5
    beam_size: 4
    length_bonus: 0.0
    ctc_weight: 0.3
    decoding: greedy
    label_smoothing: 0.1
    number_of_epochs: 2
    output_folder: results
    save_folder: results/save
    train_log: results/train_log.txt
    valid_decoding_every: 1
    data_folder: data
    test_set: test
    max_train_duration: 20.0
    wer_file: results/wer.txt
    use_augmentation: true
    """)


class Decoding(speechkit.Brain):
    def compute_forward(self, batch, stage):
        hp, scale = self.hparams, 1.0
        return self.modules.model(batch[0]) * scale * hp.ctc_weight

    def compute_objectives(self, predictions, batch, stage):
        if stage != Stage.TRAIN:
            predictions = predictions * self.hparams.lm_weight  # read at the first validation only
        if getattr(self.hparams, "extra_penalty", None) is not None:
            predictions = predictions + self.hparams.extra_penalty
        return torch.nn.functional.mse_loss(predictions, batch[1])


def test_a_key_the_brain_reads_but_the_yaml_misspells_fails_when_the_brain_is_built(tmp_path):
    (tmp_path / "train.yaml").write_text(YAML)
    hparams = load_hparams(tmp_path / "train.yaml")
    with pytest.raises(HparamsError) as error:
        Decoding({"model": torch.nn.Linear(2, 1)}, lambda p: torch.optim.SGD(p, lr=0.1), hparams)
    message = str(error.value)
    assert "train.yaml" in message and "no key 'lm_weight'" in message, message
    assert "Decoding.compute_objectives" in message and "test_hparams_keys.py" in message, message
    assert "did you mean 'lm_wieght'" in message, message


def test_every_key_read_present_builds_the_brain_and_optional_keys_are_not_required(tmp_path):
    (tmp_path / "train.yaml").write_text(YAML.replace("lm_wieght", "lm_weight"))
    hparams = load_hparams(tmp_path / "train.yaml")
    Decoding({"model": torch.nn.Linear(2, 1)}, lambda p: torch.optim.SGD(p, lr=0.1), hparams)
    keys = {read.key for read in keys_read_by(Decoding, speechkit.Brain)}
    assert keys == {"ctc_weight", "lm_weight"}  # through the alias `hp` too; extra_penalty is optional


def test_a_misspelled_override_names_the_nearest_key_not_a_list(tmp_path):
    (tmp_path / "train.yaml").write_text(YAML.replace("lm_wieght", "lm_weight"))
    with pytest.raises(HparamsError) as error:
        load_hparams(tmp_path / "train.yaml", {"lm_wieght": 0.3})
    message = str(error.value)
    assert "override 'lm_wieght'" in message and "did you mean 'lm_weight'?" in message, message
    assert "beam_size" not in message and "number_of_epochs" not in message, message
    with pytest.raises(HparamsError, match="names no key of the file .the file has 17 keys"):
        load_hparams(tmp_path / "train.yaml", {"zzzz": 1})


def test_reading_a_missing_key_of_loaded_hparams_names_the_file_and_the_nearest_key(tmp_path):
    (tmp_path / "train.yaml").write_text(YAML)
    hparams = load_hparams(tmp_path / "train.yaml")
    assert isinstance(hparams, Hparams) and hparams.get("lm_weight") is None
    with pytest.raises(HparamsError, match=r"train.yaml: no key 'lm_weight' \(did you mean 'lm_wieght'\?\)"):
        hparams["lm_weight"]
    with pytest.raises(KeyError):  # code written for a plain dict keeps working
        hparams["lm_weight"]


def test_did_you_mean_names_up_to_three_close_keys_and_nothing_when_none_is_close():
    assert did_you_mean("lr", ["lm_weight", "beam"]) == ""
    assert did_you_mean("LM-Weight", ["lm_weight", "beam"]) == " (did you mean 'lm_weight'?)"
    assert did_you_mean("seed", ["seed1", "seed2", "seed3", "seeds", "speed"]).count("'") == 6


def _brain_class(script, name):
    spec = importlib.util.spec_from_file_location(f"_keys_{name}", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return getattr(module, name)


def _top_level_keys(path):
    return set(ruamel.yaml.YAML(typ="rt").load(path.read_text()))


@pytest.mark.parametrize("script, brain, yamls", [
    ("templates/speech_recognition/ASR/train.py", "ASR", ["train.yaml", "finetune.yaml"]),
    ("templates/separation/train.py", "Separation", ["train.yaml"]),
    ("templates/ssl_finetune/train.py", "CTCFineTuning", ["train.yaml"]),
    ("templates/whisper_finetune/train.py", "WhisperFineTuning", ["train.yaml"]),
])
def test_the_templates_yamls_have_every_key_their_brain_reads(script, brain, yamls):
    cls = _brain_class(REPO / script, brain)
    assert keys_read_by(cls, speechkit.Brain), "the scan found no key read: it would check nothing"
    for name in yamls:
        path = REPO / script.rsplit("/", 1)[0] / "hparams" / name
        keys = _top_level_keys(path)
        check_keys_read(cls, keys, speechkit.Brain, source=str(path))
        first = keys_read_by(cls, speechkit.Brain)[0].key
        with pytest.raises(HparamsError, match=f"no key '{first}'"):
            check_keys_read(cls, keys - {first}, speechkit.Brain, source=str(path))
