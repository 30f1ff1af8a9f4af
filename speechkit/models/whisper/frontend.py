"""Whisper's log-mel front end: 16 kHz waveform -> (mels, frames) features, as the published models read them.

A 400-sample Hann window (periodic) every 160 samples over the reflect-padded waveform, the power spectrum
without its last frame, a Slaney-normalised mel filter bank from 0 to 8 kHz, ``log10`` of at least 1e-10,
then every value raised to at least the item's maximum minus 8 and mapped by ``(x + 4) / 4``. A clip of 30 s
or less is zero-padded to 30 s (480000 samples) before all this, so the encoder always reads 3000 frames;
a longer recording (long-form transcription) is read whole and cut into 30 s windows afterwards.

Example:
    >>> import torch
    >>> frontend = WhisperFrontEnd(num_mel_bins=80)
    >>> features = frontend(torch.zeros(2, 16000), torch.tensor([16000, 8000]))
    >>> features.shape
    torch.Size([2, 80, 3000])
"""
from __future__ import annotations

from typing import Optional

import numpy as np
import torch

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_SAMPLES = 30 * SAMPLE_RATE


def _hz_to_mel(frequencies: np.ndarray) -> np.ndarray:
    """Slaney's mel scale: linear below 1 kHz, logarithmic above."""
    frequencies = np.asarray(frequencies, dtype=np.float64)
    mels = 3.0 * frequencies / 200.0
    log_region = frequencies >= 1000.0
    mels = np.where(log_region, 15.0 + np.log(np.maximum(frequencies, 1e-10) / 1000.0) * (27.0 / np.log(6.4)),
                    mels)
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    mels = np.asarray(mels, dtype=np.float64)
    frequencies = 200.0 * mels / 3.0
    log_region = mels >= 15.0
    return np.where(log_region, 1000.0 * np.exp(np.log(6.4) / 27.0 * (mels - 15.0)), frequencies)


def mel_filters(num_mel_bins: int, n_fft: int = N_FFT, sample_rate: int = SAMPLE_RATE,
                max_frequency: float = 8000.0) -> torch.Tensor:
    """The (n_fft // 2 + 1, num_mel_bins) Slaney-normalised triangular filter bank, computed in float64.

    Example:
        >>> mel_filters(80).shape
        torch.Size([201, 80])
    """
    fft_frequencies = np.linspace(0, sample_rate // 2, n_fft // 2 + 1)
    mel_points = np.linspace(_hz_to_mel(0.0), _hz_to_mel(max_frequency), num_mel_bins + 2)
    edges = _mel_to_hz(mel_points)
    widths = np.diff(edges)
    slopes = edges[None, :] - fft_frequencies[:, None]
    falling = -slopes[:, :-2] / widths[:-1]
    rising = slopes[:, 2:] / widths[1:]
    filters = np.maximum(0.0, np.minimum(falling, rising))
    filters *= (2.0 / (edges[2:num_mel_bins + 2] - edges[:num_mel_bins]))[None, :]
    return torch.from_numpy(filters)


class WhisperFrontEnd(torch.nn.Module):
    """Waveforms -> Whisper log-mel features (no trainable parameters).

    Arguments:
        num_mel_bins: 80 (tiny ... large-v2) or 128 (large-v3, turbo).

    ``forward(wavs, lengths)``: wavs (batch, time) float at 16 kHz, lengths (batch,) int64 valid samples.
    Returns (batch, num_mel_bins, 3000): each item is cut to its length and zero-padded to 30 s on its own,
    so an item's features do not depend on what it is batched with. Items longer than 30 s are refused here;
    :meth:`long_form` reads one recording of any length.
    """

    def __init__(self, num_mel_bins: int = 80):
        super().__init__()
        self.num_mel_bins = num_mel_bins
        self.register_buffer("filters", mel_filters(num_mel_bins).to(torch.float32).T.contiguous(),
                             persistent=False)
        self.register_buffer("window", torch.hann_window(N_FFT), persistent=False)

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        if wavs.dim() == 1:
            wavs = wavs.unsqueeze(0)
        if lengths is None:
            lengths = torch.full((wavs.shape[0],), wavs.shape[1], dtype=torch.int64)
        longest = int(lengths.max()) if lengths.numel() else 0
        if longest > CHUNK_SAMPLES:
            raise ValueError(f"WhisperFrontEnd: an item of {longest} samples is longer than 30 s; "
                             "transcribe it with long-form transcription")
        padded = wavs.new_zeros(wavs.shape[0], CHUNK_SAMPLES, dtype=torch.float32)
        positions = torch.arange(min(wavs.shape[1], CHUNK_SAMPLES), device=wavs.device)
        valid = positions[None, :] < lengths.to(wavs.device)[:, None]
        padded[:, :positions.numel()] = torch.where(valid, wavs[:, :positions.numel()].float(), 0.0)
        return self.log_mel(padded)

    def long_form(self, waveform: torch.Tensor) -> torch.Tensor:
        """Features of one recording of any length: (num_mel_bins, max(3000, samples // 160)).

        A recording of 30 s or less is padded to 30 s as in :meth:`forward`; a longer one is read whole (its
        maximum, and so the floor at maximum - 8, is the whole recording's).
        """
        waveform = waveform.float().reshape(-1)
        if waveform.numel() <= CHUNK_SAMPLES:
            return self.forward(waveform[None], torch.tensor([waveform.numel()]))[0]
        return self.log_mel(waveform[None])[0]

    def log_mel(self, wavs: torch.Tensor) -> torch.Tensor:
        """(batch, samples) -> (batch, mels, samples // 160): the transform itself, per item maximum."""
        spectrum = torch.stft(wavs, N_FFT, HOP_LENGTH, window=self.window, center=True, pad_mode="reflect",
                              return_complex=True)
        power = (spectrum[..., :-1].abs() ** 2).contiguous()
        mel = torch.clamp(self.filters @ power, min=1e-10).log10()
        ceiling = mel.amax(dim=(1, 2), keepdim=True)
        mel = torch.maximum(mel, ceiling - 8.0)
        return (mel + 4.0) / 4.0


def frames_of(samples: int) -> int:
    """Log-mel frames of a recording of ``samples`` samples (at least one 30 s window)."""
    return max(CHUNK_SAMPLES, samples) // HOP_LENGTH


__all__ = ["WhisperFrontEnd", "mel_filters", "frames_of", "SAMPLE_RATE", "HOP_LENGTH", "CHUNK_SAMPLES"]
