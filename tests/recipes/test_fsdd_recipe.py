"""recipes/FSDD/ASR: isolated digits and connected strings of real speakers, split by speaker; prepared on a
small FSDD-named folder the tests make (and on the real recordings of the FSDD checkout that the environment
variable SPEECHKIT_FSDD names, when it is set: CI sets it)."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile

from speechkit.errors import DataError
from tests.helpers.folders import folder_digest
from tests.recipes.recipe_helpers import TINY_MODEL, run_script

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "FSDD" / "ASR"
#: An FSDD checkout (a folder holding recordings/), when the environment names one.
REAL_FSDD = Path(os.environ.get("SPEECHKIT_FSDD", "")) if os.environ.get("SPEECHKIT_FSDD") else None


def load_prepare():
    spec = importlib.util.spec_from_file_location("fsdd_prepare", RECIPE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


prepare = load_prepare()
ENGINES_PRESENT = all(shutil.which(program) for program in ("flite", "festival", "espeak-ng"))
SMALL = prepare.StringSettings(seed=7, train_strings=6, valid_strings=2)


def write_fsdd(root: Path, speakers=("ann", "bob", "cyd"), indices=range(7), rate=8000) -> Path:
    """``root/recordings/{digit}_{speaker}_{index}.wav``: a tone per digit and speaker (0.15-0.3 s)."""
    folder = root / "recordings"
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for s, speaker in enumerate(speakers):
        for digit in range(10):
            for index in indices:
                time = np.arange(int(rate * rng.uniform(0.15, 0.3))) / rate
                tone = 0.3 * np.sin(2 * np.pi * (200 + 40 * digit + 7 * s) * time)
                wave = tone + 0.003 * rng.standard_normal(len(time))
                soundfile.write(folder / f"{digit}_{speaker}_{index}.wav", wave, rate, subtype="PCM_16")
    return root


def link_real_fsdd(real: Path, folder: Path, count: int, indices=(0, 5, 6)) -> list:
    """``folder`` holding links to recordings ``indices`` of every digit of the first ``count`` speakers of
    the FSDD checkout ``real`` (not copied into the repository); returns those speakers, sorted."""
    source = real / "recordings" if (real / "recordings").is_dir() else real
    speakers = sorted({name.split("_")[1] for name in os.listdir(source) if name.endswith(".wav")})
    assert len(speakers) >= count, f"{source} holds {len(speakers)} speakers, the test needs {count}"
    folder.mkdir()
    for speaker in speakers[:count]:
        for digit in range(10):
            for index in indices:
                name = f"{digit}_{speaker}_{index}.wav"
                os.symlink(source / name, folder / name)
    return speakers[:count]


@pytest.fixture
def fsdd(tmp_path) -> Path:
    return write_fsdd(tmp_path / "fsdd")


def load(path) -> dict:
    return json.loads(Path(path).read_text())


def test_a_fold_holds_one_speaker_out_of_training_and_validation(fsdd, tmp_path):
    paths = prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "bob", SMALL)
    rows = {split: load(path) for split, path in paths.items()}
    speakers = {split: {row["spk"] for row in split_rows.values()} for split, split_rows in rows.items()}
    assert speakers == {"train": {"ann", "cyd"}, "valid": {"ann", "cyd"}, "test": {"bob"},
                        "test_isolated": {"bob"}}
    isolated = [row for row in rows["train"].values() if len(row["text"].split()) == 1]
    # Isolated training digits: recordings 5-6 (the dataset's training part) of 2 speakers x 10 digits.
    assert len(isolated) == 2 * 10 * 2
    assert all(int(row["sources"].rsplit("_", 1)[1]) >= 5 for row in isolated)
    assert len(rows["train"]) == 40 + 2 * 6 and len(rows["valid"]) == 2 * 2
    assert len(rows["test"]) == 6 + 2 and len(rows["test_isolated"]) == 70
    for split in ("valid", "test"):
        for row in rows[split].values():
            words = row["text"].split()
            assert 3 <= len(words) <= 6 and set(words) <= set(prepare.DIGIT_WORDS)
            sources = row["sources"].split()
            assert [prepare.DIGIT_WORDS[int(name[0])] for name in sources] == words  # text follows the audio
            assert all(name.split("_")[1] == row["spk"] for name in sources)  # one speaker per string
            if split == "valid":
                assert all(int(name.rsplit("_", 1)[1]) < 5 for name in sources)  # valid: recordings 0-4
            info = soundfile.info(row["wav"])
            assert info.samplerate == row["sample_rate"] == 8000
            assert abs(info.frames / 8000 - row["duration"]) < 1e-3
            # Digits (0.15-0.3 s) plus pauses: at least 3 digits, 2 gaps and 2 edges.
            assert row["duration"] > 3 * 0.15 + 2 * 0.05 + 2 * 0.1
    assert rows["test_isolated"]["3_bob_2"] == {
        "wav": "$data_root/recordings/3_bob_2.wav", "duration": rows["test_isolated"]["3_bob_2"]["duration"],
        "text": "THREE", "spk": "bob", "sample_rate": 8000, "sources": "3_bob_2"}


def test_strings_are_written_once_deterministically_and_reused(fsdd, tmp_path):
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "one"), "ann", SMALL)
    first = folder_digest(tmp_path / "one" / "strings")
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "one"), "cyd", SMALL)  # another fold: same strings
    assert folder_digest(tmp_path / "one" / "strings") == first
    # Another folder, same seed: the same audio (the manifests name their own folder).
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "two"), "ann", SMALL)
    audio = lambda root: folder_digest(root / "strings" / "bob")
    assert audio(tmp_path / "one") == audio(tmp_path / "two")
    with pytest.raises(DataError, match="other settings"):
        prepare.prepare_fsdd(str(fsdd), str(tmp_path / "one"), "ann", prepare.StringSettings(seed=8))
    assert folder_digest(tmp_path / "one" / "strings") == first  # refused, untouched
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "three"), "ann", prepare.StringSettings(
        seed=8, train_strings=6, valid_strings=2))
    assert audio(tmp_path / "three") != audio(tmp_path / "one")


@pytest.mark.skipif(not ENGINES_PRESENT, reason="speech engines not installed (tools/setup_env.sh)")
def test_synthetic_digit_strings_join_training_only_and_are_built_once(fsdd, tmp_path):
    prepared = tmp_path / "prep"
    paths = prepare.prepare_fsdd(str(fsdd), str(prepared), "bob", SMALL, synthetic_strings=3)
    rows = {split: load(path) for split, path in paths.items()}
    synthetic = {key: row for key, row in rows["train"].items() if row["spk"] not in {"ann", "cyd"}}
    assert len(synthetic) == 3 and len(rows["train"]) == 40 + 2 * 6 + 3
    for row in synthetic.values():
        words = row["text"].split()
        assert SMALL.min_digits <= len(words) <= SMALL.max_digits and set(words) <= set(prepare.DIGIT_WORDS)
        assert os.path.isabs(row["wav"])
        assert soundfile.info(row["wav"]).samplerate == row["sample_rate"] == 16000
        assert row.keys() == rows["train"]["3_ann_5"].keys()  # one manifest, one set of fields
    for split in ("valid", "test", "test_isolated"):  # never scored: held-out figures stay real speech
        assert {row["spk"] for row in rows[split].values()} <= {"ann", "bob", "cyd"}
    corpus = prepared / "synthetic-digits-3"
    assert sorted(os.listdir(prepared)) == ["bob", "strings", "synthetic-digits-3"]  # no scratch folder left
    before = folder_digest(corpus)
    again = prepare.prepare_fsdd(str(fsdd), str(prepared), "ann", SMALL, synthetic_strings=3)
    assert folder_digest(corpus) == before  # another fold reuses the voices' strings
    assert set(synthetic) <= set(load(again["train"]))


def test_a_speaker_s_strings_do_not_depend_on_the_other_speakers(fsdd, tmp_path):
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "all"), "ann", SMALL)
    for name in os.listdir(fsdd / "recordings"):
        if "_cyd_" in name:
            os.remove(fsdd / "recordings" / name)
    prepare.prepare_fsdd(str(fsdd), str(tmp_path / "two"), "ann", SMALL)
    bob = lambda root: folder_digest(root / "strings" / "bob")
    assert bob(tmp_path / "all") == bob(tmp_path / "two")


def test_an_interrupted_build_leaves_no_strings_behind(fsdd, tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(prepare, "render_string", fail)
    with pytest.raises(KeyboardInterrupt):
        prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "ann", SMALL)
    assert os.listdir(tmp_path / "prep") == []  # no half-written strings folder to be taken as complete
    monkeypatch.undo()
    assert prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "ann", SMALL)


@pytest.mark.parametrize("damage, message", [
    (lambda folder: (folder / "7_ann_x.wav").write_bytes(b""), r"7_ann_x\.wav: not an FSDD file name"),
    (lambda folder: soundfile.write(folder / "7_ann_9.wav", np.zeros(800), 16000), r"7_ann_9\.wav: 16000 Hz"),
    (lambda folder: (folder / "7_ann_9.wav").write_bytes(b"RIFF...."), r"7_ann_9\.wav: unreadable audio"),
])
def test_bad_recordings_are_named(fsdd, tmp_path, damage, message):
    damage(fsdd / "recordings")
    with pytest.raises(DataError, match=message):
        prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "ann", SMALL)


def test_all_holds_every_speaker_out_with_the_strings_of_the_folds(fsdd, tmp_path):
    paths = prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "all", SMALL)
    assert sorted(paths) == ["test", "test_isolated"]
    every = {split: load(path) for split, path in paths.items()}
    folds = [prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), speaker, SMALL)
             for speaker in ("ann", "bob", "cyd")]
    for split in ("test", "test_isolated"):
        union = {k: v for fold in folds for k, v in load(fold[split]).items()}
        assert every[split] == union and {row["spk"] for row in union.values()} == {"ann", "bob", "cyd"}
    with pytest.raises(DataError, match="test_speaker 'all' writes test manifests only"):
        prepare.prepare_manifests({"prepared_folder": str(tmp_path / "prep"), "test_speaker": "all",
                                   "data_folder": str(fsdd), "model": {"sample_rate": 8000}})


def test_bad_folders_and_speakers_are_named(fsdd, tmp_path):
    with pytest.raises(DataError, match="test_speaker 'zed' is not among .*ann, bob, cyd"):
        prepare.prepare_fsdd(str(fsdd), str(tmp_path / "prep"), "zed", SMALL)
    with pytest.raises(DataError, match="does not exist"):
        prepare.prepare_fsdd(str(tmp_path / "nowhere"), str(tmp_path / "prep"), "ann", SMALL)
    # The recordings folder itself works as data_folder too.
    paths = prepare.prepare_fsdd(str(fsdd / "recordings"), str(tmp_path / "prep"), "ann", SMALL)
    assert load(paths["test_isolated"])["3_ann_2"]["wav"] == "$data_root/3_ann_2.wav"
    with pytest.raises(DataError, match="min_digits"):
        prepare.prepare_fsdd(str(fsdd), str(tmp_path / "p2"), "ann", prepare.StringSettings(min_digits=0))


@pytest.mark.slow
def test_the_template_trains_on_a_fold_and_scores_the_held_out_speaker(tmp_path):
    fsdd = write_fsdd(tmp_path / "fsdd", speakers=("ann", "bob"), indices=range(6))
    # The recipe where its YAML finds the template's (../../../../templates), results kept in tmp_path.
    recipe = tmp_path / "recipes" / "FSDD" / "ASR"
    shutil.copytree(RECIPE, recipe)  # copies the linked train.py
    (tmp_path / "templates").symlink_to(ROOT / "templates")
    run_script(recipe / "train.py", [
        "hparams/train.yaml", "--data_folder", str(fsdd), "--prepared_folder", str(tmp_path / "prep"),
        "--test_speaker", "bob", "--train_strings", "4", "--valid_strings", "1", "--number_of_epochs", "1",
        # a few synthetic strings (16 kHz, resampled by the audio policy) where the speech engines are here
        "--synthetic_strings", "3" if ENGINES_PRESENT else "0", *TINY_MODEL, "--model.d_model", "16",
        "--noprogressbar", "--debug"], timeout=300)
    report = (recipe / "results" / "bob" / "1234" / "wer_test.txt").read_text()
    assert "bob-train-0000" in report and "%WER" in report
    train = load(tmp_path / "prep" / "bob" / "train.json")
    assert sum(row["sample_rate"] == 16000 for row in train.values()) == (3 if ENGINES_PRESENT else 0)


@pytest.mark.slow
@pytest.mark.skipif(REAL_FSDD is None or not (REAL_FSDD / "recordings").is_dir(),
                    reason=f"no FSDD recordings (SPEECHKIT_FSDD={REAL_FSDD})")
def test_the_real_recordings_prepare_into_four_folds_of_the_expected_size(tmp_path):
    speakers = sorted({name.split("_")[1] for name in os.listdir(REAL_FSDD / "recordings")})
    settings = prepare.StringSettings(train_strings=3, valid_strings=1)
    for speaker in speakers:
        rows = {split: load(path) for split, path in
                prepare.prepare_fsdd(str(REAL_FSDD), str(tmp_path), speaker, settings).items()}
        others = len(speakers) - 1
        assert len(rows["test_isolated"]) == 500  # 10 digits x 50 recordings
        assert len(rows["train"]) == others * (10 * 45 + 3) and len(rows["valid"]) == others
        assert {row["spk"] for row in rows["test"].values()} == {speaker}
