"""A manifest over WAV, FLAC and MP3 files of mixed rates and channels, for the conversion tests."""
from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile


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
