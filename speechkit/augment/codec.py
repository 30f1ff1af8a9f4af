"""Lossy codecs: the item encoded and decoded again, as audio that went through MP3, Opus or Vorbis sounds.

Encoding and decoding run in memory through libsndfile (``soundfile``, a dependency already: MP3 with LAME
and mpg123, Opus and Vorbis in Ogg, from libsndfile 1.1 on). A codec that this machine's libsndfile lacks is
replaced by 8-bit mu-law (G.711, :class:`~speechkit.augment.MuLaw`), with one warning when the augmentation is
built, so a recipe still runs; ``fallback=False`` refuses instead. Opus takes 8, 12, 16, 24 or 48 kHz only.

Example:
    >>> from speechkit.augment import generator_for
    >>> Codec(codecs=["mp3"]).augment(0.1 * torch.randn(16000), generator_for(0)).shape
    torch.Size([16000])
"""
from __future__ import annotations

import io
import logging
from collections.abc import Sequence

import numpy as np
import soundfile
import torch

from speechkit.augment.core import WaveAugmentation, check_range, uniform
from speechkit.augment.tempo import MuLaw
from speechkit.errors import HparamsError

logger = logging.getLogger(__name__)

#: codec name -> (libsndfile container, subtype)
CODECS = {"mp3": ("MP3", "MPEG_LAYER_III"), "opus": ("OGG", "OPUS"), "vorbis": ("OGG", "VORBIS")}
OPUS_RATES = (8000, 12000, 16000, 24000, 48000)


def codec_available(name: str) -> bool:
    """Whether this machine's libsndfile encodes ``name`` (a key of :data:`CODECS`)."""
    container, subtype = CODECS[name]
    try:
        return subtype in soundfile.available_subtypes(container)
    except (ValueError, TypeError):
        return False


class Codec(WaveAugmentation):
    """Encode with a codec drawn from ``codecs`` at a compression level drawn from ``compression``
    (libsndfile's 0 = best quality, up to 0.95: nearly the smallest file; LAME refuses 1), decode, and keep
    the item's length (the decoder trims the codec's delay; a few samples short or long are cut or
    zero-filled)."""

    def __init__(self, codecs: Sequence[str] = ("mp3", "opus", "vorbis"),
                 compression: Sequence[float] = (0.3, 0.95), fallback: bool = True, sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        if isinstance(codecs, str) or not codecs or any(c not in CODECS for c in codecs):
            raise HparamsError(f"{name}: codecs must be a non-empty list of {sorted(CODECS)}, got {codecs!r}")
        if "opus" in codecs and sample_rate not in OPUS_RATES:
            raise HparamsError(f"{name}: opus takes sample rates {OPUS_RATES} only, got {sample_rate}; leave "
                               "it out of codecs")
        self.compression = check_range(name, "compression", compression, 0.0, 0.95)
        missing = [c for c in codecs if not codec_available(c)]
        if missing and not fallback:
            raise HparamsError(f"{name}: this machine's libsndfile ({soundfile.__libsndfile_version__}) "
                               f"cannot encode {missing}; install libsndfile 1.1 or newer, or pass fallback: "
                               "true")
        if missing:
            logger.warning("%s: libsndfile %s cannot encode %s; 8-bit mu-law (G.711) stands in for them",
                           name, soundfile.__libsndfile_version__, missing)
        self.codecs = tuple(codecs)
        self.missing = frozenset(missing)
        self.fallback = MuLaw(bits=8, sample_rate=sample_rate)

    def augment(self, wave, generator):
        codec = self.codecs[int(torch.randint(len(self.codecs), (), generator=generator))]
        level = uniform(generator, *self.compression)
        if wave.numel() == 0:
            return wave
        if codec in self.missing:
            return self.fallback.augment(wave, generator)
        peak = float(wave.abs().max())
        scale = 0.99 / peak if peak > 0.99 else 1.0  # the codecs store samples in [-1, 1]
        container, subtype = CODECS[codec]
        buffer = io.BytesIO()
        samples = (wave.detach().to("cpu", torch.float32) * scale).numpy()
        soundfile.write(buffer, samples, self.sample_rate, format=container, subtype=subtype,
                        compression_level=level)
        buffer.seek(0)
        decoded, _ = soundfile.read(buffer, dtype="float32")
        decoded = np.asarray(decoded, dtype=np.float32).reshape(-1)[: wave.shape[0]]
        out = wave.new_zeros(wave.shape[0])
        out[: decoded.shape[0]] = torch.from_numpy(decoded).to(wave.device, wave.dtype)
        return out / scale
