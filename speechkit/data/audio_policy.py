"""One audio policy for training and inference: the rate and channels a model reads, and how files get there.

Every loader reads audio through an :class:`AudioPolicy`: the training, validation and test datasets of the
templates, ``Pretrained.load_audio`` (so ``speechkit transcribe``, ``evaluate``, ``infer``) and
``speechkit serve``. The same code converts a file whatever its rate, channels or format, so a model hears in
training exactly what it hears in use. A file at another rate is resampled with one filter
(:data:`speechkit.data.resample.POLICY_FILTER`); several channels are averaged, or one is picked. With
``convert=False`` such a file is refused instead, naming its path, rate and channel count (for data that
``speechkit data convert`` wrote once, where a mismatch means a mistake). docs/data.md, "The audio policy".

Example:
    >>> from speechkit.data.audio import write
    >>> policy = AudioPolicy(16000)                       # mono at 16 kHz, channels averaged
    >>> write("stereo_44k.wav", torch.zeros(44100, 2), 44100)
    >>> policy.read("stereo_44k.wav").shape
    torch.Size([16000])
    >>> AudioPolicy(16000, channels=1).read("stereo_44k.wav").shape  # the second channel alone
    torch.Size([16000])
"""
from __future__ import annotations

import collections
import functools
import os
from collections.abc import Mapping
from typing import Union

import numpy as np
import torch

from speechkit.data import audio
from speechkit.data.audio import Source
from speechkit.errors import AudioError, DataError

#: Where the policy is explained (error messages point there).
DOCS = "docs/data.md, 'The audio policy'"
#: Filter banks one policy keeps (one per source rate, the most recently used): at most a few MB each.
MAX_KEPT_RESAMPLERS = 16


