"""Request bytes -> a mono float32 waveform at the model's rate, or a :class:`RequestError` saying why not.

Uploads may be any format soundfile reads (WAV, FLAC, OGG, ...), at any rate and with any number of
channels: converted by the audio policy (:mod:`speechkit.data.audio_policy`), the same code as
``Pretrained.load_audio`` and the training loaders: channels averaged, the rate converted with one filter.
Everything an upload would cost is checked on its header before a sample is decoded (:func:`check_header`):
a 300 KB FLAC can declare 8 channels at 655 kHz, gigabytes once decoded. A file shorter than its header
says (a truncated upload) is refused rather than transcribed in part. Streams send raw little-endian float32
samples (:func:`decode_pcm`).

Example:
    >>> import io, soundfile, numpy
    >>> buffer = io.BytesIO()
    >>> soundfile.write(buffer, numpy.zeros((8000, 2)), 8000, format="WAV")
    >>> decode_upload(buffer.getvalue(), 16000, ServeLimits(), name="a.wav").shape
    torch.Size([16000])
"""
from __future__ import annotations

import io
import re
import struct
from typing import Optional

import numpy as np
import soundfile
import torch

from speechkit.data.audio_policy import shared_policy
from speechkit.data.resample import POLICY_FILTER, filter_bank_elements
from speechkit.errors import AudioError
from speechkit.serve.errors import RequestError
from speechkit.serve.limits import ServeLimits

MIN_RATE = 4000
#: Largest resampling filter bank (coefficients) a request may make the server build: rates that share only
#: a tiny factor with the model's (16001 Hz against 16000) would need gigabytes.
MAX_FILTER_ELEMENTS = 1 << 22


def decode_upload(data: bytes, sample_rate: int, limits: ServeLimits, name: str = "upload",
                  channels="mix") -> torch.Tensor:
    """Decode an uploaded audio file.

    Args:
        data: the file's bytes.
        sample_rate: the model's rate; other rates are converted.
        limits: the server's limits (audio length, decoded samples, channels, rates).
        name: what to call the upload in messages (its file name when it had one).
        channels: the model's audio policy channels (``"mix"`` or an index).

    Returns:
        (time,) float32 at ``sample_rate``.

    Raises:
        RequestError: 400 empty file or no samples or non-finite samples, 415 not audio, 413 longer or larger
        than the limits, 422 a rate or channel count the server does not take, or a truncated file.
    """
    if not data:
        raise RequestError(400, f"{name} is empty (0 bytes); send an audio file")
    try:
        handle = soundfile.SoundFile(io.BytesIO(data))
    except Exception as error:  # libsndfile's messages: "Format not recognised", ...
        reason = re.sub(r"^Error opening <[^>]*>: ", "", str(error))
        raise RequestError(415, f"{name} is not an audio file soundfile can read ({reason})") from None
    with handle:
        rate, frames = handle.samplerate, handle.frames
        check_header(name, rate, frames, handle.channels, sample_rate, limits)
        missing = _missing_wav_bytes(data)
        if missing:
            raise RequestError(422, f"{name} is truncated: its header declares {missing[0]} bytes of "
                                    f"samples, it holds {missing[1]}")
        try:
            array = handle.read(dtype="float32", always_2d=True)
        except Exception as error:  # noqa: BLE001 (a decoder that loses sync in a cut compressed file)
            raise RequestError(422, f"{name} is truncated or corrupt: decoding stopped with "
                                    f"{str(error).removeprefix('Error : ')!r}") from None
    if array.shape[0] < frames:
        raise RequestError(422, f"{name} is truncated: its header declares {frames} frames, it holds "
                                f"{array.shape[0]}")
    return to_model_rate(torch.from_numpy(array), rate, sample_rate, name, channels)


def check_header(name: str, rate: int, frames: int, channels: int, model_rate: int,
                 limits: ServeLimits) -> None:
    """Refuse what a file's header declares beyond the limits, before it is decoded."""
    check_rate(name, rate, model_rate, limits)
    if not 1 <= channels <= limits.max_channels:
        raise RequestError(422, f"{name} has {channels} channels; the limit is {limits.max_channels} "
                                "(--max-channels)")
    if frames > limits.max_audio_seconds * rate:
        raise RequestError(413, f"{name} holds {frames / rate:.1f} s of audio; the limit is "
                                f"{limits.max_audio_seconds:g} s (--max-audio-seconds)")
    if frames * channels > limits.max_decoded_samples:
        raise RequestError(413, f"{name} would decode to {frames * channels:,} samples ({frames:,} frames x "
                                f"{channels} channels); the limit is {limits.max_decoded_samples:,} "
                                "(--max-decoded-samples)")


def check_rate(name: str, rate: int, model_rate: int, limits: ServeLimits) -> None:
    """Refuse (422) a rate outside 4000..``max_sample_rate`` Hz or one that converts to the model's only
    through a huge filter bank."""
    if not MIN_RATE <= rate <= limits.max_sample_rate:
        raise RequestError(422, f"{name} has a sample rate of {rate} Hz; the server takes {MIN_RATE} to "
                                f"{limits.max_sample_rate} Hz (--max-sample-rate)")
    bank = filter_bank_elements(rate, model_rate, POLICY_FILTER["lowpass_filter_width"],
                                POLICY_FILTER["rolloff"])  # the filter the audio policy converts with
    if rate != model_rate and bank > MAX_FILTER_ELEMENTS:
        raise RequestError(422, f"{name} has a sample rate of {rate} Hz, which shares too small a factor "
                                f"with the model's {model_rate} Hz to convert (resample it to a common rate "
                                "such as 16000, 44100 or 48000 Hz)")


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


def _missing_wav_bytes(data: bytes) -> Optional[tuple]:
    """``(declared, present)`` sample bytes of a RIFF/WAVE file whose data chunk is cut short, else None.
    (libsndfile reads such a file up to where it ends without a word.) Sizes of 0 and 0xFFFFFFFF are a
    streaming writer's placeholders, not declarations."""
    if len(data) < 12 or data[:4] != b"RIFF" or data[8:12] != b"WAVE":
        return None
    offset = 12
    while offset + 8 <= len(data):
        chunk, size = data[offset:offset + 4], struct.unpack("<I", data[offset + 4:offset + 8])[0]
        if chunk == b"data":
            present = len(data) - offset - 8
            if size in (0, 0xFFFFFFFF) or present >= size:
                return None
            return size, present
        offset += 8 + size + (size & 1)
    return None
