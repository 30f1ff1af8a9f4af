"""Speed, pitch and codec: augmentations that resample or requantise the waveform.

- :class:`SpeedPerturb`: faster or slower, pitch and tempo together (the length changes);
- :class:`PitchShift`: pitch up or down by semitones, tempo kept (a phase-vocoder time stretch, then a
  resampling);
- :class:`MuLaw`: mu-law companding to a few bits, as telephone codecs do;
- :class:`TimeStretch`: faster or slower, pitch kept (the length changes);
- :class:`Resample`: down to a lower rate and back, as audio recorded at 8 kHz and upsampled sounds.

Example:
    >>> from speechkit.augment import generator_for
    >>> shift = PitchShift(semitones=(-2.0, 2.0))
    >>> shift.augment(torch.randn(16000), generator_for(3)).shape
    torch.Size([16000])
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from speechkit.augment.core import WaveAugmentation, check_range, uniform
from speechkit.errors import HparamsError
from speechkit.features.speed_perturb import speed_perturb


def _resample_by(wave: torch.Tensor, factor: float, sample_rate: int) -> torch.Tensor:
    """Play ``wave`` ``factor`` times faster (shorter by ``factor``), the factor rounded to a multiple of
    1/160 so that the rates share a large divisor and the resampler's filter bank stays small."""
    factor = max(1, round(factor * 160)) / 160
    length = torch.tensor([wave.shape[0]])
    out, out_length = speed_perturb(wave.unsqueeze(0), length, factor, sample_rate)
    return out[0, : int(out_length[0])]


def time_stretch(wave: torch.Tensor, rate: float, n_fft: int = 512, hop: int = 128) -> torch.Tensor:
    """Phase-vocoder time stretch: ``rate`` > 1 shorter, < 1 longer, pitch kept.

    Args:
        wave: (time,) float samples.

    Returns:
        (round(time / rate),) samples.
    """
    length = int(round(wave.shape[0] / rate))
    if rate == 1.0 or wave.shape[0] < n_fft:
        return wave if rate == 1.0 else _fit(wave, length)
    window = torch.hann_window(n_fft, dtype=wave.dtype, device=wave.device)
    spec = torch.stft(wave, n_fft, hop, window=window, return_complex=True)  # (freq, frames)
    frames = spec.shape[1]
    # Positions in float64, and only those with a right neighbour: in float32, arange(0, 322, 1.4) ends on
    # 322.0 itself, whose right neighbour is past the last frame.
    positions = torch.arange(0.0, frames - 1, rate, device=wave.device, dtype=torch.float64)
    positions = positions[positions < frames - 1]
    index = positions.long()
    fraction = (positions - index).to(wave.dtype).unsqueeze(0)
    left, right = spec[:, index], spec[:, index + 1]
    magnitude = (1 - fraction) * left.abs() + fraction * right.abs()
    expected = torch.linspace(0, math.pi * hop, spec.shape[0], device=wave.device, dtype=wave.dtype)
    delta = right.angle() - left.angle() - expected.unsqueeze(1)
    delta = delta - 2 * math.pi * torch.round(delta / (2 * math.pi))
    phase = torch.cumsum(delta + expected.unsqueeze(1), dim=1)
    phase = torch.cat([spec[:, :1].angle(), phase[:, :-1] + spec[:, :1].angle()], dim=1)
    stretched = torch.polar(magnitude, phase)
    # istft gives (frames - 1) x hop samples, up to a hop short of ``length``: fitted here, the shortfall
    # zero-filled as istft itself would, without its warning on every call.
    return _fit(torch.istft(stretched, n_fft, hop, window=window), length)


def _fit(wave: torch.Tensor, length: int) -> torch.Tensor:
    """Cut or zero-extend to ``length`` samples."""
    if wave.shape[0] >= length:
        return wave[:length]
    return torch.cat([wave, wave.new_zeros(length - wave.shape[0])])


