"""The Augmenter: applies some of a list of augmentations to each item, each with its own probability.

For every item, with that item's generator: draw how many augmentations to consider (between
``min_augmentations`` and ``max_augmentations``), pick that many distinct ones in a random order, and apply
each with its probability. With ``concat_original`` the clean batch is appended after the augmented one
(twice the items; :meth:`Augmenter.replicate` repeats the labels to match).

Example:
    >>> from speechkit.augment import AddNoise, RandomGain, SpeedPerturb
    >>> augmenter = Augmenter([SpeedPerturb(), AddNoise(), RandomGain()], probabilities=[1.0, 0.5, 0.5],
    ...                       max_augmentations=2)
    >>> wavs, lengths = torch.randn(3, 1600), torch.tensor([1600, 1200, 800])
    >>> out, out_lengths = augmenter(wavs, lengths, item_seeds(["a", "b", "c"], epoch=1, seed=7))
    >>> out.shape[0]
    3
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.augment.core import WaveAugmentation, check_probability, item_seeds
from speechkit.errors import HparamsError

__all__ = ["Augmenter", "item_seeds"]


class Augmenter(WaveAugmentation):
    """Random choice and order of waveform augmentations per item (see the module docstring).

    Args:
        augmentations: :class:`~speechkit.augment.core.WaveAugmentation` instances.
        probabilities: one per augmentation (default 1.0 each): the chance it applies once chosen.
        min_augmentations, max_augmentations: how many are chosen per item, a number drawn between them
            (default: ``max_augmentations`` is all of them, ``min_augmentations`` is ``max_augmentations``).
        concat_original: append the clean items after the augmented ones.
    """

    def __init__(self, augmentations: Sequence[WaveAugmentation],
                 probabilities: Optional[Sequence[float]] = None, min_augmentations: Optional[int] = None,
                 max_augmentations: Optional[int] = None, concat_original: bool = False):
        if not augmentations:
            raise HparamsError("Augmenter: augmentations must list at least one augmentation")
        for position, augmentation in enumerate(augmentations):
            if not isinstance(augmentation, WaveAugmentation):
                raise HparamsError(f"Augmenter: augmentations[{position}] is a {type(augmentation).__name__}"
                                   ", not a speechkit.augment waveform augmentation")
        rates = sorted({augmentation.sample_rate for augmentation in augmentations})
        if len(rates) > 1:
            raise HparamsError(f"Augmenter: its augmentations are set for different sample rates {rates}")
        super().__init__(rates[0])
        count = len(augmentations)
        probabilities = [1.0] * count if probabilities is None else list(probabilities)
        if len(probabilities) != count:
            raise HparamsError(f"Augmenter: probabilities has {len(probabilities)} values for {count} "
                               "augmentations")
        self.probabilities = [check_probability("Augmenter", f"probabilities[{i}]", p)
                              for i, p in enumerate(probabilities)]
        high = count if max_augmentations is None else max_augmentations
        low = high if min_augmentations is None else min_augmentations
        for name, value in (("min_augmentations", low), ("max_augmentations", high)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= count:
                raise HparamsError(f"Augmenter: {name} must be an int in [0, {count}], got {value!r}")
        if low > high:
            raise HparamsError(f"Augmenter: min_augmentations {low} is above max_augmentations {high}")
        self.augmentations = torch.nn.ModuleList(augmentations)
        self.min_augmentations, self.max_augmentations = low, high
        self.concat_original = bool(concat_original)

    def chosen(self, generator: torch.Generator) -> list:
        """The augmentations one item gets, in order (indices), drawn from ``generator``."""
        low, high = self.min_augmentations, self.max_augmentations
        count = int(torch.randint(low, high + 1, (), generator=generator))
        order = torch.randperm(len(self.augmentations), generator=generator)[:count].tolist()
        draws = torch.rand(len(order), generator=generator).tolist()
        return [index for index, draw in zip(order, draws) if draw < self.probabilities[index]]

    def augment(self, wave: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        """One item's valid samples ``(time,)`` through its chosen augmentations."""
        for index in self.chosen(generator):
            wave = self.augmentations[index].augment(wave, generator)
        return wave

    def appended_items(self, wavs: torch.Tensor, lengths: torch.Tensor) -> list:
        """With ``concat_original``, the clean items (the batch ``forward`` returns is then twice as long)."""
        if not self.concat_original:
            return []
        return [wavs[row, : int(lengths[row])] for row in range(wavs.shape[0])]

    def replicate(self, labels):
        """Labels (a tensor, or a list) repeated to match the batch ``forward`` returned."""
        if not (self.training and self.concat_original):
            return labels
        return torch.cat([labels, labels]) if isinstance(labels, torch.Tensor) else list(labels) * 2
