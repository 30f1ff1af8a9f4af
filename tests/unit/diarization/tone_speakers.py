"""Tone "speakers" (one pitch and timbre each) and a deterministic embedder that tells them apart, for the
diarization tests."""
from __future__ import annotations

import numpy as np
import soundfile
import torch

from speechkit.features import Fbank

RATE = 16000


class MelEmbedder:
    """A deterministic speaker "model" for pipeline tests: the mean log mel spectrum of the audio (tones of
    different pitch give different spectra)."""

    sample_rate = RATE

    def __init__(self):
        self.fbank = Fbank(n_mels=24)

    def embed_batch(self, wavs, lengths):
        feats, frames = self.fbank(wavs, lengths)
        mask = (torch.arange(feats.shape[1])[None, :] < frames[:, None]).float().unsqueeze(-1)
        mean = (feats * mask).sum(1) / mask.sum(1)
        return mean - mean.mean(-1, keepdim=True)

    def load_audio(self, path):
        wave, _ = soundfile.read(path, dtype="float32")
        return torch.from_numpy(wave)


def write_tone_rows(root) -> dict:
    """Four utterances each of four tone 'speakers' written into ``root``: ``{id: {"wav", "spk"}}``."""
    rng = np.random.default_rng(1)
    rows = {}
    for s, (pitch, harmonics) in enumerate(((110, 3), (220, 1), (330, 5), (500, 2))):
        for u in range(4):
            n = int(RATE * rng.uniform(0.8, 1.6))
            t = np.arange(n) / RATE
            wave = sum(0.15 / h * np.sin(2 * np.pi * pitch * h * t) for h in range(1, harmonics + 1))
            wave = np.r_[np.zeros(1600), wave, np.zeros(1600)] + 0.001 * rng.standard_normal(n + 3200)
            path = root / f"s{s}-{u}.flac"
            soundfile.write(path, wave.astype(np.float32), RATE)
            rows[f"s{s}-{u}"] = {"wav": str(path), "spk": f"s{s}"}
    return rows
