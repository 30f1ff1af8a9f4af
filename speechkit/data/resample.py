"""Band-limited resampling on torch: a windowed-sinc filter applied in polyphase form.

Rates are reduced by their greatest common divisor to ``orig -> new``. Output sample ``n`` lies at input time
``n * orig / new``; it is the input convolved with a low-pass sinc (cut-off at the lower of the two Nyquist
frequencies, times ``rolloff``) tapered by a Hann or Kaiser window spanning ``lowpass_filter_width`` zero
crossings on each side. The ``new`` output phases each have their own filter, so one strided ``conv1d`` with
``new`` output channels computes every output sample exactly once.

torchaudio's implementation is used only when it is installed and ``backend="torchaudio"`` is asked for.

Example:
    >>> wave = torch.sin(2 * math.pi * 440 * torch.arange(16000) / 16000)
    >>> resample(wave, 16000, 8000).shape
    torch.Size([8000])
"""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F

from speechkit.errors import DataError

#: The resampler every audio loader uses (:class:`speechkit.data.audio_policy.AudioPolicy`,
#: :func:`speechkit.data.audio.resample`): a Kaiser-windowed sinc (beta 14.77) over 32 zero crossings on each
#: side, cut off at 96% of the lower Nyquist frequency. Measured 48/44.1 -> 16 kHz
#: (``python benchmarks/data_prep.py --quality``): tones above 8.8 kHz fold back at -132 dB, tones up to 7 kHz
#: pass within 0.8% of their amplitude, for about 2 ms of one CPU core per second of audio. The default
#: arguments of :func:`resample` (Hann, 6 crossings, as other toolkits' defaults) fold tones just above the
#: new Nyquist frequency back at only -14 dB: an alias in every 44.1 kHz recording with energy at 8-9 kHz.
#: docs/data.md, "The audio policy", says more.
POLICY_FILTER = {"window": "kaiser", "lowpass_filter_width": 32, "rolloff": 0.96, "beta": 14.769656459379492}

#: Largest filter bank built (phases x taps): rates whose gcd is tiny, e.g. 16001 -> 16000 Hz, would need
#: gigabytes.
MAX_KERNEL_ELEMENTS = 1 << 26


def _as_rate(value: float, name: str) -> int:
    if isinstance(value, bool) or float(value) != int(value) or int(value) <= 0:
        raise DataError(f"{name} must be a positive whole number of Hz, got {value!r}")
    return int(value)


def filter_bank_elements(orig_freq: int, new_freq: int, lowpass_filter_width: int = 6,
                         rolloff: float = 0.99) -> int:
    """How many coefficients (phases x taps) the filter bank of ``orig_freq -> new_freq`` holds: what a
    conversion costs in memory before any sample is filtered (a caller facing untrusted rates checks it).

    Example:
        >>> filter_bank_elements(48000, 16000)
        41
        >>> filter_bank_elements(16001, 16000) > 2 ** 27
        True
    """
    divisor = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // divisor, int(new_freq) // divisor
    cutoff = min(orig, new) * rolloff / orig
    return new * (orig + 2 * math.ceil(lowpass_filter_width / cutoff))


