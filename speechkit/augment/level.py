"""Level, position and resolution: augmentations that keep the waveform's content but not how it is stored.

- :class:`TimeShift`: the item starts later or earlier (leading silence added or samples cut), length kept;
- :class:`Quantize`: uniform requantisation to few bits (an 8-bit or 12-bit converter), beyond mu-law;
- :class:`LoudnessNormalize`: the item scaled to a loudness drawn in dBFS (RMS over its samples).

Example:
    >>> from speechkit.augment import generator_for
    >>> Quantize(bits=(4, 8)).augment(torch.randn(800), generator_for(0)).shape
    torch.Size([800])
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from speechkit.augment.core import WaveAugmentation, check_range, uniform
from speechkit.errors import HparamsError


class TimeShift(WaveAugmentation):
    """Shift the item by a delay drawn from ``shift_ms`` (ms; negative: earlier), keeping its length: a
    positive delay prepends silence and drops the end, a negative one drops the start and appends silence;
    ``rollover=True`` wraps the samples around instead.

    Example:
        >>> from speechkit.augment import generator_for
        >>> TimeShift(shift_ms=(1.0, 1.0), sample_rate=1000).augment(torch.arange(1.0, 5.0), generator_for(0))
        tensor([0., 1., 2., 3.])
    """

    def __init__(self, shift_ms: Sequence[float] = (-100.0, 100.0), rollover: bool = False,
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        self.shift_ms = check_range(type(self).__name__, "shift_ms", shift_ms, -10_000.0, 10_000.0)
        self.rollover = bool(rollover)

    def augment(self, wave, generator):
        shift = int(round(uniform(generator, *self.shift_ms) * self.sample_rate / 1000.0))
        length = wave.shape[0]
        if shift == 0 or length == 0:
            return wave
        if self.rollover:
            return torch.roll(wave, shift)
        shift = max(-length, min(length, shift))
        if shift > 0:
            return torch.cat([wave.new_zeros(shift), wave[: length - shift]])
        return torch.cat([wave[-shift:], wave.new_zeros(-shift)])


class Quantize(WaveAugmentation):
    """Requantise to a bit depth drawn from ``bits`` (an int range): uniform steps over the item's peak, as a
    low-resolution converter would (:class:`~speechkit.augment.MuLaw` compands first; this does not)."""

    def __init__(self, bits: Sequence[int] = (6, 12), sample_rate: int = 16000):
        super().__init__(sample_rate)
        low, high = check_range(type(self).__name__, "bits", bits, 2, 24)
        if low != int(low) or high != int(high):
            raise HparamsError(f"Quantize: bits must be whole numbers, got {bits!r}")
        self.bits = (int(low), int(high))

    def augment(self, wave, generator):
        bits = int(torch.randint(self.bits[0], self.bits[1] + 1, (), generator=generator))
        peak = float(wave.abs().max()) if wave.numel() else 0.0
        if peak == 0.0:
            return wave
        steps = 2 ** (bits - 1) - 1  # a signed converter: 2^bits levels around 0
        return torch.round(wave / peak * steps) / steps * peak


class LoudnessNormalize(WaveAugmentation):
    """Scale the item to a loudness drawn from ``target_dbfs`` (RMS over its samples, dB relative to full
    scale 1.0), so the model meets quiet and loud recordings alike; a silent item is left as it is. With
    ``peak_limit`` the gain is lowered when the peak would pass it (no clipping).

    Example:
        >>> from speechkit.augment import generator_for
        >>> out = LoudnessNormalize(target_dbfs=(-20.0, -20.0)).augment(torch.randn(16000), generator_for(0))
        >>> round(20 * math.log10(float(out.pow(2).mean().sqrt())), 1)
        -20.0
    """

    def __init__(self, target_dbfs: Sequence[float] = (-35.0, -15.0), peak_limit: float = 1.0,
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        self.target_dbfs = check_range(name, "target_dbfs", target_dbfs, -100.0, 0.0)
        try:
            self.peak_limit = float(peak_limit)
        except (TypeError, ValueError):
            self.peak_limit = math.nan
        if not 0.0 < self.peak_limit <= 1e3:
            raise HparamsError(f"{name}: peak_limit must be a number in (0, 1000], got {peak_limit!r}")

    def augment(self, wave, generator):
        target = uniform(generator, *self.target_dbfs)
        rms = float(wave.double().pow(2).mean().sqrt()) if wave.numel() else 0.0
        if rms == 0.0:
            return wave
        gain = 10.0 ** (target / 20.0) / rms
        peak = float(wave.abs().max())
        return wave * min(gain, self.peak_limit / peak)
