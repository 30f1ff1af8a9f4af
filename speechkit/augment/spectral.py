"""Augmentations that reshape the spectrum of the waveform: a random equaliser (tilt and peaks), band
limits (telephone band), dropped frequency bands, and a vocal-tract-length warp of the waveform.

Filters act on the whole item's spectrum (one real FFT, zero-phase gains), so they keep the length and
introduce no delay; the item is zero-padded before the FFT so that its end does not wrap onto its start.

Example:
    >>> from speechkit.augment import generator_for
    >>> eq = Equalizer(tilt_db_per_octave=(-3.0, 3.0), peaks=2)
    >>> eq.augment(torch.randn(8000), generator_for(1)).shape
    torch.Size([8000])
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.augment.core import WaveAugmentation, check_range, fast_fft_length, uniform
from speechkit.errors import HparamsError
from speechkit.features.frequency_warp import inverse_warp

_GUARD = 1024  # zero padding (samples) on each side before a whole-item FFT


def filter_by_gain(wave: torch.Tensor, gain: callable) -> torch.Tensor:
    """Apply a zero-phase filter: ``gain(freqs_hz_fraction)`` maps (bins,) frequencies in [0, 0.5] (fractions
    of the sample rate) to (bins,) linear gains."""
    if wave.numel() == 0:
        return wave
    size = fast_fft_length(wave.shape[0] + 2 * _GUARD)
    padded = torch.nn.functional.pad(wave, (_GUARD, size - wave.shape[0] - _GUARD))
    spectrum = torch.fft.rfft(padded)
    freqs = torch.linspace(0.0, 0.5, spectrum.shape[0], device=wave.device, dtype=wave.dtype)
    out = torch.fft.irfft(spectrum * gain(freqs), n=size)
    return out[_GUARD:_GUARD + wave.shape[0]]


class Equalizer(WaveAugmentation):
    """A random spectral tilt (dB per octave around 1 kHz) plus ``peaks`` random peaking bands (centre
    log-uniform between 100 Hz and 0.9 x Nyquist, gain in ``peak_gain_db``, width in octaves), as another
    microphone or room colouring would give."""

    def __init__(self, tilt_db_per_octave: Sequence[float] = (-3.0, 3.0), peaks: int = 3,
                 peak_gain_db: Sequence[float] = (-9.0, 9.0),
                 peak_width_octaves: Sequence[float] = (0.3, 2.0), sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        self.tilt = check_range(name, "tilt_db_per_octave", tilt_db_per_octave, -12.0, 12.0)
        if isinstance(peaks, bool) or not isinstance(peaks, int) or not 0 <= peaks <= 16:
            raise HparamsError(f"{name}: peaks must be an int in [0, 16], got {peaks!r}")
        self.peaks = peaks
        self.peak_gain_db = check_range(name, "peak_gain_db", peak_gain_db, -30.0, 30.0)
        self.peak_width = check_range(name, "peak_width_octaves", peak_width_octaves, 0.05, 6.0)

    def augment(self, wave, generator):
        rate = self.sample_rate
        tilt = uniform(generator, *self.tilt)
        bands = [(math.exp(uniform(generator, math.log(100.0), math.log(0.45 * rate))),
                  uniform(generator, *self.peak_gain_db), uniform(generator, *self.peak_width))
                 for _ in range(self.peaks)]

        def gain(freqs):
            hz = (freqs * rate).clamp(min=20.0)
            octaves = torch.log2(hz / 1000.0)
            db = tilt * octaves
            for centre, peak_db, width in bands:
                distance = torch.log2(hz / centre) / (width / 2)
                db = db + peak_db * torch.exp(-0.5 * distance**2)
            return 10.0 ** (db / 20.0)

        return filter_by_gain(wave, gain)


class BandLimit(WaveAugmentation):
    """Keep only a band: a high-pass corner drawn from ``low_hz`` and a low-pass corner from ``high_hz``
    (smooth edges a sixth of an octave wide). The defaults are the telephone band, 300-3400 Hz."""

    def __init__(self, low_hz: Sequence[float] = (200.0, 400.0), high_hz: Sequence[float] = (3000.0, 3800.0),
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        nyquist = sample_rate / 2
        self.low_hz = check_range(name, "low_hz", low_hz, 0.0, nyquist)
        self.high_hz = check_range(name, "high_hz", high_hz, 0.0, nyquist)
        if self.low_hz[1] >= self.high_hz[0]:
            raise HparamsError(f"{name}: low_hz {low_hz!r} must lie below high_hz {high_hz!r}")

    def augment(self, wave, generator):
        low, high = uniform(generator, *self.low_hz), uniform(generator, *self.high_hz)
        rate = self.sample_rate

        def gain(freqs):
            octaves = torch.log2((freqs * rate).clamp(min=1.0))
            rise = torch.sigmoid((octaves - math.log2(max(low, 1.0))) * 24.0)
            fall = torch.sigmoid((math.log2(high) - octaves) * 24.0)
            return rise * fall if low > 0 else fall

        return filter_by_gain(wave, gain)


class FrequencyDrop(WaveAugmentation):
    """Remove ``bands`` random frequency bands (a count drawn from the range), each ``width_hz`` wide: the
    waveform counterpart of SpecAugment's frequency masks."""

    def __init__(self, bands: Sequence[int] = (1, 3), width_hz: Sequence[float] = (50.0, 400.0),
                 sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        low, high = check_range(name, "bands", bands, 0, 16)
        self.bands = (int(low), int(high))
        self.width_hz = check_range(name, "width_hz", width_hz, 1.0, sample_rate / 4)

    def augment(self, wave, generator):
        count = int(torch.randint(self.bands[0], self.bands[1] + 1, (), generator=generator))
        nyquist = self.sample_rate / 2
        notches = [(uniform(generator, 0.0, nyquist), uniform(generator, *self.width_hz))
                   for _ in range(count)]

        def gain(freqs):
            hz = freqs * self.sample_rate
            keep = torch.ones_like(hz)
            for centre, width in notches:
                keep = keep * (1 - torch.exp(-0.5 * ((hz - centre) / (width / 2)) ** 4))
            return keep

        return filter_by_gain(wave, gain)


class FormantWarp(WaveAugmentation):
    """Vocal tract length perturbation of the waveform: each frame's magnitude spectrum is warped along
    frequency by a factor drawn from ``warp_range`` (> 1: formants up, a shorter tract), with the
    piecewise-linear warp (its knee at ``boundary_hz``, default 0.6 x Nyquist) of
    :class:`speechkit.features.FrequencyWarp`; the phase is kept. The length is
    unchanged."""

    def __init__(self, warp_range: Sequence[float] = (0.9, 1.1), boundary_hz: Optional[float] = None,
                 n_fft: int = 512, sample_rate: int = 16000):
        super().__init__(sample_rate)
        self.warp_range = check_range(type(self).__name__, "warp_range", warp_range, 0.5, 2.0)
        boundary_hz = 0.6 * sample_rate / 2 if boundary_hz is None else boundary_hz  # 4.8 kHz at 16 kHz
        if not 0 < float(boundary_hz) < sample_rate / 2:
            raise HparamsError(f"FormantWarp: boundary_hz must lie in (0, {sample_rate / 2:g}), got "
                               f"{boundary_hz!r}")
        self.boundary_hz, self.n_fft = float(boundary_hz), int(n_fft)

    def augment(self, wave, generator):
        alpha = uniform(generator, *self.warp_range)
        if wave.shape[0] < self.n_fft or alpha == 1.0:
            return wave
        hop = self.n_fft // 4
        window = torch.hann_window(self.n_fft, dtype=wave.dtype, device=wave.device)
        spec = torch.stft(wave, self.n_fft, hop, window=window, return_complex=True)  # (freq, frames)
        nyquist = self.sample_rate / 2
        freqs = torch.linspace(0, nyquist, spec.shape[0], device=wave.device, dtype=wave.dtype)
        source = inverse_warp(freqs, torch.tensor([alpha], dtype=wave.dtype, device=wave.device),
                              self.boundary_hz, nyquist)[0]
        position = (source / nyquist * (spec.shape[0] - 1)).clamp(0, spec.shape[0] - 1)
        index = position.long().clamp(max=spec.shape[0] - 2)
        fraction = (position - index).unsqueeze(1)
        magnitude = spec.abs()
        warped = (1 - fraction) * magnitude[index] + fraction * magnitude[index + 1]
        out = torch.istft(torch.polar(warped, spec.angle()), self.n_fft, hop, window=window,
                          length=wave.shape[0])
        return out
