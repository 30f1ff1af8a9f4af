"""Run several ``(x, lengths) -> (y, lengths)`` feature steps in order, as one module for a YAML entry.

Example:
    >>> from speechkit.features import FrequencyWarp, SpecAugment
    >>> augment = FeatureChain(FrequencyWarp(warp_range=(0.9, 1.1)), SpecAugment(freq_masks=1))
    >>> y, lengths = augment(torch.randn(2, 50, 80), torch.tensor([50, 30]))
"""
from __future__ import annotations

import torch


class FeatureChain(torch.nn.Module):
    """``forward(x, lengths)`` applies each step to the previous one's ``(y, lengths)``; train/eval mode
    reaches every step (augmentations are identities in eval mode)."""

    def __init__(self, *steps: torch.nn.Module):
        super().__init__()
        if not steps:
            raise ValueError("FeatureChain needs at least one step")
        self.steps = torch.nn.ModuleList(steps)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        for step in self.steps:
            x, lengths = step(x, lengths)
        return x, lengths