class SpeedPerturb(WaveAugmentation):
    """Change speed (pitch and tempo together) by a factor drawn from ``speeds`` (a list to pick from) or
    uniformly from ``speed_range``; the item's length becomes about ``length / speed``.

    Example:
        >>> from speechkit.augment import generator_for
        >>> SpeedPerturb(speeds=[1.1]).augment(torch.randn(1600), generator_for(0)).shape
        torch.Size([1455])
    """

    def __init__(self, speeds: Sequence[float] = (0.9, 1.0, 1.1), speed_range: Sequence[float] = None,
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        if speed_range is not None:
            self.speed_range, self.speeds = check_range(name, "speed_range", speed_range, 0.5, 2.0), None
        else:
            if not speeds or any(not 0.5 <= float(s) <= 2.0 for s in speeds):
                raise HparamsError(f"{name}: speeds must be a non-empty list of factors in [0.5, 2], got "
                                   f"{speeds!r}")
            self.speeds, self.speed_range = tuple(float(s) for s in speeds), None

    def augment(self, wave, generator):
        if self.speeds is not None:
            speed = self.speeds[int(torch.randint(len(self.speeds), (), generator=generator))]
        else:
            speed = uniform(generator, *self.speed_range)
        return _resample_by(wave, speed, self.sample_rate)


class PitchShift(WaveAugmentation):
    """Shift the pitch by a number of semitones drawn from ``semitones``, keeping the tempo and length."""

    def __init__(self, semitones: Sequence[float] = (-3.0, 3.0), sample_rate: int = 16000):
        super().__init__(sample_rate)
        self.semitones = check_range(type(self).__name__, "semitones", semitones, -12.0, 12.0)

    def augment(self, wave, generator):
        factor = 2.0 ** (uniform(generator, *self.semitones) / 12.0)
        stretched = time_stretch(wave, 1.0 / factor)  # longer by the factor, same pitch
        return _fit(_resample_by(stretched, factor, self.sample_rate), wave.shape[0])


class MuLaw(WaveAugmentation):
    """Mu-law companding to ``bits`` bits and back (telephone codecs use 8), after scaling the item to a peak
    of 1 (its level is restored after)."""

    def __init__(self, bits: int = 8, sample_rate: int = 16000):
        super().__init__(sample_rate)
        if isinstance(bits, bool) or not isinstance(bits, int) or not 2 <= bits <= 16:
            raise HparamsError(f"MuLaw: bits must be an int in [2, 16], got {bits!r}")
        self.bits = bits

    def augment(self, wave, generator):
        peak = float(wave.abs().max()) if wave.numel() else 0.0
        if peak == 0.0:
            return wave
        mu = 2**self.bits - 1
        x = wave / peak
        encoded = torch.sign(x) * torch.log1p(mu * x.abs()) / math.log1p(mu)
        quantized = torch.round((encoded + 1) / 2 * mu) / mu * 2 - 1
        return torch.sign(quantized) * ((1 + mu) ** quantized.abs() - 1) / mu * peak


class TimeStretch(WaveAugmentation):
    """Play faster or slower by a rate drawn from ``rate_range`` (> 1 faster), keeping the pitch (the phase
    vocoder of :func:`time_stretch`); the item's length becomes ``round(length / rate)``.

    Example:
        >>> from speechkit.augment import generator_for
        >>> TimeStretch(rate_range=(1.25, 1.25)).augment(torch.randn(1600), generator_for(0)).shape
        torch.Size([1280])
    """

    def __init__(self, rate_range: Sequence[float] = (0.8, 1.25), sample_rate: int = 16000):
        super().__init__(sample_rate)
        self.rate_range = check_range(type(self).__name__, "rate_range", rate_range, 0.25, 4.0)

    def augment(self, wave, generator):
        return time_stretch(wave, uniform(generator, *self.rate_range))


class Resample(WaveAugmentation):
    """Resample to a rate drawn from ``rates`` (Hz) and back to ``sample_rate``: what lies above half the
    lower rate is gone, as in audio recorded at that rate and upsampled. The length is kept."""

    def __init__(self, rates: Sequence[int] = (8000, 12000), sample_rate: int = 16000):
        super().__init__(sample_rate)
        if isinstance(rates, (str, int)) or not rates or any(
                isinstance(r, bool) or not isinstance(r, int) or not 1000 <= r < sample_rate for r in rates):
            raise HparamsError(f"Resample: rates must be a non-empty list of ints in [1000, {sample_rate}), "
                               f"got {rates!r}")
        self.rates = tuple(rates)

    def augment(self, wave, generator):
        from speechkit.data.resample import resample

        rate = self.rates[int(torch.randint(len(self.rates), (), generator=generator))]
        if wave.numel() == 0:
            return wave
        low = resample(wave, self.sample_rate, rate)
        return _fit(resample(low, rate, self.sample_rate), wave.shape[0])