def sinc_resample_kernel(orig_freq: int, new_freq: int, *, lowpass_filter_width: int = 6,
                         rolloff: float = 0.99, window: str = "hann", beta: Optional[float] = None,
                         dtype: torch.dtype = torch.float32, device: Optional[torch.device] = None) -> tuple:
    """The polyphase filter bank for ``orig_freq -> new_freq``.

    Returns:
        ``(kernel, padding)``: kernel of shape (new, 1, orig + 2 * padding) for rates reduced by their gcd,
        and the number of input samples of context on each side.
    """
    orig_freq, new_freq = _as_rate(orig_freq, "orig_freq"), _as_rate(new_freq, "new_freq")
    if lowpass_filter_width < 1:
        raise DataError(f"lowpass_filter_width must be >= 1, got {lowpass_filter_width}")
    if not 0.0 < rolloff <= 1.0:
        raise DataError(f"rolloff must be in (0, 1], got {rolloff}")
    divisor = math.gcd(orig_freq, new_freq)
    orig, new = orig_freq // divisor, new_freq // divisor
    # Cut-off as a fraction of the input sample rate's Nyquist frequency.
    cutoff = min(orig, new) * rolloff / orig
    half_width = lowpass_filter_width / cutoff  # in input samples
    padding = math.ceil(half_width)
    if new * (orig + 2 * padding) > MAX_KERNEL_ELEMENTS:
        raise DataError(f"resampling {orig_freq} -> {new_freq} Hz needs a {new} x {orig + 2 * padding} "
                        f"filter bank (the rates share only the factor {divisor}); resample through a "
                        "rate with a larger common factor, or round the rates")

    phases = torch.arange(new, dtype=torch.float64, device=device).unsqueeze(1) * orig / new  # (new, 1)
    taps = torch.arange(-padding, orig + padding, dtype=torch.float64, device=device).unsqueeze(0)
    offsets = phases - taps  # (new, orig + 2 * padding): output time minus input time, in input samples
    relative = (offsets / half_width).clamp(-1.0, 1.0)
    if window == "hann":
        taper = torch.cos(relative * math.pi / 2) ** 2
    elif window == "kaiser":
        beta = 14.769656459379492 if beta is None else float(beta)
        taper = torch.special.i0(beta * torch.sqrt(1 - relative**2)) / torch.special.i0(torch.tensor(beta))
    else:
        raise DataError(f"window must be 'hann' or 'kaiser', got {window!r}")
    taper = torch.where(offsets.abs() <= half_width, taper, torch.zeros_like(taper))
    kernel = cutoff * torch.sinc(cutoff * offsets) * taper
    return kernel.to(dtype).unsqueeze(1), padding


def _apply_kernel(waveform: torch.Tensor, kernel: torch.Tensor, padding: int, orig: int,
                  new: int) -> torch.Tensor:
    """Resample along the last dimension of ``waveform`` (..., time) with a kernel from
    :func:`sinc_resample_kernel`."""
    shape = waveform.shape
    length = shape[-1]
    flat = waveform.reshape(-1, 1, length)
    flat = F.pad(flat, (padding, padding + orig))
    phases = F.conv1d(flat, kernel, stride=orig)  # (batch, new, frames)
    interleaved = phases.transpose(1, 2).reshape(flat.shape[0], -1)
    target = math.ceil(new * length / orig)
    return interleaved[:, :target].reshape(*shape[:-1], target)


