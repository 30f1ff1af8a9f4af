"""Request bytes -> a mono float32 waveform at the model's rate, or a :class:`RequestError` saying why not.

Uploads may be any format soundfile reads (WAV, FLAC, OGG, ...), at any rate and with any number of
channels: converted by the audio policy (:mod:`speechkit.data.audio_policy`), the same code as
``Pretrained.load_audio`` and the training loaders: channels averaged, the rate converted with one filter.
Streams send raw little-endian float32 samples (:func:`decode_pcm`).

Example:
    >>> import io, soundfile, numpy
    >>> buffer = io.BytesIO()
    >>> soundfile.write(buffer, numpy.zeros((8000, 2)), 8000, format="WAV")
    >>> decode_upload(buffer.getvalue(), 16000, max_seconds=10.0, name="a.wav").shape
    torch.Size([16000])
"""
from __future__ import annotations

import io
import re

import numpy as np
import soundfile
import torch

from speechkit.data.audio_policy import shared_policy
from speechkit.errors import AudioError
from speechkit.serve.errors import RequestError


def decode_upload(data: bytes, sample_rate: int, max_seconds: float, name: str = "upload",
                  channels="mix") -> torch.Tensor:
    """Decode an uploaded audio file.

    Args:
        data: the file's bytes.
        sample_rate: the model's rate; other rates are converted.
        max_seconds: longest audio accepted.
        name: what to call the upload in messages (its file name when it had one).
        channels: the model's audio policy channels (``"mix"`` or an index).

    Returns:
        (time,) float32 at ``sample_rate``.

    Raises:
        RequestError: 400 empty or silent-length file or non-finite samples, 415 not audio, 413 too long.
    """
    if not data:
        raise RequestError(400, f"{name} is empty (0 bytes); send an audio file")
    try:
        with soundfile.SoundFile(io.BytesIO(data)) as handle:
            rate, frames = handle.samplerate, handle.frames
            if frames > max_seconds * rate:
                raise RequestError(413, f"{name} holds {frames / rate:.1f} s of audio; the limit is "
                                        f"{max_seconds:g} s (--max-audio-seconds)")
            array = handle.read(dtype="float32", always_2d=True)
    except RequestError:
        raise
    except Exception as error:  # libsndfile's messages: "Format not recognised", ...
        reason = re.sub(r"^Error opening <[^>]*>: ", "", str(error))
        raise RequestError(415, f"{name} is not an audio file soundfile can read ({reason})") from None
    return to_model_rate(torch.from_numpy(array), rate, sample_rate, name, channels)


def decode_pcm(data: bytes, name: str = "chunk") -> torch.Tensor:
    """Raw little-endian float32 samples -> (time,) float32; refuses a length that is not whole samples."""
    if len(data) % 4:
        raise RequestError(400, f"{name} has {len(data)} bytes, not a whole number of float32 samples "
                                "(send little-endian float32 PCM)")
    return torch.from_numpy(np.frombuffer(data, dtype="<f4").astype(np.float32))


def to_model_rate(waveform: torch.Tensor, rate: int, sample_rate: int, name: str,
                  channels="mix") -> torch.Tensor:
    """Check a decoded (time,) or (time, channels) waveform and convert it by the audio policy: mono at
    ``sample_rate``."""
    if waveform.numel() == 0:
        raise RequestError(400, f"{name} holds no audio samples (0 frames)")
    if not bool(torch.isfinite(waveform).all()):
        raise RequestError(400, f"{name} holds NaN or infinite samples")
    try:
        return shared_policy(sample_rate, channels).apply(waveform, rate, name)
    except AudioError as error:  # a channel the upload lacks
        raise RequestError(400, str(error)) from None
