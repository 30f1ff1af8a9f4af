"""Voice-like harmonic bursts between silences with their true turns, for the detector tests."""
from __future__ import annotations

import math

import numpy as np

RATE = 16000


def bursts(seed: int, seconds: float = 3.0) -> tuple:
    """Harmonic bursts (a voice-like comb of partials, pitch 100-250 Hz) between silences:
    ``(wave, turns)``."""
    rng = np.random.default_rng(seed)
    wave, turns, at = np.zeros(int(seconds * RATE), dtype=np.float32), [], float(rng.uniform(0.1, 0.4))
    while at < seconds - 0.4:
        length = float(rng.uniform(0.25, 0.6))
        t = np.arange(int(length * RATE)) / RATE
        pitch = rng.uniform(100, 250)
        burst = sum(np.sin(2 * math.pi * k * pitch * t) / k for k in range(1, 12))
        start = int(at * RATE)
        wave[start:start + len(t)] = 0.2 * burst * np.hanning(len(t)) ** 0.2
        turns.append((at, at + length, "s"))
        at += length + float(rng.uniform(0.3, 0.6))
    return wave, turns