def resample(waveform: torch.Tensor, orig_freq: int, new_freq: int, *, dim: int = -1,
             lowpass_filter_width: int = 6, rolloff: float = 0.99, window: str = "hann",
             beta: Optional[float] = None, backend: str = "torch") -> torch.Tensor:
    """Resample ``waveform`` along ``dim`` (time) from ``orig_freq`` to ``new_freq`` Hz.

    Arguments:
        waveform: float tensor of any shape; ``dim`` is time. Other dtypes are converted to float32.
        lowpass_filter_width: zero crossings of the sinc on each side (larger: sharper, slower).
        rolloff: cut-off as a fraction of the lower Nyquist frequency (below 1 to limit aliasing).
        window: ``"hann"`` or ``"kaiser"`` (``beta`` sets its shape).
        backend: ``"torch"`` (this module) or ``"torchaudio"`` (only if installed).

    Returns:
        Tensor with ``ceil(time * new_freq / orig_freq)`` samples along ``dim``.
    """
    orig_freq, new_freq = _as_rate(orig_freq, "orig_freq"), _as_rate(new_freq, "new_freq")
    if not waveform.is_floating_point():
        waveform = waveform.float()
    if orig_freq == new_freq:
        return waveform
    moved = waveform.movedim(dim, -1)
    if moved.shape[-1] == 0:  # nothing to filter (the convolution cannot take an empty signal)
        return moved.new_zeros(moved.shape).movedim(-1, dim)
    if backend == "torchaudio":
        resampled = _torchaudio_resample(moved, orig_freq, new_freq, lowpass_filter_width, rolloff, window,
                                         beta)
    elif backend == "torch":
        divisor = math.gcd(orig_freq, new_freq)
        kernel, padding = sinc_resample_kernel(orig_freq, new_freq, lowpass_filter_width=lowpass_filter_width,
                                               rolloff=rolloff, window=window, beta=beta,
                                               dtype=waveform.dtype, device=waveform.device)
        resampled = _apply_kernel(moved, kernel, padding, orig_freq // divisor, new_freq // divisor)
    else:
        raise DataError(f"resampling backend must be 'torch' or 'torchaudio', got {backend!r}")
    return resampled.movedim(-1, dim)


def _torchaudio_resample(waveform: torch.Tensor, orig_freq: int, new_freq: int, lowpass_filter_width: int,
                         rolloff: float, window: str, beta: Optional[float]) -> torch.Tensor:
    try:
        import torchaudio.functional
    except ImportError:
        raise DataError("backend='torchaudio' was asked for but torchaudio is not installed (pip install "
                        "torchaudio, or use backend='torch')") from None
    method = {"hann": "sinc_interp_hann", "kaiser": "sinc_interp_kaiser"}.get(window)
    if method is None:
        raise DataError(f"window must be 'hann' or 'kaiser', got {window!r}")
    options = {"beta": beta} if beta is not None else {}
    return torchaudio.functional.resample(waveform, orig_freq, new_freq,
                                          lowpass_filter_width=lowpass_filter_width, rolloff=rolloff,
                                          resampling_method=method, **options)


class Resample(torch.nn.Module):
    """Resampling as a module: the filter bank is built once and moves with ``.to(device)``.

    Input (..., time) -> output (..., ceil(time * new_freq / orig_freq)).

    Example:
        >>> to_16k = Resample(44100, 16000)
        >>> to_16k(torch.zeros(2, 44100)).shape
        torch.Size([2, 16000])
    """

    def __init__(self, orig_freq: int, new_freq: int, *, lowpass_filter_width: int = 6, rolloff: float = 0.99,
                 window: str = "hann", beta: Optional[float] = None):
        super().__init__()
        self.orig_freq, self.new_freq = _as_rate(orig_freq, "orig_freq"), _as_rate(new_freq, "new_freq")
        divisor = math.gcd(self.orig_freq, self.new_freq)
        self._orig, self._new = self.orig_freq // divisor, self.new_freq // divisor
        kernel, self.padding = sinc_resample_kernel(self.orig_freq, self.new_freq,
                                                    lowpass_filter_width=lowpass_filter_width,
                                                    rolloff=rolloff, window=window, beta=beta)
        self.register_buffer("kernel", kernel, persistent=False)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        if self.orig_freq == self.new_freq:
            return waveform
        if not waveform.is_floating_point():
            waveform = waveform.float()
        if waveform.shape[-1] == 0:  # nothing to filter (the convolution cannot take an empty signal)
            return waveform.new_zeros(waveform.shape)
        return _apply_kernel(waveform, self.kernel.to(waveform.dtype), self.padding, self._orig, self._new)

    def extra_repr(self) -> str:
        return f"orig_freq={self.orig_freq}, new_freq={self.new_freq}"


class StreamingResample:
    """Resampling of a signal that arrives in pieces: the samples :func:`resample` gives for the whole signal
    (with the same filter arguments), emitted as soon as the input they depend on has arrived.

    Output sample ``n = j * new + p`` (rates reduced by their gcd to ``orig -> new``) reads the input from
    ``j * orig - padding`` to ``j * orig + orig + padding``: each call filters the whole frames ``j`` now
    covered and keeps only the input the next frames read. :meth:`finish` pads the end with zeros (as the
    whole-signal filter does) and trims the output to ``ceil(time * new_freq / orig_freq)`` samples in all.
    The output lags the input by at most ``orig + padding`` input samples (12 ms of 44.1 kHz audio with the
    policy's filter).

    Arguments:
        orig_freq, new_freq: the rates in Hz.
        **filter_options: as :func:`resample` (``lowpass_filter_width``, ``rolloff``, ``window``, ``beta``);
            :data:`POLICY_FILTER` gives the audio policy's filter.

    ``accept(samples (time,)) -> (new samples,)``; ``finish() -> (last samples,)``.

    Example:
        >>> wave = torch.randn(44100)
        >>> stream = StreamingResample(44100, 16000, **POLICY_FILTER)
        >>> pieces = [stream.accept(piece) for piece in wave.split(1000)] + [stream.finish()]
        >>> torch.allclose(torch.cat(pieces), resample(wave, 44100, 16000, **POLICY_FILTER), atol=1e-5)
        True
    """

    def __init__(self, orig_freq: int, new_freq: int, **filter_options):
        kernel, padding = sinc_resample_kernel(orig_freq, new_freq, **filter_options)
        self._start(orig_freq, new_freq, kernel, padding)

    @classmethod
    def like(cls, module: Resample) -> StreamingResample:
        """A stream with the filter bank of a :class:`Resample` module (built once, shared by streams)."""
        stream = cls.__new__(cls)
        stream._start(module.orig_freq, module.new_freq, module.kernel.to(torch.float32), module.padding)
        return stream

    def _start(self, orig_freq: int, new_freq: int, kernel: torch.Tensor, padding: int) -> None:
        self.orig_freq, self.new_freq = _as_rate(orig_freq, "orig_freq"), _as_rate(new_freq, "new_freq")
        divisor = math.gcd(self.orig_freq, self.new_freq)
        self._orig, self._new = self.orig_freq // divisor, self.new_freq // divisor
        self.kernel, self.padding = kernel, padding
        self._width = self._orig + 2 * self.padding
        # The zero-padded input from the first sample of the next frame on (the start's padding first).
        self._buffer = torch.zeros(self.padding)
        self.received = 0  # input samples
        self.emitted = 0  # output samples
        self.finished = False

    def accept(self, samples: torch.Tensor) -> torch.Tensor:
        """Take the next ``(time,)`` input samples; returns the output samples they complete (float32)."""
        if self.finished:
            raise DataError("this resampling stream has finished; start a new StreamingResample")
        samples = torch.as_tensor(samples)
        if samples.dim() != 1:
            raise DataError(f"StreamingResample takes (time,) samples, got shape {tuple(samples.shape)}")
        samples = samples.to(torch.float32)
        self.received += samples.numel()
        if self.orig_freq == self.new_freq:
            self.emitted += samples.numel()
            return samples
        self._buffer = torch.cat([self._buffer, samples])
        return self._filter()

    def finish(self) -> torch.Tensor:
        """The output samples whose filters reach past the end of the input (zeros there)."""
        if self.finished:
            raise DataError("this resampling stream has finished already")
        self.finished = True
        if self.orig_freq == self.new_freq:
            return torch.zeros(0)
        before = self.emitted
        self._buffer = torch.cat([self._buffer, torch.zeros(self.padding + self._orig)])
        out = self._filter()[:max(0, math.ceil(self._new * self.received / self._orig) - before)]
        self.emitted = before + out.numel()
        self._buffer = torch.zeros(0)
        return out

    def _filter(self) -> torch.Tensor:
        frames = (self._buffer.numel() - self._width) // self._orig + 1
        if frames <= 0:
            return torch.zeros(0)
        used = self._buffer[:(frames - 1) * self._orig + self._width]
        phases = F.conv1d(used.view(1, 1, -1), self.kernel, stride=self._orig)  # (1, new, frames)
        self._buffer = self._buffer[frames * self._orig:]
        out = phases[0].transpose(0, 1).reshape(-1)
        self.emitted += out.numel()
        return out
