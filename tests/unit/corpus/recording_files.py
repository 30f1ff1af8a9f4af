"""Folders of a speaker's own recordings with transcripts, for the corpus tests (library and command)."""
from __future__ import annotations

import numpy as np
import soundfile


def write_recording(path, text, rate=8000, seconds=0.6, seed=0, channels=1):
    """A tone burst between quiet edges (stands for a word), and its transcript beside it."""
    rng = np.random.default_rng(seed)
    time = np.arange(int(rate * seconds)) / rate
    wave = 0.3 * np.sin(2 * np.pi * rng.uniform(150, 300) * time) * (np.abs(time - seconds / 2) < seconds / 4)
    wave = wave + 0.001 * rng.standard_normal(len(time))
    path.parent.mkdir(parents=True, exist_ok=True)
    samples = np.stack([wave] * channels, axis=1) if channels > 1 else wave
    soundfile.write(path, samples, rate, subtype="PCM_16")
    if text is not None:
        path.with_suffix(".txt").write_text(text)
    return path


def speaker_folder(root):
    """anna: two 8 kHz files; ben: a 22.05 kHz stereo file and a FLAC in a nested folder."""
    write_recording(root / "anna" / "a1.wav", "turn on the light", seed=1)
    write_recording(root / "anna" / "a2.wav", "Seven, four!", seed=2)
    write_recording(root / "ben" / "b1.wav", "hello there", rate=22050, channels=2, seed=3)
    write_recording(root / "ben" / "day2" / "b2.flac", "good night", rate=16000, seed=4)
    return root
