"""``speechkit data convert``: copies equal to the on-the-fly policy, a file that cannot be read stops its
manifest only, channels and bad arguments."""
from __future__ import annotations

import hashlib
import json

import pytest
import soundfile
import torch

from speechkit.cli import main as speechkit_main
from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.manifest import load_manifest
from tests.unit.data import convert_files
from tests.unit.data.convert_files import tone

corpus = convert_files.corpus  # a shared fixture: pytest finds it under this name


def _digests(folder) -> dict:
    files = sorted(p for p in folder.iterdir() if p.is_file())
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def test_copies_equal_the_policy_on_the_fly_and_the_manifest_trains_from_dest(corpus, tmp_path, capsys):
    before = _digests(corpus)
    dest = tmp_path / "dest"
    code = speechkit_main(["data", "convert", str(corpus / "train.json"), "--dest", str(dest),
                           "--sample-rate", "16000", "--replacement", f"root={corpus}", "--workers", "1"])
    assert code == 0
    out = capsys.readouterr().out
    assert "4 file(s) converted, 0 kept" in out and "16000 Hz mono (channels averaged)" in out
    assert _digests(corpus) == before  # the sources are untouched
    rows = json.loads((dest / "train.json").read_text())
    assert rows["a"]["wav"] == "$data_root/audio/train/a.flac" and rows["a"]["text"] == "A"
    assert rows["seg/1"]["wav"].startswith("$data_root/audio/train/seg_1-")  # a safe, unique file name
    loaded = load_manifest(dest / "train.json", {"data_root": str(dest)})
    strict = AudioPolicy(16000, convert=False)  # the copies need no conversion
    on_the_fly = AudioPolicy(16000)
    originals = load_manifest(corpus / "train.json", {"root": str(corpus)})
    for item_id, row in loaded.items():
        info = soundfile.info(row["wav"])
        assert (info.samplerate, info.channels, info.format, info.subtype) == (16000, 1, "FLAC", "PCM_16")
        copy = strict.read(row["wav"])
        expected = on_the_fly.read(originals[item_id]["wav"])
        assert copy.shape == expected.shape
        assert (copy - expected).abs().max() <= 1 / 32768 + 1e-7, item_id  # 16-bit rounding only
        assert row["duration"] == pytest.approx(copy.shape[0] / 16000)


def test_a_file_that_cannot_be_read_stops_the_manifest_but_keeps_the_other_copies(corpus, tmp_path, capsys):
    (corpus / "b.flac").write_bytes(b"not audio")
    dest = tmp_path / "dest"
    args = ["data", "convert", str(corpus / "train.json"), "--dest", str(dest), "--sample-rate", "16000",
            "--replacement", f"root={corpus}", "--workers", "2"]
    assert speechkit_main(args) == 1
    err = capsys.readouterr().err
    assert "1 of 4 file(s) could not be converted: 'b': " in err and "b.flac" in err
    assert not (dest / "train.json").exists()
    assert sorted(p.name for p in (dest / "audio" / "train").glob("*.flac"))[:2] == ["a.flac", "c.flac"]
    soundfile.write(corpus / "b.flac", tone(8000, 0.25, 1), 8000)
    assert speechkit_main(args) == 0
    assert "1 file(s) converted, 3 kept" in capsys.readouterr().out


def test_a_channel_can_be_picked_and_bad_arguments_are_refused(corpus, tmp_path, capsys):
    dest = tmp_path / "dest"
    assert speechkit_main(["data", "convert", str(corpus / "train.json"), "--dest", str(dest),
                           "--sample-rate", "16000", "--channels", "1", "--replacement", f"root={corpus}",
                           "--field", "wav", "--workers", "1", "--subtype", "PCM_24"]) == 1
    assert "channel 1, which this file lacks" in capsys.readouterr().err  # b.flac is mono
    one = corpus / "one.json"
    rows = json.loads((corpus / "train.json").read_text())
    one.write_text(json.dumps({"a": rows["a"]}))
    assert speechkit_main(["data", "convert", str(one), "--dest", str(tmp_path / "d1"), "--sample-rate",
                           "16000", "--channels", "1", "--replacement", f"root={corpus}"]) == 0
    copy = AudioPolicy(16000, convert=False).read(tmp_path / "d1" / "audio" / "one" / "a.flac")
    assert (copy - AudioPolicy(16000, channels=1).read(corpus / "a.wav")).abs().max() <= 1 / 32768
    for flags, message in ((["--channels", "left"], "argument --channels: expected 'mix' or a channel index"),
                           (["--sample-rate", "0"], "argument --sample-rate: must be >= 1"),
                           (["--workers", "0"], "argument --workers: must be >= 1")):
        with pytest.raises(SystemExit) as caught:
            speechkit_main(["data", "convert", str(one), "--dest", str(dest), "--sample-rate", "16000",
                            *flags])
        assert caught.value.code == 2 and message in capsys.readouterr().err
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "one.json").write_text(one.read_text())
    assert speechkit_main(["data", "convert", str(one), str(tmp_path / "x" / "one.json"), "--dest", str(dest),
                           "--sample-rate", "16000"]) == 1
    assert "two manifests are named 'one'" in capsys.readouterr().err
    assert torch.is_tensor(copy)