class AudioPolicy:
    """The rate and channels a model reads, and how any audio file is converted to them.

    Arguments:
        sample_rate: the model's rate in Hz (a recipe's ``sample_rate``).
        channels: ``"mix"`` averages every channel (a mono file is read as it is); an int picks that channel
            (0 is the first; a file with fewer channels is refused).
        convert: ``True`` converts files at another rate or with several channels on the fly; ``False``
            refuses them with an :class:`AudioError` naming the file, its rate and its channel count.

    Calling the policy (or :meth:`read`) gives a float32 tensor ``(time,)`` at ``sample_rate``, so it is a
    dynamic item as it is: ``dataset.add_dynamic_item(policy, takes=["wav"], provides=["sig"])``.
    """

    def __init__(self, sample_rate: int, channels: Union[str, int] = "mix", convert: bool = True):
        whole = isinstance(sample_rate, (int, np.integer)) and not isinstance(sample_rate, bool)
        if not whole or sample_rate <= 0:
            raise DataError(f"AudioPolicy: sample_rate must be a positive whole number of Hz, got "
                            f"{sample_rate!r}")
        if channels != "mix" and (isinstance(channels, bool) or not isinstance(channels, (int, np.integer))
                                  or channels < 0):
            raise DataError(f"AudioPolicy: channels must be 'mix' or a channel index >= 0, got {channels!r}")
        if not isinstance(convert, bool):
            raise DataError(f"AudioPolicy: convert must be true or false, got {convert!r}")
        self.sample_rate = int(sample_rate)
        self.channels = channels if channels == "mix" else int(channels)
        self.convert = convert
        # source rate -> Resample module (its filter bank built once), the most recently used kept: a server
        # meeting clients at ever new rates must not keep a bank for each.
        self._resamplers: collections.OrderedDict = collections.OrderedDict()

    # ------------------------------------------------------------------------------------------ reading
    def read(self, source: Source) -> torch.Tensor:
        """Read a file (or a manifest segment ``{"file", "start", "stop", "unit"}``, in the file's own
        samples or in seconds) and convert it: float32 ``(time,)`` at :attr:`sample_rate`.

        Raises:
            AudioError: unreadable file, a channel the file lacks, or (``convert=False``) a file whose rate or
                channels differ; the message names the file, its rate and its channel count.
        """
        array, rate = audio.read_array(source)
        name = source.get("file") if isinstance(source, Mapping) else os.fspath(source)
        return self.apply(array, rate, name)

    __call__ = read

    def apply(self, waveform: Union[torch.Tensor, np.ndarray], rate: int,
              name: str = "audio") -> torch.Tensor:
        """Convert decoded samples ``(time,)`` or ``(time, channels)`` at ``rate`` Hz by the policy.

        ``name`` is what messages call the audio (a path, an upload's name). Returns float32 ``(time,)`` at
        :attr:`sample_rate`.
        """
        waveform = torch.as_tensor(waveform)
        if waveform.dim() not in (1, 2):
            raise AudioError(f"{name}: audio must be (time,) or (time, channels), got shape "
                             f"{tuple(waveform.shape)}")
        count = 1 if waveform.dim() == 1 else waveform.shape[1]
        self.check(name, int(rate), count)
        waveform = self._pick_channels(waveform)
        if rate != self.sample_rate:
            waveform = self._resampler(int(rate))(waveform.to(torch.float32))
        return waveform.to(torch.float32).contiguous()

    def check(self, name: str, rate: int, channels: int) -> None:
        """Raise :class:`AudioError` if a file of ``rate`` Hz and ``channels`` channels cannot be read by the
        policy (a channel it lacks; any difference with ``convert=False``)."""
        if rate <= 0 or channels <= 0:
            raise AudioError(f"{name}: {rate} Hz, {channels} channel(s) is not audio")
        if self.channels != "mix" and self.channels >= channels:
            raise AudioError(f"{name}: {rate} Hz, {channels} channel(s): the audio policy reads channel "
                             f"{self.channels}, which this file lacks ({DOCS})")
        if not self.convert and self.needs_conversion(rate, channels):
            raise AudioError(f"{name}: {rate} Hz, {channels} channel(s), but the model reads "
                             f"{self.describe()} and the audio policy does not convert (convert: false); "
                             f"convert the data once with `speechkit data convert` ({DOCS})")

    def stream_resampler(self, rate: int):
        """A :class:`~speechkit.data.resample.StreamingResample` from ``rate`` Hz to the policy's rate, with
        the policy's filter: audio converted chunk by chunk as the whole recording would be (within float
        rounding). The filter bank is the policy's own for that rate, built once for every stream."""
        from speechkit.data.resample import StreamingResample

        return StreamingResample.like(self._resampler(int(rate)))

    def needs_conversion(self, rate: int, channels: int) -> bool:
        """Whether a file of ``rate`` Hz and ``channels`` channels is resampled or mixed/picked when read."""
        return rate != self.sample_rate or channels != 1

    def describe(self) -> str:
        """E.g. ``"16000 Hz mono (channels averaged)"``."""
        how = "channels averaged" if self.channels == "mix" else f"channel {self.channels}"
        return f"{self.sample_rate} Hz mono ({how})"

    def __repr__(self) -> str:
        return (f"AudioPolicy(sample_rate={self.sample_rate}, channels={self.channels!r}, "
                f"convert={self.convert})")

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, AudioPolicy) and (self.sample_rate, self.channels, self.convert)
                == (other.sample_rate, other.channels, other.convert))

    def __hash__(self) -> int:
        return hash((self.sample_rate, self.channels, self.convert))

    def __getstate__(self) -> dict:  # loader workers rebuild the filter banks they need
        return {**self.__dict__, "_resamplers": collections.OrderedDict()}

    # --------------------------------------------------------------------------------------- internals
    def _pick_channels(self, waveform: torch.Tensor) -> torch.Tensor:
        if waveform.dim() == 1:
            return waveform
        if self.channels == "mix":
            return waveform[:, 0] if waveform.shape[1] == 1 else waveform.to(torch.float32).mean(dim=1)
        return waveform[:, self.channels]

    def _resampler(self, rate: int) -> torch.nn.Module:
        if rate in self._resamplers:
            self._resamplers.move_to_end(rate)
        else:
            from speechkit.data.resample import POLICY_FILTER, Resample

            self._resamplers[rate] = Resample(rate, self.sample_rate, **POLICY_FILTER)
            if len(self._resamplers) > MAX_KEPT_RESAMPLERS:
                self._resamplers.popitem(last=False)
        return self._resamplers[rate]


@functools.lru_cache(maxsize=64)
def shared_policy(sample_rate: int, channels: Union[str, int] = "mix") -> AudioPolicy:
    """One converting :class:`AudioPolicy` per (rate, channels), kept for the process: its filter banks are
    built once for every caller (the interfaces, the server)."""
    return AudioPolicy(sample_rate, channels)


def read_as(source: Source, sample_rate: int, channels: Union[str, int] = "mix") -> torch.Tensor:
    """``AudioPolicy(sample_rate, channels).read(source)``: one file as a model at ``sample_rate`` hears it.

    Example:
        >>> read_as("data/utt1.wav", 8000).shape   # 1.5 s recorded at 16 kHz
        torch.Size([12000])
    """
    return shared_policy(sample_rate, channels).read(source)
