"""Gumbel-softmax product quantizer, its perplexities and the annealed temperature.

``groups`` codebooks of ``entries`` vectors each; a frame picks one entry per codebook (straight-through
Gumbel-softmax while training, argmax otherwise) and the picks are concatenated. Two perplexities are
reported over the valid frames: ``prob_perplexity`` from the averaged softmax (the diversity loss pushes it
towards ``groups * entries``), and ``code_perplexity`` from the hard picks (what the codebook really uses).

Example:
    >>> quantizer = GumbelQuantizer(input_dim=16, groups=2, entries=8, codevector_dim=12)
    >>> out = quantizer(torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool))
    >>> out.codevectors.shape, out.prob_perplexity.item() <= 16
    (torch.Size([2, 5, 12]), True)
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn


class QuantizerOutput(NamedTuple):
    codevectors: torch.Tensor
    prob_perplexity: torch.Tensor
    code_perplexity: torch.Tensor


def perplexity(probabilities: torch.Tensor, frame_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Sum over groups of ``exp(entropy)`` of the per-group distribution averaged over the selected frames.

    Shapes: probabilities ``(frames, groups, entries)``, frame_mask ``(frames,)`` bool -> scalar.
    """
    if frame_mask is not None:
        probabilities = probabilities[frame_mask.reshape(-1)]
    average = probabilities.mean(dim=0)
    return torch.exp(-torch.xlogy(average, average).sum(-1)).sum()


def diversity_loss(prob_perplexity: torch.Tensor, groups: int, entries: int) -> torch.Tensor:
    """``(G V - perplexity) / (G V)``: 0 when every entry of every codebook is used equally."""
    total = groups * entries
    return (total - prob_perplexity) / total


def gumbel_softmax_hard(logits: torch.Tensor, tau: float,
                        generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """One-hot samples of ``softmax((logits + Gumbel noise) / tau)`` with the soft sample's gradient.

    Same as ``F.gumbel_softmax(hard=True)``, with the noise drawn from ``generator`` so that a batch's
    draws can be made independent of the process running it.
    """
    noise = torch.empty(logits.shape, dtype=logits.dtype).exponential_(generator=generator)
    gumbels = -noise.to(logits.device).log()
    soft = torch.softmax((logits + gumbels) / tau, dim=-1)
    hard = F.one_hot(soft.argmax(-1), soft.shape[-1]).to(soft.dtype)
    return hard - soft.detach() + soft


class GumbelTemperature:
    """``max(start * decay ** update, end)``: the quantizer's temperature after ``update`` optimizer steps.

    Example:
        >>> GumbelTemperature(2.0, 0.5, 0.5)(1), GumbelTemperature(2.0, 0.5, 0.5)(10)
        (1.0, 0.5)
    """

    def __init__(self, start: float, end: float, decay: float):
        self.start, self.end, self.decay = start, end, decay

    def __call__(self, update: int) -> float:
        return max(self.start * self.decay ** update, self.end)


class GumbelQuantizer(nn.Module):
    """Quantize frames to concatenated codebook entries.

    Shapes: x ``(batch, frames, input_dim)``, frame_mask ``(batch, frames)`` bool (the frames the
    perplexities average over, normally the valid ones) -> codevectors ``(batch, frames, codevector_dim)``.
    """

    def __init__(self, input_dim: int, groups: int, entries: int, codevector_dim: int,
                 temperature: float = 2.0):
        super().__init__()
        self.groups, self.entries = groups, entries
        self.weight_proj = nn.Linear(input_dim, groups * entries)
        self.codevectors = nn.Parameter(torch.empty(1, groups * entries, codevector_dim // groups))
        nn.init.uniform_(self.codevectors)
        nn.init.normal_(self.weight_proj.weight, mean=0.0, std=1.0)
        nn.init.zeros_(self.weight_proj.bias)
        self.temperature = temperature

    def forward(self, x: torch.Tensor, frame_mask: Optional[torch.Tensor] = None,
                generator: Optional[torch.Generator] = None) -> QuantizerOutput:
        """``generator`` draws the Gumbel noise while training (default: the global random state)."""
        batch, frames, _ = x.shape
        logits = self.weight_proj(x).view(batch * frames * self.groups, self.entries)
        hard = F.one_hot(logits.argmax(-1), self.entries).to(logits.dtype)
        code_perplexity = perplexity(hard.view(batch * frames, self.groups, -1).float(), frame_mask)
        if self.training:
            # Straight-through Gumbel-softmax, in float32: low-precision noise makes the picks collapse.
            picks = gumbel_softmax_hard(logits.float(), self.temperature, generator).type_as(logits)
            soft = torch.softmax(logits.float().view(batch * frames, self.groups, -1), dim=-1)
            prob_perplexity = perplexity(soft, frame_mask)
        else:
            picks = hard
            prob_perplexity = code_perplexity
        # One (frames x entries) @ (entries x dim) product per group: the same sums as weighting every entry
        # of every codebook and adding them up, without the (frames, groups x entries, dim) intermediate.
        picks = picks.view(batch * frames, self.groups, self.entries).transpose(0, 1)
        codebooks = self.codevectors.view(self.groups, self.entries, -1).to(picks.dtype)
        chosen = torch.bmm(picks, codebooks).transpose(0, 1)
        return QuantizerOutput(chosen.reshape(batch, frames, -1), prob_perplexity, code_perplexity)
