"""Utterance-level permutation-invariant training (uPIT) with negative SI-SNR, for any number of sources.

The loss of an assignment is the mean over sources of each pair's negative SI-SNR, so the best assignment of
an item is a linear assignment problem: up to ``EXHAUSTIVE_MAX`` sources every permutation is scored at once
(on the tensor's device), beyond that the Hungarian method (``scipy.optimize.linear_sum_assignment``) solves
it exactly in polynomial time.

Example:
    >>> targets = torch.randn(2, 2, 800)
    >>> loss, perm = pit_si_snr_loss(targets.flip(1), targets, torch.tensor([800, 600]))
    >>> perm.tolist()
    [[1, 0], [1, 0]]
"""
from __future__ import annotations

import itertools
from typing import Optional

import torch
from torch import nn

from speechkit.nn.masks import length_mask

#: Largest number of sources whose permutations are all scored (their count grows as the factorial).
EXHAUSTIVE_MAX = 4


def pairwise_si_snr(estimates: torch.Tensor, targets: torch.Tensor, lengths: Optional[torch.Tensor] = None,
                    eps: float = 1e-8) -> torch.Tensor:
    """SI-SNR (dB) of every estimate against every target over each item's valid samples.

    Args:
        estimates, targets: (batch, sources, time).
        lengths: (batch,) valid samples (default: all).

    Returns:
        (batch, sources_estimated, sources_target), computed in float32 at least.
    """
    batch, _, time = estimates.shape
    dtype = torch.promote_types(estimates.dtype, torch.float32)
    estimates, targets = estimates.to(dtype), targets.to(dtype)
    if lengths is None:
        lengths = torch.full((batch,), time, dtype=torch.int64, device=estimates.device)
    mask = length_mask(lengths.to(estimates.device), time).to(dtype).unsqueeze(1)
    count = lengths.to(estimates.device).clamp(min=1).to(dtype).view(batch, 1, 1)
    estimates = (estimates - (estimates * mask).sum(-1, keepdim=True) / count) * mask
    targets = (targets - (targets * mask).sum(-1, keepdim=True) / count) * mask
    dot = torch.einsum("bit,bjt->bij", estimates, targets)  # (batch, est, target)
    target_energy = targets.pow(2).sum(-1).unsqueeze(1)  # (batch, 1, target)
    estimate_energy = estimates.pow(2).sum(-1).unsqueeze(2)  # (batch, est, 1)
    scale = dot / (target_energy + eps)
    projection_energy = scale.pow(2) * target_energy
    # ||e - a t||^2 = ||e||^2 - 2 a <e,t> + a^2 ||t||^2 = ||e||^2 - a <e,t>
    noise_energy = (estimate_energy - scale * dot).clamp(min=0.0)
    return 10.0 * torch.log10((projection_energy + eps) / (noise_energy + eps))


def best_permutation(cost: torch.Tensor) -> torch.Tensor:
    """For each item, ``perm`` minimizing ``sum_j cost[b, perm[j], j]`` (estimate ``perm[j]`` for target j).

    Args:
        cost: (batch, sources, sources), estimate x target.

    Returns:
        (batch, sources) int64.
    """
    batch, sources, _ = cost.shape
    if sources <= EXHAUSTIVE_MAX:
        perms = torch.tensor(list(itertools.permutations(range(sources))), device=cost.device)
        targets = torch.arange(sources, device=cost.device)
        totals = cost[:, perms, targets].sum(-1)  # (batch, permutations)
        return perms[totals.argmin(dim=1)]
    try:
        from scipy.optimize import linear_sum_assignment
    except ImportError:
        raise ImportError(f"PIT over {sources} sources solves an assignment problem with scipy: "
                          "pip install scipy (or speechkit[separation])") from None

    result = torch.empty(batch, sources, dtype=torch.int64)
    for b, matrix in enumerate(cost.detach().double().cpu().numpy()):
        rows, cols = linear_sum_assignment(matrix)
        result[b, torch.as_tensor(cols)] = torch.as_tensor(rows)
    return result.to(cost.device)


def pit_si_snr_loss(estimates: torch.Tensor, targets: torch.Tensor, lengths: Optional[torch.Tensor] = None,
                    reduction: str = "mean") -> tuple:
    """Negative SI-SNR under the best assignment of estimates to targets.

    Args:
        estimates, targets: (batch, sources, time).
        lengths: (batch,) valid samples.
        reduction: ``"mean"`` over items, or ``"none"`` for (batch,).

    Returns:
        ``(loss, permutation)``: the loss and (batch, sources) int64, estimate ``permutation[b, j]`` being
        the one matched to target ``j`` (``estimates[b, permutation[b]]`` lines up with ``targets[b]``).
    """
    if estimates.shape != targets.shape or estimates.dim() != 3:
        raise ValueError(f"estimates and targets must both be (batch, sources, time), got "
                         f"{tuple(estimates.shape)} and {tuple(targets.shape)}")
    cost = -pairwise_si_snr(estimates, targets, lengths)
    permutation = best_permutation(cost.detach())
    chosen = cost.gather(1, permutation.unsqueeze(1)).squeeze(1)  # (batch, target): cost[b, perm[b,j], j]
    per_item = chosen.mean(dim=1)
    if reduction == "none":
        return per_item, permutation
    if reduction != "mean":
        raise ValueError(f"reduction must be mean or none, got {reduction!r}")
    return per_item.mean(), permutation


def apply_permutation(estimates: torch.Tensor, permutation: torch.Tensor) -> torch.Tensor:
    """Reorder (batch, sources, time) estimates so that source j matches target j."""
    index = permutation.unsqueeze(-1).expand(-1, -1, estimates.shape[-1])
    return estimates.gather(1, index)


class PITLoss(nn.Module):
    """Module form of :func:`pit_si_snr_loss` for YAML: ``loss: !new:speechkit.nn.PITLoss``."""

    def __init__(self, reduction: str = "mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, estimates, targets, lengths=None) -> tuple:
        return pit_si_snr_loss(estimates, targets, lengths, self.reduction)
