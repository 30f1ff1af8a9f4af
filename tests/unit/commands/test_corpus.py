"""``speechkit corpus``: builds a corpus (with recordings, conversations, the held-out engine manifest) and
refuses settings that would build a useless one: each error names the flag (status 2, before anything is
written), and the library refuses the same settings (DataError naming the setting)."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import pytest

from speechkit.cli import main as speechkit_main
from speechkit.corpus.generator import CorpusConfig, build_corpus, check_config
from speechkit.errors import DataError
from tests.unit.corpus.recording_files import speaker_folder


@pytest.mark.parametrize("flags, message", [
    (["--num-train", "-1"], "argument --num-train: must be >= 1, got -1"),
    (["--num-train", "0"], "argument --num-train: must be >= 1, got 0"),
    (["--num-valid", "-3"], "argument --num-valid: must be >= 0"),
    (["--num-test", "2.5"], "argument --num-test: expected a whole number, got '2.5'"),
    (["--num-sentences", "0"], "argument --num-sentences: must be >= 1"),
    (["--snr-range", "100", "-100"], "argument --snr-range: must be >= -30, got -100"),
    (["--snr-range", "30", "5"], "argument --snr-range: MIN 30 is above MAX 5"),
    (["--snr-range", "inf", "inf"], "argument --snr-range: must be a finite number, got 'inf'"),
    (["--noise-prob", "2"], "argument --noise-prob: must be <= 1, got 2"),
    (["--noise-prob", "-0.1"], "argument --noise-prob: must be >= 0"),
    (["--noise-prob", "nan"], "argument --noise-prob: must be a finite number"),
    (["--loudness-range", "nan", "nan"], "argument --loudness-range: must be a finite number, got 'nan'"),
    (["--loudness-range", "-10", "6"], "argument --loudness-range: must be <= 0, got 6"),
    (["--loudness-range", "-90", "-80"], "argument --loudness-range: must be >= -60"),
    (["--speed-range", "0", "0"], "argument --speed-range: must be >= 0.25, got 0"),
    (["--speed-range", "1.2", "0.9"], "argument --speed-range: MIN 1.2 is above MAX 0.9"),
    (["--num-workers", "0"], "argument --num-workers: must be >= 1"),
    (["--text", "poems"], "argument --text: invalid choice: 'poems'"),
    (["--digit-string-length", "0", "3"], "argument --digit-string-length: must be >= 1, got 0"),
    (["--digit-string-length", "6", "3"], "argument --digit-string-length: MIN 6 is above MAX 3"),
    (["--digit-string-length", "2.5", "3"], "argument --digit-string-length: expected a whole number"),
    (["--digit-share", "1.5"], "argument --digit-share: must be <= 1, got 1.5"),
])
def test_bad_flags_exit_2_naming_the_flag(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as caught:
        speechkit_main(["corpus", str(tmp_path / "corpus"), *flags])
    assert caught.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "corpus").exists()


@pytest.mark.parametrize("change, message", [
    ({"num_train": -1}, r"num_train must be within >= 0, got -1"),
    ({"snr_range": (100.0, -100.0)}, r"snr_range must be within \[-30.0, 100.0\], got \(100.0, -100.0\)"),
    ({"snr_range": (30.0, 5.0)}, "snr_range: min 30.0 is above max 5.0"),
    ({"noise_prob": 2.0}, r"noise_prob must be within \[0.0, 1.0\]"),
    ({"loudness_range": (float("nan"), float("nan"))}, "loudness_range must hold finite numbers"),
    ({"speed_range": (0.0, 0.0)}, r"speed_range must be within \[0.25, 4.0\]"),
    ({"speed_range": (1.0,)}, r"speed_range must be \(min, max\)"),
    ({"num_sentences": True}, "num_sentences must hold finite numbers"),
    ({"text": "poems"}, "text must be one of grammar, digits, got 'poems'"),
    ({"digit_string_length": (6, 3)}, "digit_string_length: min 6 is above max 3"),
    ({"digit_string_length": (0, 3)}, r"digit_string_length must be within \[1, 20\]"),
    ({"digit_string_length": (2.5, 3)}, "digit_string_length must hold whole numbers"),
    ({"digit_string_length": (3,)}, r"digit_string_length must be \(min, max\)"),
    ({"digit_share": -0.1}, r"digit_share must be within \[0.0, 1.0\]"),
    ({"digit_share": 0.2, "text": "digits"}, "digit_share=0.2 mixes digit strings into grammar sentences"),
])
def test_the_library_refuses_the_same_settings(tmp_path, change, message):
    config = dataclasses.replace(CorpusConfig(str(tmp_path / "corpus")), **change)
    with pytest.raises(DataError, match=message):
        check_config(config)
    with pytest.raises(DataError, match=message):
        build_corpus(config, log=lambda line: None)
    assert not (tmp_path / "corpus").exists()


def test_the_defaults_and_every_size_pass():
    check_config(CorpusConfig("x"))
    check_config(dataclasses.replace(CorpusConfig("x"), num_valid=0, num_test=0, noise_prob=1.0,
                                     snr_range=(-30.0, 100.0), loudness_range=(-60.0, 0.0)))


ENGINES_PRESENT = shutil.which("flite") is not None and shutil.which("festival") is not None


needs_engines = pytest.mark.skipif(not ENGINES_PRESENT, reason="flite/festival not installed "
                                   "(apt-get install flite festival festvox-kdlpc16k)")


needs_flite = pytest.mark.skipif(shutil.which("flite") is None, reason="flite not installed")


@needs_engines
def test_command_line_builds_a_corpus(tmp_path, capsys):
    from speechkit.cli import main

    code = main(["corpus", str(tmp_path / "cli"), "--num-train", "2", "--num-valid", "0", "--num-test", "1",
                 "--voices", "kal,kal-hi,ked", "--test-voices", "kal-hi", "--valid-voices", "",
                 "--num-sentences", "10", "--num-workers", "1"])
    assert code == 0 and "3 utterances" in capsys.readouterr().out
    assert len(json.loads((tmp_path / "cli" / "train.json").read_text())) == 2
    code = main(["corpus", str(tmp_path / "bad"), "--test-voices", "nobody"])
    assert code == 1 and "unknown corpus voice 'nobody'" in capsys.readouterr().err


def test_tools_wrapper_reports_errors_without_a_traceback(tmp_path, capsys):
    from tests.helpers.scripts import load_script

    module = load_script(os.path.join(os.path.dirname(__file__), "..", "..", "..", "tools", "make_corpus.py"))
    assert module.main([str(tmp_path / "x"), "--voices", "rms,nobody"]) == 1
    assert "unknown corpus voice 'nobody'" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("espeak-ng") is None or not ENGINES_PRESENT, reason="needs every engine")
def test_command_line_writes_the_held_out_engine_manifest(tmp_path, capsys):
    from speechkit.cli import main

    code = main(["corpus", str(tmp_path / "c"), "--num-train", "2", "--num-valid", "0", "--num-test", "1",
                 "--voices", "kal,ked", "--test-voices", "kal", "--valid-voices", "", "--num-sentences", "10",
                 "--held-out-engine", "espeak", "--num-workers", "1"])
    assert code == 0, capsys.readouterr()
    unheard = json.loads((tmp_path / "c" / "test_engine.json").read_text())
    assert len(unheard) == 1 and next(iter(unheard.values()))["voice"].startswith("espeak-")
    assert json.loads((tmp_path / "c" / "corpus.json").read_text())["utterances"]["test_engine"] == 1


@needs_flite
def test_the_command_line_mixes_recordings_with_synthetic_voices(tmp_path, capsys):
    from speechkit.cli import main

    source = speaker_folder(tmp_path / "rec")
    code = main(["corpus", str(tmp_path / "c"), "--num-train", "2", "--num-valid", "0", "--num-test", "1",
                 "--voices", "kal,rms", "--test-voices", "kal,recorded-ben", "--valid-voices", "",
                 "--num-sentences", "10", "--recordings", str(source), "--num-workers", "1", "--no-progress"])
    assert code == 0, capsys.readouterr()
    train = json.loads((tmp_path / "c" / "train.json").read_text())
    test = json.loads((tmp_path / "c" / "test.json").read_text())
    assert sorted(row["voice"] for row in train.values()) == ["recorded-anna", "recorded-anna", "rms", "rms"]
    assert sorted(row["voice"] for row in test.values()) == ["kal", "recorded-ben", "recorded-ben"]
    assert set(json.loads((tmp_path / "c" / "corpus.json").read_text())["voices"]["test"]) == {
        "kal", "recorded-ben"}


@pytest.mark.skipif(shutil.which("flite") is None, reason="flite is not installed")
def test_command_line_writes_conversations_of_the_test_speakers(tmp_path, capsys):
    import json

    from speechkit.cli import main
    from speechkit.data.rttm import read_rttm

    folder = tmp_path / "corpus"
    arguments = ["corpus", str(folder), "--num-train", "1", "--num-valid", "0", "--num-test", "6", "--voices",
                 "kal,kal-lo,rms", "--test-voices", "kal,kal-lo", "--valid-voices", "",
                 "--num-sentences", "10", "--num-workers", "1", "--no-progress"]
    assert main(arguments + ["--conversations", "2", "--conversation-speakers", "2", "2"]) == 0
    manifest = json.loads((folder / "conversations" / "conversations.json").read_text())
    reference = read_rttm(str(folder / "conversations" / "all.rttm"))
    assert sorted(manifest) == sorted(reference) == ["conversation-0000", "conversation-0001"]
    assert all({s for _, _, s in turns} == {"kal", "kal-lo"} for turns in reference.values())
    # A folder holding a corpus is used as it is (its settings need not be repeated).
    assert main(["corpus", str(folder), "--conversations", "1", "--conversation-speakers", "2", "2",
                 "--no-progress"]) == 0


def test_corpus_ranges_are_positive_finite_and_ordered(tmp_path, capsys):
    for flag, values in (("--speed-range", ["0", "0"]), ("--speed-range", ["1.2", "0.9"]),
                         ("--snr-range", ["nan", "10"])):
        with pytest.raises(SystemExit) as exit_info:
            speechkit_main(["corpus", str(tmp_path / "c"), flag, *values])
        assert exit_info.value.code == 2
        assert flag in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
