"""recipes/FSDD/separation: test mixtures of real speakers held out of training, training mixtures of the
other real speakers (with the built-in corpus' voices on request), and fine-tuning from another run's
separator. Prepared on a small FSDD-named folder the tests make, and on the real recordings when
SPEECHKIT_FSDD names an FSDD checkout (CI sets it)."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from speechkit.errors import DataError
from tests.helpers.scripts import load_script
from tests.recipes.recipe_helpers import run_script, write_speaker_corpus
from tests.recipes.test_fsdd_recipe import link_real_fsdd, write_fsdd

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "FSDD" / "separation"
REAL_FSDD = Path(os.environ["SPEECHKIT_FSDD"]) if os.environ.get("SPEECHKIT_FSDD") else None


prepare = load_script(RECIPE / "prepare.py", "fsdd_separation_prepare")


def hparams(fsdd: Path, prepared: Path, corpus: Path = None, held_out: str = "bob-cyd", **changes) -> dict:
    """The recipe's data keys, small: 6 + 2 strings per speaker, a few mixtures."""
    return {"data_folder": str(fsdd), "prepared_folder": str(prepared), "held_out": held_out,
            "mixtures_folder": str(prepared / "separation" / held_out), "train_sources": "real",
            "data_seed": 7, "train_strings": 6, "valid_strings": 2, "num_speakers": 2, "sample_rate": 8000,
            "level_range_db": 5.0, "num_valid_mixtures": 3, "num_test_mixtures": 5, "seed": 1,
            "check_data": False, "corpus_folder": str(corpus), "corpus_size": None, "test_voices": [],
            "valid_voices": [], **changes}


@pytest.fixture
def fsdd(tmp_path) -> Path:
    return write_fsdd(tmp_path / "fsdd", speakers=("ann", "bob", "cyd", "dee"))


def load(path) -> dict:
    return json.loads(Path(path).read_text())


def mixture_speakers(path) -> set:
    return {(row["s1_spk"], row["s2_spk"]) for row in load(path).values()}


def test_test_mixtures_pair_the_held_out_speakers_and_training_mixes_the_others(fsdd, tmp_path):
    paths = prepare.prepare_manifests(hparams(fsdd, tmp_path / "prep"))
    train = load(paths["train"])
    assert {row["spk"] for row in train.values()} == {"recorded-ann", "recorded-dee"}
    assert len(train) == 2 * 6  # the strings of recordings 5-6 of the two training speakers
    assert all(os.path.isabs(row["wav"]) and "-train-" in utt_id for utt_id, row in train.items())
    held_out = {"recorded-bob", "recorded-cyd"}
    test_pairs = mixture_speakers(paths["test"])
    assert len(load(paths["test"])) == 5 and all(set(pair) == held_out for pair in test_pairs)
    assert all(set(pair) == {"recorded-ann", "recorded-dee"} for pair in mixture_speakers(paths["valid"]))
    # Test sources: every string of the held-out speakers (both roles); valid: the training speakers' 0-4.
    assert len(load(Path(paths["test"]).parent / "sources-test.json")) == 2 * (6 + 2)
    valid_sources = load(Path(paths["valid"]).parent / "sources-valid.json")
    assert len(valid_sources) == 2 * 2 and all("-valid-" in utt_id for utt_id in valid_sources)


def test_real_and_synthetic_training_sources_keep_the_corpus_test_voices_out(fsdd, tmp_path):
    corpus = write_speaker_corpus(tmp_path / "corpus")
    settings = hparams(fsdd, tmp_path / "prep", corpus, train_sources="real+synthetic")
    paths = prepare.prepare_manifests(settings)
    train = load(paths["train"])
    assert Path(paths["train"]).name == "sources-train-real+synthetic.json"
    assert {row["spk"] for row in train.values()} == {"recorded-ann", "recorded-dee", "a", "b", "c", "d"}
    assert all(os.path.isfile(row["wav"]) for row in train.values())  # corpus paths made absolute


