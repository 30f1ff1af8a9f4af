"""``speechkit corpus`` refuses settings that would build a useless corpus: each error names the flag (status
2, before anything is written), and the library refuses the same settings (DataError naming the setting)."""
from __future__ import annotations

import dataclasses

import pytest

from speechkit.cli import main as speechkit_main
from speechkit.corpus.generator import CorpusConfig, build_corpus, check_config
from speechkit.errors import DataError


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
