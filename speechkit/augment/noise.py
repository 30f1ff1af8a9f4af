"""Additive noise: recorded noise from a folder or generated coloured noise at a random SNR, babble of other
speakers, and dropped chunks (short silences, as lost packets or a loose cable give).

Noise files are checked when the augmentation is built (an empty folder, a file that is not audio, or a
non-finite sample is an error naming the file), then read once and kept in memory (mono, at the model's
rate), so training never waits on them and never fails half-way.

Example:
    >>> from speechkit.augment import generator_for
    >>> noise = AddNoise(snr_db=(5.0, 20.0), colors=["white", "pink"])
    >>> noise.augment(torch.randn(8000), generator_for(2)).shape
    torch.Size([8000])
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

import torch

from speechkit.augment.core import WaveAugmentation, check_range, fast_fft_length, uniform
from speechkit.data.audio_policy import shared_policy
from speechkit.errors import AudioError, HparamsError

AUDIO_SUFFIXES = {".wav", ".flac", ".ogg", ".mp3", ".opus", ".aiff", ".aif", ".au"}
COLORS = {"white": 0.0, "pink": 0.5, "brown": 1.0}  # amplitude exponent of 1/f


def load_bank(owner: str, key: str, source: Union[str, os.PathLike, Sequence], sample_rate: int,
              min_seconds: float = 0.0) -> list:
    """Every audio file of a folder (recursively), or the files of a list, read as mono float32 tensors at
    ``sample_rate``; an :class:`HparamsError` names ``owner``, ``key`` and the file that is not usable."""
    if isinstance(source, (str, os.PathLike)):
        folder = Path(source)
        if not folder.is_dir():
            raise HparamsError(f"{owner}: {key} {str(folder)!r} is not a folder")
        paths = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
        where = f"folder {str(folder)!r}"
    else:
        paths, where = [Path(p) for p in source], "list"
    if not paths:
        raise HparamsError(f"{owner}: {key} names an empty {where}; it must hold audio files")
    bank = []
    for path in paths:
        if path.suffix.lower() not in AUDIO_SUFFIXES:
            raise HparamsError(f"{owner}: {key} holds {str(path)!r}, which is not an audio file "
                               f"({', '.join(sorted(AUDIO_SUFFIXES))})")
        try:
            wave = shared_policy(sample_rate).read(path)  # the loaders' conversion: mono at the model's rate
        except AudioError as error:
            raise HparamsError(f"{owner}: {key}: {error}") from None
        if not bool(torch.isfinite(wave).all()):
            raise HparamsError(f"{owner}: {key}: {str(path)!r} holds NaN or infinite samples")
        if wave.shape[0] < max(1, int(min_seconds * sample_rate)) or float(wave.abs().max()) == 0.0:
            raise HparamsError(f"{owner}: {key}: {str(path)!r} is silent or shorter than {min_seconds:g} s")
        bank.append(wave.float())
    return bank


def excerpt(source: torch.Tensor, length: int, generator: torch.Generator) -> torch.Tensor:
    """``length`` samples of ``source`` from a random offset, looping it when it is shorter."""
    if source.shape[0] < length:
        source = source.repeat(math.ceil(length / source.shape[0]) + 1)
    start = int(torch.randint(0, source.shape[0] - length + 1, (), generator=generator))
    return source[start:start + length]


def colored_noise(length: int, color: str, generator: torch.Generator) -> torch.Tensor:
    """Unit-RMS noise of ``length`` samples: white (flat), pink (1/f power) or brown (1/f^2 power)."""
    exponent = COLORS[color]
    size = fast_fft_length(length) if exponent and length > 1 else length
    white = torch.randn(size, generator=generator)
    if exponent and length > 1:
        spectrum = torch.fft.rfft(white)
        freqs = torch.arange(spectrum.shape[0], dtype=torch.float32).clamp(min=1.0)
        white = torch.fft.irfft(spectrum / freqs**exponent, n=size)[:length]
    return white / white.pow(2).mean().sqrt().clamp(min=1e-12)


def mix_at_snr(speech: torch.Tensor, noise: torch.Tensor, snr_db: float) -> torch.Tensor:
    """``speech + g * noise`` with ``g`` such that speech power / noise power is ``snr_db``."""
    speech_power = speech.pow(2).mean()
    noise_power = noise.pow(2).mean().clamp(min=1e-12)
    return speech + noise * (speech_power / noise_power / 10.0 ** (snr_db / 10.0)).sqrt()


class AddNoise(WaveAugmentation):
    """Add noise at an SNR drawn from ``snr_db``: an excerpt of a file of ``noise_folder`` (or a list of
    files) when given, else generated noise of a colour drawn from ``colors``."""

    def __init__(self, snr_db: Sequence[float] = (0.0, 20.0), noise_folder: Optional[Union[str, list]] = None,
                 colors: Sequence[str] = ("white", "pink", "brown"), sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        self.snr_db = check_range(name, "snr_db", snr_db, -30.0, 100.0)
        unknown = [c for c in colors if c not in COLORS]
        if not colors or unknown:
            raise HparamsError(f"{name}: colors must name some of {sorted(COLORS)}, got {list(colors)!r}")
        self.colors = tuple(colors)
        self.bank = load_bank(name, "noise_folder", noise_folder, sample_rate) if noise_folder else None

    def augment(self, wave, generator):
        snr = uniform(generator, *self.snr_db)
        length = wave.shape[0]
        if self.bank is not None:
            source = self.bank[int(torch.randint(len(self.bank), (), generator=generator))]
            noise = excerpt(source, length, generator)
        else:
            color = self.colors[int(torch.randint(len(self.colors), (), generator=generator))]
            noise = colored_noise(length, color, generator)
        return mix_at_snr(wave, noise.to(device=wave.device, dtype=wave.dtype), snr) if length else wave


class Babble(WaveAugmentation):
    """Babble: ``speakers`` (a count drawn from the range) excerpts of speech files from ``speech_folder``
    (or a list of files: other training speakers), summed and added at an SNR drawn from ``snr_db``."""

    def __init__(self, speech_folder: Union[str, list], speakers: Sequence[int] = (3, 7),
                 snr_db: Sequence[float] = (5.0, 20.0), sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        low, high = check_range(name, "speakers", speakers, 1, 64)
        self.speakers = (int(low), int(high))
        self.snr_db = check_range(name, "snr_db", snr_db, -30.0, 100.0)
        self.bank = load_bank(name, "speech_folder", speech_folder, sample_rate)

    def augment(self, wave, generator):
        snr = uniform(generator, *self.snr_db)
        count = int(torch.randint(self.speakers[0], self.speakers[1] + 1, (), generator=generator))
        if wave.shape[0] == 0:
            return wave
        babble = torch.zeros(wave.shape[0])
        for _ in range(count):
            source = self.bank[int(torch.randint(len(self.bank), (), generator=generator))]
            voice = excerpt(source, wave.shape[0], generator)
            babble += voice / voice.pow(2).mean().sqrt().clamp(min=1e-6)
        return mix_at_snr(wave, babble.to(device=wave.device, dtype=wave.dtype), snr)


class ChunkDrop(WaveAugmentation):
    """Silence ``chunks`` (a count drawn from the range) random stretches of up to ``max_ms`` each."""

    def __init__(self, chunks: Sequence[int] = (1, 4), max_ms: float = 100.0, sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        low, high = check_range(name, "chunks", chunks, 0, 64)
        self.chunks = (int(low), int(high))
        if not 0 < float(max_ms) <= 2000:
            raise HparamsError(f"{name}: max_ms must lie in (0, 2000], got {max_ms!r}")
        self.max_samples = max(1, int(float(max_ms) / 1000 * sample_rate))

    def augment(self, wave, generator):
        count = int(torch.randint(self.chunks[0], self.chunks[1] + 1, (), generator=generator))
        out = wave.clone()
        for _ in range(count):
            width = int(torch.randint(1, self.max_samples + 1, (), generator=generator))
            start = int(torch.randint(0, max(1, wave.shape[0] - width + 1), (), generator=generator))
            out[start:start + width] = 0
        return out


class CutCat(WaveAugmentation):
    """Cut ``segments`` (a count drawn from the range) stretches of ``segment_ms`` out of the item and put in
    their place stretches of the same length from recordings of ``source_folder`` (or a list of files),
    level-matched to the item: the cut-and-concatenate of SpeechBrain's ``CutCat``, which takes its segments
    from the other items of the batch, here from a bank, so an item's result never depends on its batch.
    The length is kept."""

    def __init__(self, source_folder: Union[str, list], segments: Sequence[int] = (1, 2),
                 segment_ms: Sequence[float] = (100.0, 400.0), sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        low, high = check_range(name, "segments", segments, 0, 64)
        self.segments = (int(low), int(high))
        self.segment_ms = check_range(name, "segment_ms", segment_ms, 1.0, 60_000.0)
        self.bank = load_bank(name, "source_folder", source_folder, sample_rate)

    def augment(self, wave, generator):
        count = int(torch.randint(self.segments[0], self.segments[1] + 1, (), generator=generator))
        out = wave.clone()
        level = float(wave.pow(2).mean().sqrt()) if wave.numel() else 0.0
        for _ in range(count):
            size = min(wave.shape[0], int(uniform(generator, *self.segment_ms) * self.sample_rate / 1000))
            start = int(torch.randint(wave.shape[0] - size + 1, (), generator=generator))
            source = self.bank[int(torch.randint(len(self.bank), (), generator=generator))]
            piece = excerpt(source, size, generator)
            piece = piece / piece.pow(2).mean().sqrt().clamp(min=1e-6) * level
            out[start:start + size] = piece.to(device=wave.device, dtype=wave.dtype)
        return out
