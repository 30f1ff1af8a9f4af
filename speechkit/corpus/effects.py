"""Signal effects the corpus generator applies after synthesis, in numpy (no torch: workers start fast).

Every function is deterministic: randomness comes only from the ``numpy.random.Generator`` passed in, so the
same plan always writes the same bytes.

Example:
    >>> import numpy as np
    >>> wave = np.sin(np.arange(16000) / 10.0).astype(np.float32)
    >>> resample(wave, 16000, 8000).shape
    (8000,)
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from speechkit.data.trim import speech_bounds


def resample(wave: np.ndarray, orig_freq: float, new_freq: float, exact: bool = True,
             guard: int = 512) -> np.ndarray:
    """Band-limited resampling of a 1-D signal by any ratio, in the frequency domain.

    The spectrum is cut (or zero-extended) at the lower Nyquist frequency, an ideal low-pass filter. The
    signal is zero-padded by ``guard`` samples on each side first, so the circular wrap of the FFT does not
    fold the end of the signal onto its start.

    Args:
        wave: (time,) float signal.
        orig_freq, new_freq: sample rates; only their ratio matters.
        exact: False lets the ratio move by up to about 0.1% so that both FFT sizes have only small prime
            factors (several times faster; the corpus' random warps do not need the exact ratio).

    Returns:
        (round(time * ratio),) float32 signal, ``ratio`` being new_freq / orig_freq (or the realized one).
    """
    wave = np.asarray(wave, dtype=np.float64)
    ratio = new_freq / orig_freq
    if ratio == 1.0 or len(wave) == 0:
        return wave.astype(np.float32)
    padded = np.concatenate([np.zeros(guard), wave, np.zeros(guard)])
    work_in = len(padded)
    work_out = int(round(work_in * ratio))
    if not exact:
        work_in = _next_smooth(work_in)
        work_out = _next_smooth(int(round(work_in * ratio)))
        ratio = work_out / work_in
    out_len = int(round(len(wave) * ratio))
    spectrum = np.fft.rfft(padded, n=work_in)
    bins = min(len(spectrum), work_out // 2 + 1)
    resized = np.zeros(work_out // 2 + 1, dtype=np.complex128)
    resized[:bins] = spectrum[:bins]
    result = np.fft.irfft(resized, n=work_out) * (work_out / work_in)
    offset = int(round(guard * ratio))
    return result[offset:offset + out_len].astype(np.float32)


def _next_smooth(n: int) -> int:
    """Smallest number >= n with no prime factor above 11."""
    while not _is_smooth(n):
        n += 1
    return n


def _is_smooth(n: int) -> bool:
    """True when n has no prime factor above 11 (the sizes FFTs handle fastest)."""
    for p in (2, 3, 5, 7, 11):
        while n % p == 0:
            n //= p
    return n == 1


def trim_silence(wave: np.ndarray, threshold_db: float = -45.0, frame: int = 160) -> np.ndarray:
    """Cut leading and trailing frames quieter than ``threshold_db`` below the loudest frame."""
    first, last = speech_bounds(wave, threshold_db, frame)
    return wave[first:last]


def rms_dbfs(wave: np.ndarray) -> float:
    """Root-mean-square level in dB relative to full scale (a full-scale sine is about -3 dBFS)."""
    return float(10.0 * np.log10(np.mean(np.asarray(wave, dtype=np.float64) ** 2) + 1e-12))


def set_loudness(wave: np.ndarray, target_dbfs: float, peak_limit: float = 0.98) -> np.ndarray:
    """Scale to ``target_dbfs`` RMS, then lower the gain further if a peak would pass ``peak_limit``."""
    gain = 10.0 ** ((target_dbfs - rms_dbfs(wave)) / 20.0)
    peak = float(np.max(np.abs(wave))) * gain
    if peak > peak_limit:
        gain *= peak_limit / peak
    return (wave * gain).astype(np.float32)


def colored_noise(length: int, color: str, rng: np.random.Generator) -> np.ndarray:
    """Unit-RMS noise: ``white`` (flat), ``pink`` (1/f power) or ``brown`` (1/f^2 power)."""
    white = rng.standard_normal(length)
    if color == "white":
        noise = white
    else:
        exponent = {"pink": 0.5, "brown": 1.0}[color]
        spectrum = np.fft.rfft(white)
        freqs = np.arange(len(spectrum), dtype=np.float64)
        freqs[0] = 1.0
        noise = np.fft.irfft(spectrum / freqs ** exponent, n=length)
    noise = noise / (np.sqrt(np.mean(noise ** 2)) + 1e-12)
    return noise.astype(np.float32)


def add_noise(wave: np.ndarray, snr_db: float, color: str, rng: np.random.Generator,
              reference: Optional[np.ndarray] = None) -> np.ndarray:
    """Add noise at ``snr_db`` relative to the RMS power of ``reference`` (default: ``wave`` itself).

    Pass the speech alone as ``reference`` when ``wave`` already holds padding, so that silence does not
    lower the level the SNR is measured against.
    """
    reference = wave if reference is None else reference
    signal_rms = np.sqrt(np.mean(np.asarray(reference, dtype=np.float64) ** 2))
    noise = colored_noise(len(wave), color, rng) * signal_rms * 10.0 ** (-snr_db / 20.0)
    return (wave + noise).astype(np.float32)


def pad_with_floor(wave: np.ndarray, before: int, after: int, floor_dbfs: float,
                   rng: np.random.Generator) -> np.ndarray:
    """Pad with ``before``/``after`` samples of very quiet noise (real recordings are never digital zero)."""
    floor = 10.0 ** (floor_dbfs / 20.0)
    total = np.concatenate([np.zeros(before, np.float32), wave.astype(np.float32),
                            np.zeros(after, np.float32)])
    return (total + floor * rng.standard_normal(len(total))).astype(np.float32)


def to_int16(wave: np.ndarray) -> np.ndarray:
    """Round to 16-bit PCM (what the FLAC files hold), clipping at full scale."""
    return np.clip(np.round(np.asarray(wave, dtype=np.float64) * 32767.0), -32768, 32767).astype(np.int16)
