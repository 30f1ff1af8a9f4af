"""Energy-based voice activity detection: speech where a frame's level is near the recording's loud frames.

Each 25 ms frame (10 ms hop) gets its RMS level in dB; the threshold sits ``margin_db`` below the level of
the loud frames (the ``reference_percentile``-th percentile), and never below ``floor_db``. Speech runs
shorter than ``min_speech`` are dropped, pauses shorter than ``min_silence`` are bridged, and every segment
is widened by ``padding`` seconds. Measured on clean recordings only (docs/speaker.md); loud noise is
taken for speech.

Example:
    >>> wave = torch.cat([torch.zeros(8000), 0.3 * torch.randn(16000), torch.zeros(8000)])
    >>> [(round(s, 2), round(e, 2)) for s, e in energy_vad(wave, 16000)]
    [(0.47, 1.53)]
"""
from __future__ import annotations

import numpy as np
import torch

HOP = 0.01  # seconds between frame decisions


def frame_levels(wave: torch.Tensor, sample_rate: int, frame: float = 0.025, hop: float = 0.01) -> np.ndarray:
    """(frames,) RMS level in dB of each ``frame``-second frame every ``hop`` seconds."""
    size, step = int(frame * sample_rate), int(hop * sample_rate)
    wave = wave.detach().float().reshape(-1)
    if wave.numel() < size:
        wave = torch.nn.functional.pad(wave, (0, size - wave.numel()))
    frames = wave.unfold(0, size, step)
    return (10.0 * torch.log10(frames.pow(2).mean(-1) + 1e-12)).numpy()


def _runs(active: np.ndarray) -> list:
    """(start, end) frame index runs of True."""
    edges = np.diff(np.r_[0, active.astype(np.int8), 0])
    return list(zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)))


def energy_vad(wave: torch.Tensor, sample_rate: int, margin_db: float = 30.0, floor_db: float = -55.0,
               reference_percentile: float = 95.0, min_speech: float = 0.15, min_silence: float = 0.25,
               padding: float = 0.02, hop: float = HOP) -> list:
    """Speech segments ``[(start, end), ...]`` in seconds of a mono ``wave`` (time,)."""
    levels = frame_levels(wave, sample_rate, hop=hop)
    duration = wave.numel() / sample_rate
    if levels.size == 0:
        return []
    threshold = max(float(np.percentile(levels, reference_percentile)) - margin_db, floor_db)
    # a frame's level is its centre's: 12.5 ms into the recording for the first 25 ms frame
    return smoothed_segments(levels > threshold, duration, hop=hop, centre=0.0125, min_speech=min_speech,
                             min_silence=min_silence, padding=padding)


def smoothed_segments(active: np.ndarray, duration: float, hop: float = HOP, centre: float = 0.0,
                      min_speech: float = 0.15, min_silence: float = 0.25, padding: float = 0.02) -> list:
    """Speech segments ``[(start, end), ...]`` in seconds from per-frame decisions (frames, bool), frame ``i``
    centred on ``centre + i * hop``: pauses shorter than ``min_silence`` bridged, runs shorter than
    ``min_speech`` dropped, each segment widened by ``padding`` (within 0..``duration``)."""
    segments = [[start * hop + centre - hop / 2, (end - 1) * hop + centre + hop / 2]
                for start, end in _runs(np.asarray(active, dtype=bool))]
    merged: list = []
    for segment in segments:
        if merged and segment[0] - merged[-1][1] < min_silence:
            merged[-1][1] = segment[1]
        else:
            merged.append(segment)
    out = []
    for start, end in merged:
        if end - start >= min_speech:
            out.append((float(max(0.0, start - padding)), float(min(duration, end + padding))))
    return out
