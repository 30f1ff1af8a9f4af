"""The ``generate`` task: one float WAV per mel array, equal to the interface's output byte for byte whatever
the shards and batches; bad arrays refused naming the item and file; the merged manifest."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile
import torch

from speechkit.errors import ManifestError
from speechkit.jobs import JobConfig, merge_job, run_job
from speechkit.pretrained import Vocoder
from tests.unit.jobs import generate_files

files = generate_files.files  # a shared fixture: pytest finds it under this name


def _config(files, out, manifest=None, **options) -> JobConfig:
    return JobConfig(str(files["model"]), str(manifest or files["manifest"]), str(out), task="generate",
                     progress=False, **options)


def _outputs(folder) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted((folder / "outputs").rglob("*"))
            if p.is_file()}


def test_generate_job_writes_the_interface_audio_whatever_the_shards(files, tmp_path):
    one = run_job(_config(files, tmp_path / "one", max_batch_size=3), environ={})
    two = [run_job(_config(files, tmp_path / "two", shard=k, num_shards=2, max_batch_seconds=0.5),
                   environ={}) for k in (0, 1)]
    assert one.merged["items"] == two[1].merged["items"] == 7
    assert _outputs(tmp_path / "one") == _outputs(tmp_path / "two")
    rows = json.loads(files["manifest"].read_text())
    vocoder = Vocoder.from_hparams(str(files["model"]))
    merged = json.loads((tmp_path / "two" / "outputs.json").read_text())
    assert list(merged) == sorted(rows)
    for item_id, entry in merged.items():
        mel = torch.from_numpy(np.load(rows[item_id]["mel"]))
        expected = vocoder.generate(mel)[0][0].numpy()
        written, rate = soundfile.read(entry["wav"], dtype="float32")
        assert rate == 16000 and np.array_equal(written, expected)  # exact: float32 WAV
        assert entry["mel"] == rows[item_id]["mel"]
        assert entry["duration"] == pytest.approx(len(expected) / 16000)
    again = run_job(_config(files, tmp_path / "one"), environ={})
    assert (again.done_now, again.already_done) == (0, 7)


def test_padded_batches_equal_the_per_item_audio_to_rounding(files, tmp_path):
    run_job(_config(files, tmp_path / "alone"), environ={})
    run_job(_config(files, tmp_path / "padded", task_options={"padded_batches": True}, max_batch_size=4),
            environ={})
    alone, padded = merge_job(tmp_path / "alone"), merge_job(tmp_path / "padded")
    assert alone["items"] == padded["items"] == 7
    for name, data in _outputs(tmp_path / "alone").items():
        a = np.frombuffer(data[56:], "<f4")  # past the 56-byte float WAV header
        b = np.frombuffer((tmp_path / "padded" / name).read_bytes()[56:], "<f4")
        np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("array, message", [
    (np.zeros((5, 80), np.float32), r"shape \(5, 80\)"),
    (np.zeros((0, 16), np.float32), r"frames >= 1"),
    (np.full((4, 16), np.nan, np.float32), "NaN"),
    (np.zeros((4, 16), np.int64), "int64"),
    (np.array([{"code": "anything"}], dtype=object), "allow_pickle=False"),  # never unpickled
    (None, "cannot read"),
])
def test_bad_mel_arrays_are_refused_naming_item_and_file(files, tmp_path, array, message):
    path = tmp_path / "bad.npy"
    if array is None:
        path.write_bytes(b"not an array")
    else:
        np.save(path, array)
    rows = json.loads(files["manifest"].read_text())
    first = sorted(rows)[0]
    rows[first]["mel"] = str(path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(rows))
    with pytest.raises(ManifestError, match=rf"item '{first}' \(mel\)") as error:
        run_job(_config(files, tmp_path / "out", manifest=manifest), environ={})
    assert str(path) in str(error.value) and error.match(message)


def test_a_row_without_the_mel_field_is_refused(files, tmp_path):
    rows = json.loads(files["manifest"].read_text())
    rows = {item_id: {"npy": row["mel"], "duration": row["duration"]} for item_id, row in rows.items()}
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(rows))
    with pytest.raises(ManifestError, match="has no field 'mel'.*--audio-field"):
        run_job(_config(files, tmp_path / "out", manifest=manifest), environ={})
    result = run_job(_config(files, tmp_path / "out", manifest=manifest, task_options={"audio_field": "npy"}),
                     environ={})
    assert result.merged["items"] == len(rows)
