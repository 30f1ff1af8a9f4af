"""What every waveform augmentation shares: per-item random draws, padding that never enters, checked
arguments.

An augmentation transforms one item's valid samples, ``(time,) -> (time',)``, with every random choice drawn
from that item's own generator. A batch call ``aug(wavs, lengths, seeds)`` applies it to each item's valid
part and pads the results again, so:

- padding never enters an item's result, and an item's result never depends on what it was batched with
  (batch invariance);
- the same seed gives the same audio, on CPU and GPU alike (the draws are made on a CPU generator; only the
  arithmetic runs on the data's device);
- :func:`item_seeds` derives each item's seed from the run's seed, the epoch and the item's id, so a run
  resumed in the middle of an epoch makes exactly the draws the uninterrupted run made.

Example:
    >>> gain = RandomGain(gain_db=(-6.0, 6.0))
    >>> wavs, lengths = torch.randn(2, 800), torch.tensor([800, 500])
    >>> out, out_lengths = gain(wavs, lengths, item_seeds(["a", "b"], epoch=1, seed=0))
    >>> out_lengths.tolist(), bool(out[1, 500:].abs().sum() == 0)
    ([800, 500], True)
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.errors import DataError, HparamsError
from speechkit.nn.masks import checked_lengths


def item_seed(item_id: str, epoch: int, seed: int) -> int:
    """A 63-bit seed for one item in one epoch of one run (a stable hash: the same in every process)."""
    digest = hashlib.blake2b(f"{seed}\x1f{epoch}\x1f{item_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def item_seeds(item_ids: Sequence[str], epoch: int, seed: int) -> torch.Tensor:
    """``(batch,)`` int64 seeds of :func:`item_seed` for a batch's ids."""
    return torch.tensor([item_seed(str(i), int(epoch), int(seed)) for i in item_ids], dtype=torch.int64)