def test_written_mixtures_are_reused_and_other_counts_refused(fsdd, tmp_path):
    settings = hparams(fsdd, tmp_path / "prep")
    first = prepare.prepare_manifests(settings)
    written = Path(first["test"]).read_text()
    assert prepare.prepare_manifests(settings) == first and Path(first["test"]).read_text() == written
    with pytest.raises(DataError, match=r"test\.json holds 5 mixtures, but num_test_mixtures is 6"):
        prepare.prepare_manifests({**settings, "num_test_mixtures": 6})


@pytest.mark.parametrize("held_out, message", [
    ("bob", "two or more FSDD speakers"),
    (["bob", "cyd"], "joined by '-'"),
    ("bob-zed", r"\['zed'\] are not in the FSDD folder; it holds ann, bob, cyd, dee"),
])
def test_bad_held_out_speakers_are_refused_naming_them(fsdd, tmp_path, held_out, message):
    with pytest.raises(DataError, match=message):
        prepare.prepare_manifests({**hparams(fsdd, tmp_path / "prep"), "held_out": held_out})


def test_unknown_training_sources_and_too_few_training_speakers_are_refused(fsdd, tmp_path):
    with pytest.raises(DataError, match=r"train_sources must be one of .*got 'synthetic'"):
        prepare.prepare_manifests(hparams(fsdd, tmp_path / "prep", train_sources="synthetic"))
    with pytest.raises(DataError, match="speakers"):  # one training speaker left: no valid mixture of two
        prepare.prepare_manifests(hparams(fsdd, tmp_path / "prep", held_out="bob-cyd-dee"))


@pytest.mark.slow
def test_fine_tuning_starts_from_another_runs_separator(fsdd, tmp_path):
    """A run trained from scratch, then a second run started from its save folder scores the same test
    mixtures identically without training; --eval_checkpoint does the same."""
    common = ["hparams/train.yaml", "--data_folder", str(fsdd), "--prepared_folder", str(tmp_path / "prep"),
              "--held_out", "bob-cyd", "--train_strings", "6", "--valid_strings", "2", "--preset", "tiny",
              "--num_valid_mixtures", "3", "--num_test_mixtures", "5", "--train_mixtures_per_epoch", "8",
              "--segment_seconds", "0.3", "--noprogressbar"]
    run_script(RECIPE / "train.py", [*common, "--output_folder", str(tmp_path / "scratch"),
                                     "--number_of_epochs", "1"], timeout=600)
    report = (tmp_path / "scratch" / "separation_test.txt").read_text()
    assert report.startswith("mixtures: 5")
    run_script(RECIPE / "train.py", [*common, "--output_folder", str(tmp_path / "started"), "--test_only",
                                     "--pretrained_checkpoints", str(tmp_path / "scratch" / "save")],
               timeout=600)
    assert (tmp_path / "started" / "separation_test.txt").read_text() == report
    checkpoint = next((tmp_path / "scratch" / "save").glob("CKPT+*"))
    run_script(RECIPE / "train.py", [*common, "--output_folder", str(tmp_path / "evaluated"), "--test_only",
                                     "--eval_checkpoint", str(checkpoint)], timeout=600)
    assert (tmp_path / "evaluated" / "separation_test.txt").read_text() == report


@pytest.mark.skipif(REAL_FSDD is None, reason="SPEECHKIT_FSDD names no FSDD checkout")
def test_real_recordings_give_mixtures_of_two_held_out_speakers(tmp_path):
    """A few real files per speaker (linked, not copied into the repository) prepared end to end."""
    fsdd = tmp_path / "fsdd"
    speakers = link_real_fsdd(REAL_FSDD, fsdd, 4)
    held_out = f"{speakers[0]}-{speakers[1]}"
    paths = prepare.prepare_manifests(hparams(fsdd, tmp_path / "prep", held_out=held_out))
    held = {f"recorded-{s}" for s in speakers[:2]}
    assert all(set(pair) == held for pair in mixture_speakers(paths["test"]))
    assert {row["spk"] for row in load(paths["train"]).values()} == {f"recorded-{s}" for s in speakers[2:4]}
