"""``speechkit data convert``: copies at the model's rate and channels equal what the policy reads on the fly,
a manifest of them that trains with ``--data_folder DEST``, reruns that convert only what changed, and bad
inputs refused without losing the copies made or touching a source."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import soundfile

from speechkit.data.audio_policy import AudioPolicy
from speechkit.data.convert import convert_manifest
from speechkit.errors import AudioError, DataError, ManifestError


def tone(rate: int, seconds: float, channels: int, freq: float = 300.0) -> np.ndarray:
    wave = 0.4 * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)
    return np.stack([wave, 0.3 * wave[::-1]], axis=1) if channels == 2 else wave


@pytest.fixture
def corpus(tmp_path):
    """train.json over a 44.1 kHz stereo WAV, an 8 kHz FLAC, a 48 kHz stereo MP3 and a segment of the WAV."""
    src = tmp_path / "src"
    src.mkdir()
    soundfile.write(src / "a.wav", tone(44100, 0.5, 2), 44100, subtype="FLOAT")
    soundfile.write(src / "b.flac", tone(8000, 0.25, 1), 8000)
    soundfile.write(src / "c.mp3", tone(48000, 0.4, 2), 48000)
    rows = {"a": {"wav": "$root/a.wav", "duration": 0.5, "text": "A", "spk": "s1"},
            "b": {"wav": "$root/b.flac", "duration": 0.25, "text": "B", "spk": "s2"},
            "c": {"wav": "$root/c.mp3", "duration": 0.4, "text": "C", "spk": "s1"},
            "seg/1": {"wav": {"file": "$root/a.wav", "start": 4410, "stop": 8820}, "duration": 0.1,
                      "text": "D", "spk": "s1"}}
    (src / "train.json").write_text(json.dumps(rows))
    return src


def test_a_rerun_keeps_the_copies_and_converts_a_changed_source(corpus, tmp_path):
    dest = tmp_path / "dest"
    policy = AudioPolicy(16000)

    def convert(with_policy=policy):
        return convert_manifest(str(corpus / "train.json"), str(dest), with_policy,
                                replacements={"root": str(corpus)})

    first = convert()
    assert (first.converted, first.kept) == (4, 0) and first.seconds == pytest.approx(1.25, abs=0.01)
    again = convert()
    assert (again.converted, again.kept) == (0, 4)
    soundfile.write(corpus / "b.flac", tone(8000, 0.25, 1, freq=700.0), 8000)  # overwritten since
    stamp = os.stat(dest / "audio" / "train" / "b.flac").st_mtime_ns + 1_000_000
    os.utime(corpus / "b.flac", ns=(stamp, stamp))
    third = convert()
    assert (third.converted, third.kept) == (1, 3)
    copy = AudioPolicy(16000).read(dest / "audio" / "train" / "b.flac")
    assert (copy - policy.read(corpus / "b.flac")).abs().max() <= 1 / 32768 + 1e-7
    with pytest.raises(DataError, match="holds copies made with other settings"):
        convert(AudioPolicy(16000, channels=1))


def test_a_copy_is_never_written_over_its_source(tmp_path):
    dest = tmp_path / "dest"
    (dest / "audio" / "train").mkdir(parents=True)
    soundfile.write(dest / "audio" / "train" / "a.flac", tone(16000, 0.2, 1), 16000)
    before = (dest / "audio" / "train" / "a.flac").read_bytes()
    (tmp_path / "train.json").write_text(json.dumps({"a": {"wav": str(dest / "audio" / "train" / "a.flac"),
                                                           "duration": 0.2}}))
    with pytest.raises(AudioError, match="a.flac is its own source; it is never written over"):
        convert_manifest(str(tmp_path / "train.json"), str(dest), AudioPolicy(16000))
    assert (dest / "audio" / "train" / "a.flac").read_bytes() == before
    with pytest.raises(ManifestError, match="--dest would replace this manifest"):
        convert_manifest(str(tmp_path / "train.json"), str(tmp_path), AudioPolicy(16000))
