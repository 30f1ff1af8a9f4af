"""Vocal tract length perturbation (VTLP) of mel features: each utterance's frequency axis is stretched by a
random factor, as if spoken by a speaker with a shorter or longer vocal tract.

A factor ``alpha`` > 1 moves formants up (a shorter tract), < 1 moves them down. The warp is piecewise linear
in Hz: ``f -> alpha * f`` up to a boundary, then a straight line that keeps the band edge in place, so no
energy is pushed out of (or pulled in from beyond) the analysed band. It is applied to mel features by reading
each mel channel's centre frequency back through the inverse warp and interpolating between the input
channels; with 80 channels this is close to warping the filterbank itself, and it works after any mel
front-end (log or linear, normalized or not).

Training on a continuum of warps gives the model more "speakers" than the corpus has.

Example:
    >>> warp = FrequencyWarp(sample_rate=16000, warp_range=(0.9, 1.1))
    >>> feats = torch.randn(2, 100, 80)
    >>> warped, lengths = warp(feats, torch.tensor([100, 60]))
    >>> warped.shape
    torch.Size([2, 100, 80])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.features.filterbanks import hz_to_mel, mel_edges
from speechkit.nn.masks import checked_lengths


def inverse_warp(freqs: torch.Tensor, alpha: torch.Tensor, boundary: float, nyquist: float) -> torch.Tensor:
    """The source frequency each output frequency reads from, for the piecewise-linear VTLP warp.

    Args:
        freqs: (channels,) output frequencies in Hz, within [0, nyquist].
        alpha: (batch,) warp factors.
        boundary: Hz where the warp turns from ``alpha * f`` into the line that keeps ``nyquist`` fixed
            (scaled by min(alpha, 1), so the warped boundary stays inside the band).

    Returns:
        (batch, channels) source frequencies in Hz.
    """
    alpha = alpha.unsqueeze(1)
    knee = boundary * torch.clamp(alpha, max=1.0)  # the knee on the output axis
    below = freqs / alpha
    # Straight line from (knee, knee / alpha) to (nyquist, nyquist).
    above = nyquist - (nyquist - freqs) * (nyquist - knee / alpha) / (nyquist - knee)
    return torch.where(freqs <= knee, below, above)


def frequency_warp(x: torch.Tensor, alpha: torch.Tensor, sample_rate: int = 16000, f_min: float = 0.0,
                   f_max: Optional[float] = None, boundary: Optional[float] = None) -> torch.Tensor:
    """Warp the channel axis of mel features by ``alpha`` per item.

    Args:
        x: (batch, frames, n_mels) mel features (log or linear), channels equally spaced on the HTK mel scale
            between ``f_min`` and ``f_max`` as made by :func:`speechkit.features.fbank`.
        alpha: (batch,) warp factors; 1 leaves an item unchanged.
        boundary: Hz of the knee; None: 0.6 x Nyquist (4.8 kHz at 16 kHz, 2.4 kHz at 8 kHz).

    Returns:
        (batch, frames, n_mels), each channel linearly interpolated from its two nearest source channels.
    """
    if x.dim() != 3:
        raise ValueError(f"frequency_warp expects (batch, frames, n_mels) features, got {tuple(x.shape)}")
    nyquist = sample_rate / 2.0
    f_max = nyquist if f_max is None else f_max
    boundary = 0.6 * nyquist if boundary is None else boundary  # the same place relative to the band
    if not f_min < boundary < f_max:
        raise ValueError(f"boundary must lie between f_min={f_min} and f_max={f_max} Hz, got {boundary}")
    n_mels = x.shape[2]
    low, high = hz_to_mel(f_min), hz_to_mel(f_max)
    step = (high - low) / (n_mels + 1)
    centres = mel_edges(n_mels, f_min, f_max, device=x.device)[1:-1]
    source = inverse_warp(centres, alpha.to(device=x.device, dtype=torch.float64), boundary, f_max)
    # Fractional channel index of each source frequency, kept inside the channels that exist.
    position = ((hz_to_mel(source) - low) / step - 1.0).clamp(0.0, n_mels - 1.0)
    left = position.floor().long().clamp(max=n_mels - 2)
    weight = (position - left).to(x.dtype).unsqueeze(1)  # (batch, 1, n_mels)
    gather = lambda index: x.gather(2, index.unsqueeze(1).expand(-1, x.shape[1], -1))
    return torch.lerp(gather(left), gather(left + 1), weight)


class FrequencyWarp(torch.nn.Module):
    """Random vocal tract length perturbation of mel features, active in training mode only.

    ``forward(x, lengths) -> (y, lengths)`` with x (batch, frames, n_mels); each item gets its own factor
    drawn uniformly from ``warp_range``. In eval mode y is x. Zero padding stays zero (channels are mixed
    within a frame, never across frames).

    Args:
        sample_rate, f_min, f_max: those of the mel front-end (the channels' centre frequencies).
        warp_range: (low, high) factors, e.g. (0.9, 1.1).
        boundary: Hz where the linear warp gives way to the segment that pins the band edge; None: 0.6 x
            Nyquist (4.8 kHz at 16 kHz, 2.4 kHz for 8 kHz telephone-band features).
        prob: share of items warped; the others keep factor 1.
    """

    def __init__(self, sample_rate: int = 16000, f_min: float = 0.0, f_max: Optional[float] = None,
                 warp_range: Sequence[float] = (0.9, 1.1), boundary: Optional[float] = None,
                 prob: float = 1.0):
        super().__init__()
        low, high = (float(v) for v in warp_range)
        if not 0.0 < low <= high:
            raise ValueError(f"warp_range must be (low, high) with 0 < low <= high, got {tuple(warp_range)}")
        if not 0.0 <= prob <= 1.0:
            raise ValueError(f"prob must be in [0, 1], got {prob}")
        self.sample_rate, self.f_min, self.f_max = sample_rate, f_min, f_max
        self.warp_range, self.boundary, self.prob = (low, high), boundary, prob

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,
                generator: Optional[torch.Generator] = None) -> tuple:
        if not self.training:
            return x, lengths
        lengths = checked_lengths(x, lengths)
        low, high = self.warp_range
        draws = torch.rand(2, x.shape[0], generator=generator)
        alpha = torch.where(draws[1] < self.prob, low + (high - low) * draws[0], torch.ones(()))
        return frequency_warp(x, alpha, self.sample_rate, self.f_min, self.f_max, self.boundary), lengths

    def extra_repr(self) -> str:
        return f"warp_range={self.warp_range}, boundary={self.boundary}, prob={self.prob}"