def generator_for(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed`` (CPU so that CPU and GPU runs draw the same values)."""
    return torch.Generator().manual_seed(int(seed))


def uniform(generator: torch.Generator, low: float, high: float) -> float:
    """One draw from U(low, high)."""
    return low + (high - low) * float(torch.rand((), generator=generator))


def check_range(owner: str, name: str, value: Sequence[float], low: float = -math.inf,
                high: float = math.inf) -> tuple:
    """``value`` as a ``(low, high)`` pair of finite floats within ``[low, high]``, low <= high; else an
    :class:`HparamsError` naming ``owner`` and the argument ``name``."""
    try:
        first, second = (float(v) for v in value)
    except (TypeError, ValueError):
        raise HparamsError(f"{owner}: {name} must be a pair [low, high] of numbers, got {value!r}") from None
    if not (math.isfinite(first) and math.isfinite(second)) or first > second:
        raise HparamsError(f"{owner}: {name} must be finite with low <= high, got {value!r}")
    if first < low or second > high:
        raise HparamsError(f"{owner}: {name} {value!r} must lie within [{low:g}, {high:g}]")
    return first, second


def check_probability(owner: str, name: str, value: float) -> float:
    """``value`` as a float in [0, 1], else an :class:`HparamsError` naming ``owner`` and ``name``."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not 0.0 <= number <= 1.0:
        raise HparamsError(f"{owner}: {name} must be a probability in [0, 1], got {value!r}")
    return number


def fast_fft_length(n: int) -> int:
    """The smallest length >= ``n`` with no prime factor above 5: an FFT of a length with a large prime factor
    is many times slower.

    Example:
        >>> fast_fft_length(66047)
        67500
    """
    best = 1 << max(0, (n - 1).bit_length())
    power5 = 1
    while power5 < best:
        power35 = power5
        while power35 < best:
            candidate = power35
            while candidate < n:
                candidate *= 2
            best = min(best, candidate)
            power35 *= 3
        power5 *= 5
    return best


def pad_items(items: Sequence[torch.Tensor], like: torch.Tensor) -> tuple:
    """``(batch, max_time, ...)`` zero-padded stack of ``items`` (``(time,)``, or ``(time, channels)`` for
    multichannel audio) and their ``(batch,)`` lengths."""
    lengths = torch.tensor([item.shape[0] for item in items], dtype=torch.int64, device=like.device)
    out = like.new_zeros((len(items), int(lengths.max()) if len(items) else 0, *like.shape[2:]))
    for row, item in enumerate(items):
        out[row, : item.shape[0]] = item
    return out, lengths


def absolute_lengths(relative: torch.Tensor, time: int, owner: str = "augmentation") -> torch.Tensor:
    """``(batch,)`` int64 sample counts of relative lengths (fractions of the padded ``time``, as SpeechBrain
    recipes pass them); a fraction outside [0, 1] or not finite is a :class:`DataError` naming ``owner``.

    Example:
        >>> absolute_lengths(torch.tensor([1.0, 0.5]), 800).tolist()
        [800, 400]
    """
    if relative.dim() != 1 or not bool(torch.isfinite(relative).all()) or bool((relative < 0).any()) \
            or bool((relative > 1).any()):
        raise DataError(f"{owner}: relative lengths must be a (batch,) tensor of fractions in [0, 1], got "
                        f"{relative.tolist()!r}"[:300])
    return torch.round(relative.double() * time).to(torch.int64)


class WaveAugmentation(torch.nn.Module):
    """Base of the waveform augmentations: subclasses define :meth:`augment` for one item.

    ``forward(wavs, lengths, seeds=None) -> (wavs', lengths')``, wavs (batch, time) float; ``lengths``
    (batch,) int64 samples, or float fractions of ``time`` (relative lengths, as SpeechBrain recipes pass;
    returned relative too); ``seeds`` (batch,) int64 from :func:`item_seeds` (default: drawn from torch's
    global generator). In eval mode the input is
    returned unchanged. ``sample_rate`` is the audio's rate in Hz.
    """

    def __init__(self, sample_rate: int = 16000):
        super().__init__()
        if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate <= 0:
            raise HparamsError(f"{type(self).__name__}: sample_rate must be a positive int, got "
                               f"{sample_rate!r}")
        self.sample_rate = sample_rate

    def augment(self, wave: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One item: ``(time,)`` valid samples in, ``(time',)`` out; every random draw from ``generator``."""
        raise NotImplementedError

    def forward(self, wavs: torch.Tensor, lengths: Optional[torch.Tensor] = None,
                seeds: Optional[torch.Tensor] = None) -> tuple:
        relative = lengths is not None and torch.is_tensor(lengths) and lengths.is_floating_point()
        if relative:  # SpeechBrain's convention: a fraction of the padded length, returned the same way
            given = lengths
            lengths = absolute_lengths(lengths, wavs.shape[1], type(self).__name__)
        lengths = checked_lengths(wavs, lengths)
        if not self.training:
            return (wavs, given) if relative else (wavs, lengths)
        if seeds is None:
            seeds = torch.randint(0, 2**62, (wavs.shape[0],), dtype=torch.int64)
        items = [self.augment(wavs[row, : int(lengths[row])], generator_for(int(seeds[row])))
                 for row in range(wavs.shape[0])]
        out, out_lengths = pad_items(items + self.appended_items(wavs, lengths), wavs)
        if relative:
            return out, out_lengths.to(given.dtype) / max(1, out.shape[1])
        return out, out_lengths

    def appended_items(self, wavs: torch.Tensor, lengths: torch.Tensor) -> list:
        """Items a training batch gets after the augmented ones: none here (the Augmenter's
        ``concat_original`` appends the clean ones)."""
        return []

    def extra_repr(self) -> str:
        return f"sample_rate={self.sample_rate}"


class RandomGain(WaveAugmentation):
    """Scale by a random gain in ``gain_db`` (dB); with ``clip_probability``, then clip at a random level
    ``clip_level`` (a fraction of the item's peak), as an overdriven recording would.

    Example:
        >>> RandomGain(gain_db=(-3.0, 3.0)).augment(torch.ones(4), generator_for(0)).shape
        torch.Size([4])
    """

    def __init__(self, gain_db: Sequence[float] = (-6.0, 6.0), clip_probability: float = 0.0,
                 clip_level: Sequence[float] = (0.3, 0.9), sample_rate: int = 16000):
        super().__init__(sample_rate)
        name = type(self).__name__
        self.gain_db = check_range(name, "gain_db", gain_db, -60.0, 60.0)
        self.clip_probability = check_probability(name, "clip_probability", clip_probability)
        self.clip_level = check_range(name, "clip_level", clip_level, 0.01, 1.0)

    def augment(self, wave: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        gain = 10.0 ** (uniform(generator, *self.gain_db) / 20.0)
        clip = float(torch.rand((), generator=generator)) < self.clip_probability
        level = uniform(generator, *self.clip_level)
        out = wave * gain
        if clip and out.numel():
            limit = level * float(out.abs().max())
            out = out.clamp(-limit, limit)
        return out


def random_crops(wavs: torch.Tensor, lengths: torch.Tensor, samples: int, seeds: Sequence[int]) -> tuple:
    """One random stretch of ``samples`` samples of each item (items shorter keep all of theirs), its start
    drawn from the item's seed (:func:`item_seeds`). Returns ``(crops (batch, min(samples, time)), lengths)``.

    Example:
        >>> crops, n = random_crops(torch.randn(2, 100), torch.tensor([100, 30]), 50, [1, 2])
        >>> crops.shape, n.tolist()
        (torch.Size([2, 50]), [50, 30])
    """
    width = min(int(samples), wavs.shape[1])
    out = wavs.new_zeros(wavs.shape[0], width)
    out_lengths = torch.clamp(lengths, max=width)
    for index, (length, seed) in enumerate(zip(lengths.tolist(), seeds)):
        room = max(0, int(length) - width)
        start = int(torch.randint(0, room + 1, (1,), generator=generator_for(int(seed)))) if room else 0
        out[index, : int(out_lengths[index])] = wavs[index, start:start + int(out_lengths[index])]
    return out, out_lengths
