"""speechkit data check: each check finds what it names on real files (and only that), the report's table,
JSON and exit code, and the cached check the templates run before training."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from speechkit.data.check import CheckOptions, check_before_training, check_manifests
from speechkit.errors import DataError
from tests.unit.data import check_data
from tests.unit.data.check_data import row, write
from tests.unit.data.importers.layouts import tone

clean = check_data.clean  # a shared fixture: pytest finds it under this name


def kinds(report) -> set:
    return {(f.level, f.check, f.split, f.id) for f in report.findings}


def test_clean_data_has_nothing_to_report(clean):
    report = check_manifests(clean, sample_rate=16000, alphabet=frozenset("word"))
    assert report.findings == [] and report.errors == 0
    assert report.summary["train"]["sample_rates"] == {16000: 5} and report.summary["test"]["speakers"] == 2
    assert "0 error(s), 0 warning(s)" in report.format_table()


def test_rates_channels_and_lengths(tmp_path):
    rows = {"r44": row(tone(tmp_path / "r44.flac", 1.0, 44100, channels=2)),
            "short": row(tone(tmp_path / "short.wav", 0.05, 16000), text="a"),
            "long": row(tone(tmp_path / "long.wav", 4.0, 16000)),
            "lies": row(tone(tmp_path / "lies.wav", 1.0, 16000), duration=3.0),
            "empty": row(tone(tmp_path / "empty.wav", 0.0, 16000), text="x")}
    report = check_manifests(write(tmp_path, {"train": rows}), sample_rate=16000, max_duration=3.5,
                             frame_rate=25)
    found = kinds(report)
    assert ("warning", "sample rate", "train", "r44") in found
    assert ("warning", "channels", "train", "r44") in found
    assert ("warning", "too short", "train", "short") in found
    assert ("error", "too long", "train", "long") in found
    assert ("error", "duration mismatch", "train", "lies") in found
    assert ("error", "empty audio", "train", "empty") in found
    assert not any(f.id == "r44" and f.level == "error" for f in report.findings)


def test_samples_silent_clipped_and_nan(tmp_path):
    soundfile.write(str(tmp_path / "silent.wav"), np.zeros(16000, np.float32), 16000)
    soundfile.write(str(tmp_path / "clipped.wav"), np.clip(np.sin(np.arange(16000) / 5) * 3, -1, 1), 16000)
    nan = np.full(16000, 0.1, np.float32)
    nan[100] = np.nan
    soundfile.write(str(tmp_path / "nan.wav"), nan, 16000, subtype="FLOAT")
    rows = {name: row(tmp_path / f"{name}.wav") for name in ("silent", "clipped", "nan")}
    rows["gone"] = {**rows["silent"], "wav": str(tmp_path / "gone.wav")}
    report = check_manifests(write(tmp_path, {"train": rows}))
    found = kinds(report)
    assert {("warning", "silent", "train", "silent"), ("warning", "clipped", "train", "clipped"),
            ("error", "non-finite", "train", "nan"), ("error", "unreadable", "train", "gone")} <= found
    headers_only = check_manifests(write(tmp_path, {"train": rows}), decode=False)
    assert {f.check for f in headers_only.findings} == {"unreadable"}


def test_duplicates_and_shared_speakers_across_splits(tmp_path):
    a = tone(tmp_path / "a.wav", 1.0, 16000, seed=1)
    copy = tmp_path / "copy.wav"
    copy.write_bytes(a.read_bytes())
    b = tone(tmp_path / "b.wav", 1.2, 16000, seed=2)
    c = tone(tmp_path / "c.wav", 1.1, 16000, seed=3)
    splits = {"train": {"a": row(a, speaker="x"), "b": row(b, "same words", speaker="y")},
              "test": {"copy": row(copy, speaker="z"), "c": row(c, "same words", speaker="y")}}
    found = kinds(check_manifests(write(tmp_path, splits)))
    assert ("error", "same audio in splits", "test", "copy") in found
    assert ("warning", "same text and speaker", "test", "c") in found
    assert ("warning", "shared speakers", "test", "") in found


def test_text_empty_alphabet_and_misaligned(tmp_path):
    rows = {f"u{n}": row(tone(tmp_path / f"u{n}.wav", 1.0, 16000, seed=n), "ab " * 4) for n in range(6)}
    rows["u1"]["text"] = "  "
    rows["u2"]["text"] = "Ab, é"
    rows["u3"]["text"] = "ab " * 40  # far too many words for a second of audio
    report = check_manifests(write(tmp_path, {"train": rows}), alphabet=frozenset("ab"))
    found = kinds(report)
    assert ("error", "empty transcript", "train", "u1") in found
    assert ("error", "outside alphabet", "train", "u2") in found
    assert ("warning", "speaking rate", "train", "u3") in found
    assert report.summary["train"]["outside_alphabet"] == {"A": 1, ",": 1, "é": 1}
    assert "1 character(s)" not in report.format_table() and "'é' x1" in report.format_table()


def test_placeholders_default_to_the_manifest_folder(tmp_path):
    tone(tmp_path / "audio" / "u.wav", 1.0, 16000)
    rows = {"u": {"wav": "$data_root/audio/u.wav", "duration": 1.0, "text": "hi", "speaker": "a"}}
    assert check_manifests(write(tmp_path, {"train": rows})).findings == []


def test_before_training_caches_clean_reports_and_refuses_errors(clean, tmp_path):
    cache = tmp_path / "cache"
    check_before_training(clean, str(cache), CheckOptions(sample_rate=16000), log=lambda _: None)
    assert len(list(cache.glob("data_check-*.json"))) == 1
    Path(json.loads(Path(clean["train"]).read_text())["u0"]["wav"]).unlink()
    # same manifests, same options: the cached report is read, no file is opened
    assert check_before_training(clean, str(cache), CheckOptions(sample_rate=16000)).errors == 0
    with pytest.raises(DataError, match=r"error: unreadable \[train\] 1 item\(s\): u0: wav .*u0.wav"):
        check_before_training(clean, str(cache), CheckOptions(sample_rate=8000))
    assert (cache / "data_check-errors.json").is_file()
