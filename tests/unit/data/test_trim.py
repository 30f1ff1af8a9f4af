"""Edge silence trimming: the detector, trimmed manifests that read back the speech alone."""
from __future__ import annotations

import os

import numpy as np
import pytest

from speechkit.data import audio
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.manifest import load_manifest, write_json_manifest
from speechkit.data.trim import speech_bounds, trim_manifest, trim_manifest_files
from speechkit.errors import ManifestError
from tests.unit.data import trim_files
from tests.unit.data.trim_files import RATE, tone_with_silence

recordings = trim_files.recordings  # a shared fixture: pytest finds it under this name


def test_speech_bounds_finds_the_loud_part_within_a_frame():
    wave = tone_with_silence(4000, 16000, 8000)
    first, last = speech_bounds(wave, frame=160)
    assert 4000 - 160 <= first <= 4000 and 20000 <= last <= 20000 + 160


def test_speech_bounds_margin_is_kept_and_clipped_to_the_wave():
    wave = tone_with_silence(800, 3200, 800)
    first, last = speech_bounds(wave, margin=480)
    assert (first, last) == (320, 4480)
    assert speech_bounds(wave, margin=5000) == (0, len(wave))


def test_speech_bounds_keeps_pauses_inside_and_averages_channels():
    inner = np.concatenate([tone_with_silence(1600, 3200, 4800), tone_with_silence(0, 3200, 1600, seed=1)])
    assert speech_bounds(inner) == (1600, 1600 + 3200 + 4800 + 3200)
    stereo = np.stack([inner, np.zeros_like(inner)], axis=1)
    assert speech_bounds(stereo) == speech_bounds(inner)


def test_speech_bounds_of_silence_or_a_short_wave_is_the_whole_wave():
    assert speech_bounds(np.zeros(16000)) == (0, 16000)
    assert speech_bounds(np.ones(100), frame=160) == (0, 100)


def test_trimmed_manifest_reads_back_the_speech_with_placeholders_kept(recordings, tmp_path):
    root, path, layout = recordings
    rows = load_manifest(path, file_fields=())
    trimmed = trim_manifest(rows, {"data_root": str(root)}, margin=0.05)
    for name, (before, _, _) in layout.items():
        segment = trimmed[name]["wav"]
        assert segment["file"] == f"$data_root/{name}.flac" and segment["unit"] == "samples"
        assert abs(segment["start"] - max(0, before - 800)) <= 160
        assert trimmed[name]["duration"] == pytest.approx((segment["stop"] - segment["start"]) / RATE)
        assert trimmed[name]["text"] == name.upper()
    out = tmp_path / "trimmed.json"
    write_json_manifest(trimmed, out)
    dataset = DynamicItemDataset.from_json(out, replacements={"data_root": str(root)})
    dataset.add_dynamic_item(audio.read, takes="wav", provides="sig")
    dataset.set_output_keys(["id", "sig"])
    item = dataset[0]
    full = audio.read(root / "a.flac")
    start, stop = trimmed["a"]["wav"]["start"], trimmed["a"]["wav"]["stop"]
    assert item["id"] == "a" and np.array_equal(item["sig"].numpy(), full[start:stop].numpy())


def test_trimming_a_segment_trims_inside_it_and_workers_agree(recordings):
    root, path, _ = recordings
    rows = load_manifest(path, file_fields=())
    once = trim_manifest(rows, {"data_root": str(root)}, margin=0.0)
    twice = trim_manifest(once, {"data_root": str(root)}, margin=0.0)
    assert twice == once
    assert trim_manifest(rows, {"data_root": str(root)}, margin=0.0, num_workers=2) == once
    inner = {"a": {**rows["a"], "wav": {"file": rows["a"]["wav"], "start": 8000, "stop": 28000}}}
    segment = trim_manifest(inner, {"data_root": str(root)}, margin=0.0)["a"]["wav"]
    assert segment["start"] == 8000 and abs(segment["stop"] - 20000) <= 160


def test_manifest_files_are_trimmed_once_until_the_manifest_changes(recordings, tmp_path):
    root, path, _ = recordings
    manifests, folder = {"train": str(path)}, str(tmp_path / "trimmed")
    replacements = {"data_root": str(root)}
    written = trim_manifest_files(manifests, folder, replacements)
    assert written == {"train": str(tmp_path / "trimmed" / "train.json")}
    first = load_manifest(written["train"], file_fields=())
    (root / "b.flac").unlink()  # a second call reads no audio: the copy is newer than the manifest
    assert trim_manifest_files(manifests, folder, replacements) == written
    assert load_manifest(written["train"], file_fields=()) == first
    os.utime(path, (os.path.getmtime(written["train"]) + 10,) * 2)  # the manifest changed: trim again
    with pytest.raises(ManifestError, match="id 'b'"):
        trim_manifest_files(manifests, folder, replacements)
    with pytest.raises(ManifestError, match="would overwrite it"):
        trim_manifest_files(manifests, str(tmp_path), replacements)


def test_bad_rows_and_settings_are_named(recordings, tmp_path):
    root, path, _ = recordings
    rows = load_manifest(path, file_fields=())
    (root / "b.flac").unlink()
    with pytest.raises(ManifestError, match=r"train.json: id 'b': .*not found: .*corpus/b.flac"):
        trim_manifest(rows, {"data_root": str(root)}, name="train.json")
    with pytest.raises(ManifestError, match="id 'a': no field 'audio'"):
        trim_manifest(rows, {"data_root": str(root)}, field="audio")
    in_seconds = {"a": {**rows["a"], "wav": {"file": rows["a"]["wav"], "start": 0.5, "unit": "seconds"}}}
    with pytest.raises(ManifestError, match="id 'a': trimming needs segments in samples"):
        trim_manifest(in_seconds, {"data_root": str(root)})
    with pytest.raises(ValueError, match="margin"):
        trim_manifest(rows, margin=-0.1)
    with pytest.raises(ValueError, match="threshold_db"):
        trim_manifest(rows, threshold_db=3.0)
