"""``speechkit new-recipe separation DEST`` copies a separation recipe that runs from its new folder and
exports a model that ``speechkit separate`` uses."""
from __future__ import annotations

from pathlib import Path

import pytest

from speechkit.cli import main as speechkit_main
from speechkit.templating import available_templates
from tests.recipes.recipe_helpers import run_script, separation_args, write_speaker_corpus

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def test_template_is_listed_and_matches_the_recipe():
    assert "separation" in available_templates()
    recipe = REPO / "recipes" / "SynthSpeech" / "separation"
    for name in ("train.py", "prepare.py", "hparams/inference.yaml"):
        assert (REPO / "templates" / "separation" / name).read_text() == (recipe / name).read_text(), name


def test_copied_template_trains_exports_and_separates(tmp_path, capsys):
    dest = tmp_path / "my_separation"
    assert speechkit_main(["new-recipe", "separation", str(dest)]) == 0
    # The corpus the copy builds goes inside the copy, never into the checkout or the installed package.
    train_yaml = (dest / "hparams" / "train.yaml").read_text()
    assert "data_folder: data/SynthSpeech-separation-espeak\n" in train_yaml
    corpus = write_speaker_corpus(tmp_path / "corpus")
    run_script(dest / "train.py", separation_args(corpus, dest / "results" / "run"), timeout=600)
    report = (dest / "results" / "run" / "separation_test.txt").read_text()
    assert report.startswith("mixtures: 7") and "sdri" in report
    inference = (dest / "hparams" / "inference.yaml").read_text()
    tiny = inference.replace("enc_dim: 128", "enc_dim: 16").replace("kernel_size: 32", "kernel_size: 16") \
        .replace("bottleneck_dim: 64", "bottleneck_dim: 8").replace("hidden_dim: 128", "hidden_dim: 16") \
        .replace("blocks_per_repeat: 6", "blocks_per_repeat: 2").replace("repeats: 2", "repeats: 1")
    (tmp_path / "tiny_inference.yaml").write_text(tiny)
    assert speechkit_main(["export", "--checkpoints", str(dest / "results" / "run" / "save"), "--hparams",
                           str(tmp_path / "tiny_inference.yaml"), "--min-key", "loss", "--output",
                           str(tmp_path / "model")]) == 0
    mixture = next((corpus / "mixtures-2spk-8000" / "test" / "mix").iterdir())
    assert speechkit_main(["separate", str(tmp_path / "model"), str(mixture), "--out",
                           str(tmp_path / "out")]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [f"{mixture.stem}_s1.wav",
                                                                    f"{mixture.stem}_s2.wav"]
