"""Mel filterbank energies (fbank), MFCC and deltas of padded waveform batches, on torch.

Functions take ``(x, lengths)`` with absolute lengths and return ``(features, frame_lengths)``; the modules
``Fbank``, ``MFCC`` and ``Deltas`` wrap them for YAML recipes. Features past an item's frames are zero.

Example:
    >>> fbank_module = Fbank(n_mels=40)
    >>> feats, frames = fbank_module(torch.randn(2, 16000), torch.tensor([16000, 12000]))
    >>> feats.shape, frames.tolist()
    (torch.Size([2, 101, 40]), [101, 76])
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from speechkit.nn.masks import checked_lengths, length_mask
from speechkit.nn.stft import make_window, power_spectrum, stft


def hz_to_mel(hz):
    """HTK mel scale: 2595 * log10(1 + f / 700)."""
    return 2595.0 * math.log10(1.0 + hz / 700.0) if isinstance(hz, (int, float)) \
        else 2595.0 * torch.log10(1.0 + hz / 700.0)


def mel_to_hz(mel):
    """Inverse of :func:`hz_to_mel`."""
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_edges(n_mels: int, f_min: float, f_max: float, device=None) -> torch.Tensor:
    """(n_mels + 2,) float64 frequencies in Hz, equally spaced on the mel scale from f_min to f_max: the edges
    of the triangular filters, whose centres are ``[1:-1]``."""
    grid = torch.linspace(hz_to_mel(f_min), hz_to_mel(f_max), n_mels + 2, dtype=torch.float64, device=device)
    return mel_to_hz(grid)


def mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int, f_min: float = 0.0,
                   f_max: Optional[float] = None, norm: Optional[str] = None) -> torch.Tensor:
    """(n_freqs, n_mels) triangular filters, equally spaced on the mel scale between f_min and f_max.

    ``norm="slaney"`` divides each triangle by its width in Hz (equal area); None keeps peaks at 1.
    """
    f_max = sample_rate / 2.0 if f_max is None else f_max
    if not 0.0 <= f_min < f_max <= sample_rate / 2.0:
        raise ValueError(f"need 0 <= f_min < f_max <= sample_rate / 2, got f_min={f_min}, f_max={f_max}, "
                         f"sample_rate={sample_rate}")
    if n_mels < 1:
        raise ValueError(f"n_mels must be >= 1, got {n_mels}")
    freqs = torch.linspace(0.0, sample_rate / 2.0, n_freqs, dtype=torch.float64)
    edges = mel_edges(n_mels, f_min, f_max)
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    rising = (freqs.unsqueeze(1) - lower) / (center - lower)
    falling = (upper - freqs.unsqueeze(1)) / (upper - center)
    filters = torch.clamp(torch.minimum(rising, falling), min=0.0)
    if norm == "slaney":
        filters = filters * (2.0 / (upper - lower))
    elif norm is not None:
        raise ValueError(f"unknown filterbank norm {norm!r}; use None or 'slaney'")
    return filters.to(torch.float32)


def dct_matrix(n_mels: int, n_mfcc: int) -> torch.Tensor:
    """(n_mels, n_mfcc) orthonormal DCT-II basis (log-mel @ basis gives cepstra)."""
    if not 0 < n_mfcc <= n_mels:
        raise ValueError(f"n_mfcc must be in [1, n_mels={n_mels}], got {n_mfcc}")
    n = torch.arange(n_mels, dtype=torch.float64).unsqueeze(1)
    k = torch.arange(n_mfcc, dtype=torch.float64).unsqueeze(0)
    basis = torch.cos(math.pi / n_mels * (n + 0.5) * k) * math.sqrt(2.0 / n_mels)
    basis[:, 0] /= math.sqrt(2.0)
    return basis.to(torch.float32)


def fbank(x: torch.Tensor, lengths: torch.Tensor, sample_rate: int = 16000, n_fft: int = 512,
          win_length: int = 400, hop_length: int = 160, n_mels: int = 80, f_min: float = 0.0,
          f_max: Optional[float] = None, window: str = "hamming", power: float = 2.0, log: bool = True,
          floor: float = 1e-10, window_tensor: Optional[torch.Tensor] = None,
          filters: Optional[torch.Tensor] = None) -> tuple:
    """Log mel filterbank energies.

    Args:
        x: (batch, time) waveforms; lengths: (batch,) int64 valid samples.
        log: natural log of max(energy, floor); False gives the energies themselves.
        window_tensor, filters: the window and (n_fft // 2 + 1, n_mels) filterbank, when already made.

    Returns:
        ``(feats, frame_lengths)``: feats (batch, frames, n_mels) float32, zero past each item's frames.
    """
    # Always float32, even under autocast: log energies of tiny values lose everything in bf16.
    with torch.autocast(device_type=x.device.type, enabled=False):
        spec, frame_lengths = stft(x, lengths, n_fft, hop_length, win_length, window, True, window_tensor)
        if filters is None:
            filters = mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate, f_min, f_max)
        energies = power_spectrum(spec, power) @ filters.to(device=spec.device, dtype=torch.float32)
        if log:
            energies = torch.log(torch.clamp(energies, min=floor))
    mask = length_mask(frame_lengths, energies.shape[1]).unsqueeze(-1)
    return energies * mask, frame_lengths


def mfcc(x: torch.Tensor, lengths: torch.Tensor, n_mfcc: int = 13, n_mels: int = 40,
         dct: Optional[torch.Tensor] = None, **fbank_options) -> tuple:
    """Mel-frequency cepstral coefficients: orthonormal DCT-II of the log mel energies.

    Returns ``(coeffs, frame_lengths)`` with coeffs (batch, frames, n_mfcc), zero past each item's frames.
    """
    log_mel, frame_lengths = fbank(x, lengths, n_mels=n_mels, log=True, **fbank_options)
    dct = dct_matrix(n_mels, n_mfcc) if dct is None else dct
    with torch.autocast(device_type=x.device.type, enabled=False):
        coeffs = log_mel @ dct.to(device=log_mel.device, dtype=torch.float32)
    return coeffs * length_mask(frame_lengths, coeffs.shape[1]).unsqueeze(-1), frame_lengths


def deltas(feats: torch.Tensor, lengths: torch.Tensor, window: int = 2) -> torch.Tensor:
    """Regression deltas over +-``window`` frames; each item repeats its own first/last frame at its edges.

    Args:
        feats: (batch, frames, features); lengths: (batch,) int64 valid frames.

    Returns:
        (batch, frames, features) deltas, zero past each item's frames.
    """
    lengths = checked_lengths(feats, lengths)
    frames = feats.shape[1]
    position = torch.arange(frames, device=feats.device).unsqueeze(0)
    last = (lengths - 1).clamp(min=0).unsqueeze(1)
    total = torch.zeros_like(feats)
    for n in range(1, window + 1):
        ahead = torch.minimum(position + n, last).expand(feats.shape[0], -1)
        behind = torch.minimum((position - n).clamp(min=0), last).expand(feats.shape[0], -1)
        gather = lambda index: feats.gather(1, index.unsqueeze(-1).expand(-1, -1, feats.shape[2]))
        total = total + n * (gather(ahead) - gather(behind))
    result = total / (2.0 * sum(n * n for n in range(1, window + 1)))
    return result * length_mask(lengths, frames).unsqueeze(-1).to(feats.dtype)


def _with_deltas(feats: torch.Tensor, frame_lengths: torch.Tensor, order: int) -> torch.Tensor:
    parts = [feats]
    for _ in range(order):
        parts.append(deltas(parts[-1], frame_lengths))
    return torch.cat(parts, dim=-1)


class Fbank(torch.nn.Module):
    """Log mel filterbank module: ``forward(x, lengths) -> (feats, frame_lengths)``.

    ``delta_order`` 1 or 2 appends deltas (and delta-deltas): feats get n_mels * (1 + delta_order) features.

    Example:
        >>> feats, frames = Fbank(n_mels=80)(torch.randn(1, 3200), torch.tensor([3200]))
        >>> feats.shape
        torch.Size([1, 21, 80])
    """

    def __init__(self, sample_rate: int = 16000, n_fft: int = 512, win_length: int = 400,
                 hop_length: int = 160, n_mels: int = 80, f_min: float = 0.0, f_max: Optional[float] = None,
                 window: str = "hamming", log: bool = True, delta_order: int = 0):
        super().__init__()
        # Made once (bad settings fail here, not at the first batch); buffers move with .to(device) and
        # stay out of checkpoints.
        self.register_buffer("window_tensor", make_window(window, win_length, n_fft), persistent=False)
        self.register_buffer("filters", mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate, f_min, f_max),
                             persistent=False)
        self.options = dict(sample_rate=sample_rate, n_fft=n_fft, win_length=win_length,
                            hop_length=hop_length,
                            n_mels=n_mels, f_min=f_min, f_max=f_max, window=window, log=log)
        self.delta_order = delta_order
        self.num_features = n_mels * (1 + delta_order)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        feats, frame_lengths = fbank(x, lengths, **self.options, window_tensor=self.window_tensor,
                                     filters=self.filters)
        return _with_deltas(feats, frame_lengths, self.delta_order), frame_lengths


class MFCC(torch.nn.Module):
    """MFCC module: ``forward(x, lengths) -> (coeffs, frame_lengths)``, with optional deltas.

    Example:
        >>> coeffs, frames = MFCC(n_mfcc=13, delta_order=2)(torch.randn(1, 3200), torch.tensor([3200]))
        >>> coeffs.shape
        torch.Size([1, 21, 39])
    """

    def __init__(self, n_mfcc: int = 13, n_mels: int = 40, sample_rate: int = 16000, n_fft: int = 512,
                 win_length: int = 400, hop_length: int = 160, f_min: float = 0.0,
                 f_max: Optional[float] = None, window: str = "hamming", delta_order: int = 0):
        super().__init__()
        self.register_buffer("dct", dct_matrix(n_mels, n_mfcc), persistent=False)
        self.register_buffer("window_tensor", make_window(window, win_length, n_fft), persistent=False)
        self.register_buffer("filters", mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate, f_min, f_max),
                             persistent=False)
        self.n_mfcc, self.n_mels, self.delta_order = n_mfcc, n_mels, delta_order
        self.options = dict(sample_rate=sample_rate, n_fft=n_fft, win_length=win_length,
                            hop_length=hop_length,
                            f_min=f_min, f_max=f_max, window=window)
        self.num_features = n_mfcc * (1 + delta_order)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        coeffs, frame_lengths = mfcc(x, lengths, n_mfcc=self.n_mfcc, n_mels=self.n_mels, dct=self.dct,
                                     window_tensor=self.window_tensor, filters=self.filters, **self.options)
        return _with_deltas(coeffs, frame_lengths, self.delta_order), frame_lengths


class Deltas(torch.nn.Module):
    """Appends deltas: ``forward(feats, lengths) -> (cat([feats, deltas], -1), lengths)``."""

    def __init__(self, window: int = 2):
        super().__init__()
        self.window = window

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor) -> tuple:
        return torch.cat([feats, deltas(feats, lengths, self.window)], dim=-1), lengths
