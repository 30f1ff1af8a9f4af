"""recipes/FSDD/speaker: verification trials among real speakers held out of training, the built-in
corpus' voices (and, with ``real_in_train``, the other real speakers) in training. Prepared on a small
FSDD-named folder and corpus the tests make, and on the real recordings when SPEECHKIT_FSDD names an FSDD
checkout (CI sets it)."""
from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

from speechkit.data.trials import read_trials
from speechkit.errors import DataError
from tests.recipes.recipe_helpers import write_speaker_corpus
from tests.recipes.test_fsdd_recipe import link_real_fsdd, write_fsdd

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "FSDD" / "speaker"
REAL_FSDD = Path(os.environ["SPEECHKIT_FSDD"]) if os.environ.get("SPEECHKIT_FSDD") else None


def load_prepare():
    spec = importlib.util.spec_from_file_location("fsdd_speaker_prepare", RECIPE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


prepare = load_prepare()


def hparams(fsdd: Path, corpus: Path, prepared: Path, **changes) -> dict:
    """The recipe's data keys, small: 6 + 2 strings per speaker, a cohort of 5."""
    return {"data_folder": str(fsdd), "prepared_folder": str(prepared), "corpus_folder": str(corpus),
            "corpus_size": None, "held_out": ["bob", "cyd"], "real_in_train": False, "data_seed": 7,
            "train_strings": 6, "valid_strings": 2, "targets_per_utt": 3, "nontargets_per_utt": 6,
            "cohort_size": 5, "seed": 1, "test_speakers": [], "valid_speakers": [], **changes}


@pytest.fixture
def folders(tmp_path) -> tuple:
    fsdd = write_fsdd(tmp_path / "fsdd", speakers=("ann", "bob", "cyd", "dee"))
    return fsdd, write_speaker_corpus(tmp_path / "corpus"), tmp_path / "prep"


def load(path) -> dict:
    return json.loads(Path(path).read_text())


def speakers_of(rows: dict) -> set:
    return {row["spk"] for row in rows.values() if not row.get("cohort")}


def test_held_out_speakers_are_tested_and_never_trained(folders):
    fsdd, corpus, prepared = folders
    synthetic = prepare.prepare_manifests(hparams(fsdd, corpus, prepared))
    real = prepare.prepare_manifests(hparams(fsdd, corpus, prepared, real_in_train=True))
    assert synthetic["train"] != real["train"]  # one folder per held-out set and training condition
    rows = {name: {split: load(paths[split]) for split in ("train", "valid", "test")}
            for name, paths in (("synthetic", synthetic), ("real", real))}
    assert speakers_of(rows["synthetic"]["train"]) == {"a", "b", "c", "d"}
    assert speakers_of(rows["real"]["train"]) == {"a", "b", "c", "d", "recorded-ann", "recorded-dee"}
    for name in rows:
        assert speakers_of(rows[name]["valid"]) == {"e", "f"}
        assert speakers_of(rows[name]["test"]) == {"recorded-bob", "recorded-cyd"}
        test = rows[name]["test"]
        assert sum(row["cohort"] for row in test.values()) == 5
        assert {test[u]["spk"] for u in test if test[u]["cohort"]} <= speakers_of(rows[name]["train"])
        for split_rows in rows[name].values():  # absolute paths: the corpus' and the strings' folders
            assert all(os.path.isfile(row["wav"]) for row in split_rows.values())
    # The same trials whatever trains: the two conditions are compared on one list.
    trials = read_trials(synthetic["test_trials"], set(rows["synthetic"]["test"]))
    assert trials == read_trials(real["test_trials"])
    test = rows["synthetic"]["test"]
    strings = json.loads((prepared / "strings" / "strings.json").read_text())["rows"]
    sources = {utt_id: set(row["sources"].split())
               for role in strings.values() for utt_id, row in role.items()}
    for trial in trials:
        assert trial.label == int(test[trial.enrol]["spk"] == test[trial.test]["spk"])
        assert trial.kind == ("target" if trial.label else "nontarget")
        assert not sources[trial.enrol] & sources[trial.test]  # no take compared with itself
    for name in rows:  # one set of fields per manifest (the dataset reader asks it)
        for split_rows in rows[name].values():
            assert len({tuple(sorted(set(row) - {"cohort"})) for row in split_rows.values()}) == 1
    assert sum(t.label for t in trials) > 10 and sum(1 - t.label for t in trials) > 30
    valid = read_trials(synthetic["valid_trials"], set(rows["synthetic"]["valid"]))
    assert {rows["synthetic"]["valid"][t.enrol]["spk"] for t in valid} == {"e", "f"}


def test_prepared_manifests_are_reused_and_strings_shared_with_the_asr_recipe(folders):
    fsdd, corpus, prepared = folders
    paths = prepare.prepare_manifests(hparams(fsdd, corpus, prepared))
    stamps = {key: os.stat(path).st_mtime_ns for key, path in paths.items()}
    assert prepare.prepare_manifests(hparams(fsdd, corpus, prepared)) == paths
    assert {key: os.stat(path).st_mtime_ns for key, path in paths.items()} == stamps
    # The ASR recipe's fold finds the same strings (same settings) and keeps them.
    before = sorted((prepared / "strings" / "bob").iterdir())
    prepare.digits.prepare_fsdd(str(fsdd), str(prepared), "ann",
                                prepare.digits.StringSettings(seed=7, train_strings=6, valid_strings=2))
    assert sorted((prepared / "strings" / "bob").iterdir()) == before


@pytest.mark.parametrize("held_out, message", [
    (["bob"], "two speakers or more"), (["bob", "bob"], "two speakers or more"),
    (["bob", "zed"], r"\['zed'\] are not in the FSDD folder; it holds ann, bob, cyd, dee"),
    ("bob", "must be a list"), ([1, 2], "must be a list"), (None, "must be a list")])
def test_bad_held_out_speakers_are_refused_naming_them(folders, held_out, message):
    fsdd, corpus, prepared = folders
    with pytest.raises(DataError, match=message):
        prepare.prepare_manifests(hparams(fsdd, corpus, prepared, held_out=held_out))
    assert not (prepared / "speaker").exists()


def test_a_broken_recording_or_missing_folder_is_named(folders, tmp_path):
    fsdd, corpus, prepared = folders
    with pytest.raises(DataError, match="does not exist"):
        prepare.prepare_manifests(hparams(tmp_path / "nowhere", corpus, prepared))
    (fsdd / "recordings" / "3_bob_9.wav").write_bytes(b"not audio")
    with pytest.raises(DataError, match="3_bob_9.wav: unreadable audio"):
        prepare.prepare_manifests(hparams(fsdd, corpus, prepared))
    assert not (prepared / "speaker").exists()


def test_a_synthetic_test_voice_in_training_is_refused(folders):
    fsdd, corpus, prepared = folders
    train = load(corpus / "train.json")
    train["leak"] = {**next(iter(load(corpus / "valid.json").values())), "spk": "e"}
    (corpus / "train.json").write_text(json.dumps(train))
    with pytest.raises(DataError, match=r"share speakers \['e'\]"):
        prepare.prepare_manifests(hparams(fsdd, corpus, prepared))


@pytest.mark.skipif(REAL_FSDD is None, reason="SPEECHKIT_FSDD names no FSDD checkout")
def test_real_recordings_give_trials_among_two_held_out_speakers(tmp_path):
    """A few real files per speaker (linked, not copied into the repository) prepared end to end."""
    fsdd = tmp_path / "fsdd"
    speakers = link_real_fsdd(REAL_FSDD, fsdd, 3)
    corpus = write_speaker_corpus(tmp_path / "corpus")
    paths = prepare.prepare_manifests(hparams(fsdd, corpus, tmp_path / "prep", held_out=speakers[:2],
                                              real_in_train=True))
    test = load(paths["test"])
    assert speakers_of(test) == {f"recorded-{s}" for s in speakers[:2]}
    assert f"recorded-{speakers[2]}" in speakers_of(load(paths["train"]))
    trials = read_trials(paths["test_trials"], set(test))
    assert {t.kind for t in trials} == {"target", "nontarget"}
