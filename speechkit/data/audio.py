"""Audio files: read (whole or a segment), inspect without decoding, write, resample.

Reading goes through soundfile (libsndfile): WAV, FLAC, OGG (Vorbis, Opus) and MP3 among others (MP3 needs
libsndfile >= 1.1, which the soundfile >= 0.12.1 wheels bundle; no other decoder is needed). Waveforms are
float32 tensors of shape ``(time,)`` for one channel or ``(time, channels)`` for several (the layout
soundfile uses).

Example:
    >>> write("tone.flac", torch.zeros(16000), 16000)
    >>> info("tone.flac").duration
    1.0
    >>> read("tone.flac", start=0.25, stop=0.5, unit="seconds").shape
    torch.Size([4000])
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import soundfile
import torch

from speechkit.errors import AudioError

Channels = Union[int, Sequence[int], None]
#: A path, or a manifest-style segment ``{"file": path, "start": ..., "stop": ..., "unit": ...}``.
Source = Union[str, os.PathLike, Mapping]


class AudioInfo(NamedTuple):
    """What the file header says, read without decoding the samples."""

    frames: int
    sample_rate: int
    channels: int
    duration: float  # seconds
    format: str  # e.g. "FLAC", "WAV"
    subtype: str  # e.g. "PCM_16"


def info(path: Union[str, os.PathLike]) -> AudioInfo:
    """Frames, sample rate, channels and duration of an audio file, from its header.

    Raises:
        AudioError: the file is missing or not a readable audio file (the message names the path).
    """
    path = os.fspath(path)
    try:
        with soundfile.SoundFile(path) as handle:
            frames, rate = int(handle.frames), int(handle.samplerate)
            return AudioInfo(frames, rate, int(handle.channels), frames / rate, handle.format, handle.subtype)
    except Exception as error:  # libsndfile reports every failure as its own error types
        raise _audio_error(path, error) from None


def read_array(path: Source, start: Optional[float] = None, stop: Optional[float] = None, *,
               unit: str = "samples", channels: Channels = None) -> tuple:
    """Decode to a numpy float32 array (time,) or (time, channels) and return ``(array, sample_rate)``.

    The fast path under :func:`read`: one open, a seek and one read; no torch involved. Arguments as in
    :func:`read`.
    """
    if isinstance(path, Mapping):
        if "file" not in path:
            raise AudioError(f"an audio segment needs a 'file' key, got {dict(path)!r}")
        start, stop = path.get("start", start), path.get("stop", stop)
        unit = path.get("unit", unit)
        path = path["file"]
    path = os.fspath(path)
    if unit not in ("samples", "seconds"):
        raise AudioError(f"{path}: unit must be 'samples' or 'seconds', got {unit!r}")
    try:
        handle = soundfile.SoundFile(path)
    except Exception as error:
        raise _audio_error(path, error) from None
    with handle:
        rate, frames = int(handle.samplerate), int(handle.frames)
        first, last = _segment_bounds(path, start, stop, unit, rate, frames)
        try:
            if first:
                handle.seek(first)
            if handle.subtype == "PCM_16":
                # libsndfile's own int->float conversion is several times slower than reading the integers
                # and scaling them here; dividing by 2**15 is exact and gives the same values.
                array = handle.read(last - first, dtype="int16", always_2d=True).astype(np.float32)
                array *= np.float32(1.0 / 32768.0)
            else:
                array = handle.read(last - first, dtype="float32", always_2d=True)
                _check_finite(path, array, first)
        except AudioError:
            raise
        except Exception as error:
            raise _audio_error(path, error) from None
    return _select_channels(path, array, channels), rate


def _check_finite(path: str, array: np.ndarray, offset: int) -> None:
    # Only float files can hold NaN or inf (integer PCM cannot); one pass over the samples, far cheaper than
    # decoding. A NaN would otherwise turn a transcript, a mixture or a loss into garbage without a word.
    if not np.isfinite(array).all():
        bad = np.flatnonzero(~np.isfinite(array).all(axis=1))
        raise AudioError(f"{path}: {bad.size} sample(s) are NaN or infinite (the first at sample "
                         f"{offset + int(bad[0])}); the recording is damaged and is not used")


def read(path: Source, start: Optional[float] = None, stop: Optional[float] = None, *,
         unit: str = "samples", channels: Channels = None, sample_rate: Optional[int] = None,
         resample_to_rate: bool = False) -> torch.Tensor:
    """Read an audio file (or a segment of it) as a float32 tensor.

    Arguments:
        path: a WAV, FLAC, OGG, ... file, or a manifest-style dict ``{"file": path, "start": 0.5,
            "stop": 1.5, "unit": "seconds"}`` (its keys override the arguments).
        start, stop: the segment to read, in ``unit`` (``"samples"`` or ``"seconds"``); ``None`` means the
            file's start or end. A ``stop`` past the end is cut to the end.
        channels: ``None`` for every channel, an int for one channel (gives shape ``(time,)``), or a list
            (gives ``(time, len(channels))``).
        sample_rate: the rate the caller expects. A file at another rate raises :class:`AudioError`, unless
            ``resample_to_rate`` is true, in which case it is resampled (:func:`resample`).

    Returns:
        Tensor (time,) when one channel remains, else (time, channels).

    Raises:
        AudioError: missing or undecodable file, a segment outside the file, NaN or infinite samples (a
            damaged float file), or the wrong sample rate.
    """
    array, rate = read_array(path, start, stop, unit=unit, channels=channels)
    waveform = torch.from_numpy(array)
    if sample_rate is not None and rate != sample_rate:
        if not resample_to_rate:
            name = path["file"] if isinstance(path, Mapping) else os.fspath(path)
            raise AudioError(f"{name}: sample rate is {rate} Hz, expected {sample_rate} Hz "
                             "(resample the data, or pass resample_to_rate=True)")
        waveform = resample(waveform, rate, sample_rate)
    return waveform


def read_with_rate(path: Source, start: Optional[float] = None, stop: Optional[float] = None,
                   **options: Any) -> tuple:
    """Like :func:`read` but returns ``(waveform, sample_rate)``."""
    array, rate = read_array(path, start, stop, **options)
    return torch.from_numpy(array), rate


def write(path: Union[str, os.PathLike], waveform: Union[torch.Tensor, np.ndarray], sample_rate: int, *,
          subtype: Optional[str] = None, format: Optional[str] = None) -> None:
    """Write a waveform (time,) or (time, channels) to ``path``; the format follows the extension.

    ``subtype`` picks the encoding (default: PCM_16 for WAV and FLAC, Vorbis for OGG). Parent folders are
    made.
    """
    path = os.fspath(path)
    if isinstance(waveform, torch.Tensor):
        waveform = waveform.detach().cpu().float().numpy()
    array = np.asarray(waveform)
    if array.ndim not in (1, 2):
        raise AudioError(f"{path}: can only write (time,) or (time, channels) audio, got shape {array.shape}")
    if array.ndim == 2 and array.shape[1] > array.shape[0]:
        raise AudioError(f"{path}: shape {array.shape} has more channels than samples; audio is "
                         "(time, channels), transpose it")
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    try:
        soundfile.write(path, array, int(sample_rate), subtype=subtype, format=format)
    except Exception as error:
        raise AudioError(f"cannot write audio file {path}: {error}") from None


def resample(waveform: torch.Tensor, orig_freq: int, new_freq: int, **options: Any) -> torch.Tensor:
    """Resample audio laid out as :func:`read` returns it: (time,) or (time, channels).

    Windowed-sinc polyphase resampling on torch (:mod:`speechkit.data.resample`) with the loaders' filter
    (:data:`speechkit.data.resample.POLICY_FILTER`, the one :class:`speechkit.data.audio_policy.AudioPolicy`
    uses); ``options`` override its settings (``lowpass_filter_width``, ``rolloff``, ``window``, ...).

    Example:
        >>> resample(torch.zeros(16000), 16000, 8000).shape
        torch.Size([8000])
    """
    from speechkit.data.resample import POLICY_FILTER
    from speechkit.data.resample import resample as resample_along

    return resample_along(waveform, orig_freq, new_freq, dim=0, **{**POLICY_FILTER, **options})


def _segment_bounds(path: str, start: Optional[float], stop: Optional[float], unit: str, rate: int,
                    frames: int) -> tuple:
    def to_samples(value: float, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise AudioError(f"{path}: {name} must be a number, got {value!r}")
        if unit == "seconds":
            return int(round(float(value) * rate))
        if float(value) != math.floor(float(value)):
            raise AudioError(f"{path}: {name}={value} is not a whole number of samples (pass unit='seconds')")
        return int(value)

    first = 0 if start is None else to_samples(start, "start")
    last = frames if stop is None else to_samples(stop, "stop")
    if first < 0 or last < first:
        raise AudioError(f"{path}: bad segment start={start} stop={stop} ({unit})")
    if first > frames or (first == frames and last > first):  # nothing left to read from `first` on
        raise AudioError(f"{path}: segment starts at sample {first} but the file has only {frames} samples")
    return first, min(last, frames)


def _select_channels(path: str, array: np.ndarray, channels: Channels) -> np.ndarray:
    count = array.shape[1]
    if channels is None:
        return array[:, 0] if count == 1 else array
    if isinstance(channels, (int, np.integer)):
        if not -count <= channels < count:
            raise AudioError(f"{path}: has {count} channel(s), cannot select channel {channels}")
        return np.ascontiguousarray(array[:, channels])
    selected = list(channels)
    for channel in selected:
        if not -count <= channel < count:
            raise AudioError(f"{path}: has {count} channel(s), cannot select channel {channel}")
    return np.ascontiguousarray(array[:, selected])


def _audio_error(path: str, error: Exception) -> AudioError:
    if not os.path.exists(path):
        return AudioError(f"audio file not found: {path}")
    if os.path.isdir(path):
        return AudioError(f"expected an audio file, got a directory: {path}")
    suffix = os.path.splitext(path)[1].lower()
    if suffix in FORMATS_NEEDING and _libsndfile_version() < FORMATS_NEEDING[suffix][1]:
        name, needed = FORMATS_NEEDING[suffix]
        return AudioError(f"cannot decode audio file {path}: {name} needs libsndfile >= "
                          f"{'.'.join(map(str, needed))}, and this soundfile bundles "
                          f"{soundfile.__libsndfile_version__} (pip install -U 'soundfile>=0.12.1', whose "
                          "wheels bring libsndfile 1.2; or convert the file to FLAC); docs/data.md, "
                          "'The audio policy'")
    return AudioError(f"cannot decode audio file {path}: {error}")


#: Formats newer than libsndfile 1.0: suffix -> (name, the first libsndfile version reading them).
FORMATS_NEEDING = {".mp3": ("MP3", (1, 1)), ".opus": ("Ogg Opus", (1, 0, 29))}


def _libsndfile_version() -> tuple:
    release = soundfile.__libsndfile_version__.split("-")[0]
    return tuple(int(part) for part in release.split(".") if part.isdigit())
