"""Speed perturbation: play each waveform faster or slower (pitch and tempo together) by resampling.

A speed of 1.1 makes an item 10% faster, hence about 1/1.1 as long. Lengths come back updated; samples past
an item's length are zero, so the result of an item does not depend on what it was batched with.

Example:
    >>> wave = torch.randn(2, 16000)
    >>> fast, lengths = speed_perturb(wave, torch.tensor([16000, 8000]), speed=1.1)
    >>> lengths.tolist()
    [14546, 7273]
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.nn.masks import checked_lengths, length_mask


def _rates(speed: float, sample_rate: int) -> tuple:
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    return int(round(sample_rate * speed)), int(sample_rate)


def perturbed_lengths(lengths: torch.Tensor, speed: float, sample_rate: int = 16000) -> torch.Tensor:
    """Samples an item of ``lengths`` samples has after :func:`speed_perturb` at ``speed``."""
    orig, new = _rates(speed, sample_rate)
    divisor = math.gcd(orig, new)
    orig, new = orig // divisor, new // divisor
    return (torch.as_tensor(lengths, dtype=torch.int64) * new + orig - 1) // orig  # ceil(L * new / orig)


def speed_perturb(x: torch.Tensor, lengths: torch.Tensor, speed: float, sample_rate: int = 16000) -> tuple:
    """Change the speed of every item by the same factor.

    Args:
        x: (batch, time) waveforms; lengths: (batch,) int64 valid samples.
        speed: > 1 faster and shorter, < 1 slower and longer.

    Returns:
        ``(y, new_lengths)``: y (batch, ceil(time / speed)) with zeros past each item's new length.
    """
    from speechkit.data.resample import resample  # torch-only resampler shared with the data layer

    lengths = checked_lengths(x, lengths)
    if speed == 1.0:
        return x * length_mask(lengths, x.shape[1]).to(x.dtype), lengths
    orig, new = _rates(speed, sample_rate)
    clean = x * length_mask(lengths, x.shape[1]).to(x.dtype)  # padding must be silence, not leftovers
    y = resample(clean, orig, new)
    new_lengths = perturbed_lengths(lengths, speed, sample_rate).to(x.device)
    return y * length_mask(new_lengths, y.shape[1]).to(y.dtype), new_lengths


class SpeedPerturb(torch.nn.Module):
    """Each item gets a speed drawn from ``speeds`` (with probability ``prob``; else 1.0); training mode only.

    ``forward(x, lengths) -> (y, new_lengths)`` with x (batch, time); y is padded to the longest new length.

    Example:
        >>> perturb = SpeedPerturb(speeds=(0.9, 1.0, 1.1))
        >>> y, lengths = perturb(torch.randn(3, 8000), torch.tensor([8000, 6000, 4000]))
    """

    def __init__(self, sample_rate: int = 16000, speeds: Sequence[float] = (0.9, 1.0, 1.1),
                 prob: float = 1.0):
        super().__init__()
        if not speeds:
            raise ValueError("speeds must name at least one speed")
        for speed in speeds:
            _rates(speed, sample_rate)
        self.sample_rate, self.speeds, self.prob = sample_rate, tuple(speeds), prob

    def forward(self, x: torch.Tensor, lengths: torch.Tensor,
                generator: Optional[torch.Generator] = None) -> tuple:
        lengths = checked_lengths(x, lengths)
        if not self.training:
            return x, lengths
        batch = x.shape[0]
        picks = torch.randint(len(self.speeds), (batch,), generator=generator)
        applied = torch.rand(batch, generator=generator) < self.prob
        speeds = [self.speeds[int(p)] if bool(a) else 1.0 for p, a in zip(picks, applied)]
        outputs, new_lengths = [None] * batch, torch.empty_like(lengths)
        for speed in sorted(set(speeds)):
            index = [i for i, s in enumerate(speeds) if s == speed]
            sub_lengths = lengths[index]
            longest = int(sub_lengths.max()) if len(index) else 0
            y, y_lengths = speed_perturb(x[index, :longest], sub_lengths, speed, self.sample_rate)
            for row, i in enumerate(index):
                outputs[i] = y[row, : int(y_lengths[row])]
                new_lengths[i] = y_lengths[row]
        longest = int(new_lengths.max()) if batch else 0
        y = x.new_zeros(batch, longest)
        for i, item in enumerate(outputs):
            y[i, : item.shape[0]] = item
        return y, new_lengths
