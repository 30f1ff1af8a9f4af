"""recipes/SynthSpeech/ASR: its hparams extend the speech recognition template's (the same settings, the
recipe's own model file), and its scripts train with them."""
from __future__ import annotations

from pathlib import Path

import pytest

from speechkit.experiment.hparams import load_hparams, resolve_hparams_text
from tests.recipes.recipe_helpers import TINY_MODEL, run_script

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "SynthSpeech" / "ASR"
TEMPLATE = REPO / "templates" / "speech_recognition" / "ASR"


def _resolved(path: Path) -> str:
    """The file as the run records it, with the folders of the recipe and the template named alike."""
    text = resolve_hparams_text(str(path))
    return text.replace(str(RECIPE), "ASR").replace(str(TEMPLATE), "ASR")


@pytest.mark.parametrize("name", ["train.yaml", "finetune.yaml", "ASR.yaml", "inference.yaml",
                                  "inference_no_lm.yaml"])
def test_the_recipe_yaml_is_the_template_yaml(name):
    # The recipe writes only what differs, and today nothing does: every key, value and reference is the
    # template's (train.yaml's model comes from the recipe's ASR.yaml, which is the template's).
    assert _resolved(RECIPE / "hparams" / name) == _resolved(TEMPLATE / "hparams" / name)


def test_the_lm_recipe_reads_the_model_of_the_asr_recipe():
    # ../LM includes the recipe's ASR.yaml, which extends the template's: the keys it references are there.
    hparams = load_hparams(RECIPE.parent / "LM" / "hparams" / "lm.yaml")
    assert (hparams["asr_model"]["n_mels"], hparams["asr_model"]["streaming"]) == (80, False)


@pytest.mark.slow
def test_the_recipe_trains_and_scores_its_test_set(tiny_corpus, tmp_path):
    out = tmp_path / "asr"
    run_script(RECIPE / "train.py",
               ["hparams/train.yaml", "--data_folder", str(tiny_corpus), "--output_folder", str(out),
                "--model.tokenizer_file", str(tmp_path / "tokenizer" / "tokenizer.model"), "--lm_weight", "0",
                *TINY_MODEL, "--debug", "--noprogressbar", "--number_of_epochs", "1"])
    assert "WER" in (out / "wer_test.txt").read_text()
    written = (out / "hyperparams.yaml").read_text()  # the template's augmentation came with the extension
    assert "augmentation_preset: default" in written and "speechkit.augment.Augmenter" in written
