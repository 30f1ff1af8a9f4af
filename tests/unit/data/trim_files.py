"""Recordings with known silence around a tone, for the trimming tests (library and command)."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.data import audio
from speechkit.data.manifest import write_json_manifest

RATE = 16000


def tone_with_silence(before: int, speech: int, after: int, seed: int = 0) -> np.ndarray:
    """A 300 Hz tone of ``speech`` samples between quiet hiss (-70 dB under the tone), shape (time,)."""
    rng = np.random.default_rng(seed)
    tone = 0.5 * np.sin(2 * np.pi * 300 * np.arange(speech) / RATE)
    wave = np.concatenate([np.zeros(before), tone, np.zeros(after)])
    return (wave + 1e-4 * rng.standard_normal(len(wave))).astype(np.float32)


@pytest.fixture
def recordings(tmp_path):
    """Three FLAC files with known speech positions, and their manifest with a $data_root placeholder."""
    root = tmp_path / "corpus"
    layout = {"a": (4000, 16000, 8000), "b": (0, 8000, 3200), "c": (7200, 4800, 0)}
    rows = {}
    for name, (before, speech, after) in layout.items():
        audio.write(root / f"{name}.flac", tone_with_silence(before, speech, after), RATE)
        rows[name] = {"wav": f"$data_root/{name}.flac", "duration": (before + speech + after) / RATE,
                      "text": name.upper()}
    path = tmp_path / "train.json"
    write_json_manifest(rows, path)
    return root, path, layout
