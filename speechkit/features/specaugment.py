"""SpecAugment: time warping, frequency masks and time masks on padded feature batches.

Every item draws its own masks and warp, placed inside its own frames: padding is never masked, warped or
counted, and a mask never spills past an item's end. Randomness comes from ``generator`` (a
``torch.Generator``) when given, else from torch's global generator.

Example:
    >>> feats = torch.randn(2, 100, 80)
    >>> augment = SpecAugment(freq_masks=2, freq_mask_width=15, time_masks=2, time_mask_width=20)
    >>> out, lengths = augment(feats, torch.tensor([100, 60]))   # training mode: masks applied
    >>> out.shape
    torch.Size([2, 100, 80])
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.nn.masks import checked_lengths, length_mask


def _uniform_int(high: torch.Tensor, generator: Optional[torch.Generator]) -> torch.Tensor:
    """One integer in [0, high[i]] for each entry of ``high`` (int64 tensor, high >= 0)."""
    draw = torch.rand(high.shape, generator=generator, device=high.device if generator is None else "cpu")
    return torch.minimum((draw.to(high.device) * (high + 1).to(torch.float32)).to(torch.int64), high)


def _band_mask(size: int, widths: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """(batch, num_masks, size) -> OR over masks: (batch, size) True inside any [start, start + width)."""
    positions = torch.arange(size, device=widths.device).view(1, 1, size)
    inside = (positions >= starts.unsqueeze(-1)) & (positions < (starts + widths).unsqueeze(-1))
    return inside.any(dim=1)


def time_mask(x: torch.Tensor, lengths: torch.Tensor, num_masks: int = 2, max_width: int = 40,
              max_ratio: Optional[float] = None, value: float = 0.0,
              generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Set ``num_masks`` random spans of frames of each item to ``value``.

    Args:
        x: (batch, frames, features); lengths: (batch,) int64 valid frames.
        max_width: widest span in frames; ``max_ratio`` further caps it at that share of the item's frames.

    Returns:
        masked copy of ``x``; spans lie inside each item's frames.
    """
    lengths = checked_lengths(x, lengths)
    if num_masks <= 0 or max_width <= 0:
        return x.clone()
    limit = torch.full_like(lengths, max_width)
    if max_ratio is not None:
        limit = torch.minimum(limit, (lengths.to(torch.float64) * max_ratio).to(torch.int64))
    limit = torch.minimum(limit, lengths).unsqueeze(1).expand(-1, num_masks)
    widths = _uniform_int(limit, generator)
    starts = _uniform_int(lengths.unsqueeze(1) - widths, generator)
    masked = _band_mask(x.shape[1], widths, starts).unsqueeze(-1)
    return x.masked_fill(masked, value)


def freq_mask(x: torch.Tensor, lengths: torch.Tensor, num_masks: int = 2, max_width: int = 27,
              value: float = 0.0, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Set ``num_masks`` random bands of feature channels of each item to ``value`` (on its frames only)."""
    lengths = checked_lengths(x, lengths)
    if num_masks <= 0 or max_width <= 0:
        return x.clone()
    channels = x.shape[2]
    limit = torch.full((x.shape[0], num_masks), min(max_width, channels), dtype=torch.int64, device=x.device)
    widths = _uniform_int(limit, generator)
    starts = _uniform_int(channels - widths, generator)
    band = _band_mask(channels, widths, starts).unsqueeze(1)  # (batch, 1, channels)
    frames = length_mask(lengths, x.shape[1]).unsqueeze(-1)
    return x.masked_fill(band & frames, value)


def time_warp(x: torch.Tensor, lengths: torch.Tensor, window: int = 5,
              generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Move a random point of each item's time axis by up to ``window`` frames, stretching both sides.

    The item's first ``c`` frames are resampled (linearly) to ``c + d`` frames and the rest to fill the item's
    remaining frames, so the item keeps its length. Items shorter than ``2 * window + 2`` frames are kept.
    """
    lengths = checked_lengths(x, lengths)
    out = x.clone()
    if window <= 0:
        return out
    for i, length in enumerate(lengths.tolist()):
        if length < 2 * window + 2:
            continue
        center = window + 1 + int(_uniform_int(torch.tensor([length - 2 * window - 2]), generator))
        shift = int(_uniform_int(torch.tensor([2 * window]), generator)) - window
        target = center + shift
        if shift == 0:
            continue
        item = x[i, :length].transpose(0, 1).unsqueeze(0)  # (1, features, frames)
        left = torch.nn.functional.interpolate(item[..., :center], size=target, mode="linear",
                                               align_corners=False)
        right = torch.nn.functional.interpolate(item[..., center:], size=length - target, mode="linear",
                                                align_corners=False)
        out[i, :length] = torch.cat([left, right], dim=-1).squeeze(0).transpose(0, 1)
    return out


class SpecAugment(torch.nn.Module):
    """Time warp, then frequency masks, then time masks; active in training mode only.

    ``forward(x, lengths) -> (y, lengths)`` with x (batch, frames, features). In eval mode y is x.

    Args:
        time_warp_window: largest warp in frames (0: no warp).
        freq_masks, freq_mask_width: number and widest band of feature-channel masks.
        time_masks, time_mask_width: number and widest span of frame masks; ``time_mask_ratio`` also caps a
            span at that share of the item's frames (adaptive masking for short utterances).
        replace_with: "zero", or "mean" (each item's mean over its own frames and channels).
    """

    def __init__(self, time_warp_window: int = 0, freq_masks: int = 2, freq_mask_width: int = 27,
                 time_masks: int = 2, time_mask_width: int = 40, time_mask_ratio: Optional[float] = None,
                 replace_with: str = "zero"):
        super().__init__()
        if replace_with not in ("zero", "mean"):
            raise ValueError(f"replace_with must be 'zero' or 'mean', got {replace_with!r}")
        self.time_warp_window = time_warp_window
        self.freq_masks, self.freq_mask_width = freq_masks, freq_mask_width
        self.time_masks, self.time_mask_width = time_masks, time_mask_width
        self.time_mask_ratio = time_mask_ratio
        self.replace_with = replace_with

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,
                generator: Optional[torch.Generator] = None) -> tuple:
        if not self.training:
            return x, lengths
        lengths = checked_lengths(x, lengths)
        y = time_warp(x, lengths, self.time_warp_window, generator)
        fill = self._fill_values(y, lengths)
        band = freq_mask(torch.zeros_like(y[..., :1]).expand_as(y).clone(), lengths, self.freq_masks,
                         self.freq_mask_width, value=1.0, generator=generator).bool()
        span = time_mask(torch.zeros_like(y[..., :1]), lengths, self.time_masks, self.time_mask_width,
                         self.time_mask_ratio, value=1.0, generator=generator).bool()
        return torch.where(band | span, fill, y), lengths

    def _fill_values(self, y: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        if self.replace_with == "zero":
            return torch.zeros((), dtype=y.dtype, device=y.device)
        frames = length_mask(lengths, y.shape[1]).unsqueeze(-1).to(y.dtype)
        count = (lengths.clamp(min=1) * y.shape[2]).to(y.dtype)
        return ((y * frames).sum(dim=(1, 2)) / count).view(-1, 1, 1)
