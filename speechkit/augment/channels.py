"""Multichannel augmentations: a microphone array or a stereo recording with a channel lost or wired the
wrong way round.

They take ``(batch, time, channels)`` waveforms (``(time, channels)`` per item) and keep the library's
contracts: each item's valid samples alone, its own seeded draws.

Example:
    >>> from speechkit.augment import generator_for
    >>> ChannelSwap().augment(torch.arange(6.0).reshape(3, 2), generator_for(0)).tolist()
    [[1.0, 0.0], [3.0, 2.0], [5.0, 4.0]]
"""
from __future__ import annotations

import torch

from speechkit.augment.core import WaveAugmentation, check_probability
from speechkit.errors import DataError, HparamsError


def _channels(owner: str, wave: torch.Tensor) -> int:
    if wave.dim() != 2:
        raise DataError(f"{owner}: expects (batch, time, channels) waveforms, got an item of shape "
                        f"{tuple(wave.shape)}")
    return wave.shape[1]


class ChannelDrop(WaveAugmentation):
    """Silence each channel with probability ``drop_probability`` (a dead microphone); at least one channel
    is always kept, so an item never becomes silence."""

    def __init__(self, drop_probability: float = 0.3, sample_rate: int = 16000):
        super().__init__(sample_rate)
        self.drop_probability = check_probability(type(self).__name__, "drop_probability", drop_probability)

    def augment(self, wave, generator):
        channels = _channels(type(self).__name__, wave)
        dropped = torch.rand(channels, generator=generator) < self.drop_probability
        keep = int(torch.randint(channels, (), generator=generator))
        dropped[keep] = False
        return wave * (~dropped).to(wave.dtype).to(wave.device)


class ChannelSwap(WaveAugmentation):
    """Swap ``swaps`` (a ``[low, high]`` range of whole numbers) random pairs of channels, one after the
    other (left and right exchanged, an array's microphones in another order)."""

    def __init__(self, swaps: tuple = (1, 1), sample_rate: int = 16000):
        super().__init__(sample_rate)
        try:
            low, high = (int(v) for v in swaps)
        except (TypeError, ValueError):
            raise HparamsError(f"ChannelSwap: swaps must be a pair [low, high] of ints, got {swaps!r}") \
                from None
        if not 0 <= low <= high <= 64 or list(swaps) != [low, high]:
            raise HparamsError(f"ChannelSwap: swaps must be whole numbers with 0 <= low <= high <= 64, got "
                               f"{swaps!r}")
        self.swaps = (low, high)

    def augment(self, wave, generator):
        channels = _channels(type(self).__name__, wave)
        count = int(torch.randint(self.swaps[0], self.swaps[1] + 1, (), generator=generator))
        order = list(range(channels))
        for _ in range(count if channels > 1 else 0):
            first, second = torch.randperm(channels, generator=generator)[:2].tolist()
            order[first], order[second] = order[second], order[first]
        return wave[:, order]
