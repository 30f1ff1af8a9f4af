"""Sequence losses with absolute lengths: CTC and label-smoothed cross entropy.

Both compute one loss per item from its valid frames/tokens only, then reduce; ``reduction="mean"`` is the
mean over the batch's items (what ``Brain.compute_objectives`` returns), so an item's contribution does not
depend on what it is batched with.

Example:
    >>> log_probs = torch.randn(2, 10, 5).log_softmax(-1)
    >>> ctc_loss(log_probs, torch.tensor([[1, 2], [3, 0]]), torch.tensor([10, 6]), torch.tensor([2, 1])).shape
    torch.Size([])
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.errors import DataError
from speechkit.nn.masks import check_lengths, length_mask

REDUCTIONS = ("mean", "sum", "none")


def _reduce(per_item: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return per_item.mean()
    if reduction == "sum":
        return per_item.sum()
    if reduction == "none":
        return per_item
    raise DataError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def ctc_loss(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    input_lengths: torch.Tensor,
    target_lengths: torch.Tensor,
    blank_index: int = 0,
    reduction: str = "mean",
    normalize_by_target_length: bool = False,
    zero_infinity: bool = True,
) -> torch.Tensor:
    """CTC negative log-likelihood per item (computed in float32), reduced over items.

    Args:
        log_probs: ``(batch, frames, vocab)`` log-softmax outputs.
        targets: ``(batch, tokens)`` padded label ids (no blanks).
        input_lengths: ``(batch,)`` valid frames.
        target_lengths: ``(batch,)`` valid tokens.
        blank_index: the blank id.
        reduction: ``"mean"`` (over items), ``"sum"`` or ``"none"`` (``(batch,)``).
        normalize_by_target_length: divide each item's loss by its number of tokens first.
        zero_infinity: an item whose labels cannot fit its frames gets loss 0 instead of inf.
    """
    batch, frames, _ = log_probs.shape
    check_lengths(input_lengths, frames, batch, "CTC input lengths")
    check_lengths(target_lengths, targets.shape[1], batch, "CTC target lengths")
    per_item = F.ctc_loss(
        log_probs.float().transpose(0, 1),
        targets,
        input_lengths,
        target_lengths,
        blank=blank_index,
        reduction="none",
        zero_infinity=zero_infinity,
    )
    if normalize_by_target_length:
        per_item = per_item / target_lengths.clamp(min=1).to(per_item.dtype)
    return _reduce(per_item, reduction)


def label_smoothed_nll_loss(
    log_probs: torch.Tensor,
    targets: torch.Tensor,
    lengths: torch.Tensor,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
    normalize_by_length: bool = True,
) -> torch.Tensor:
    """Cross entropy with label smoothing over the valid tokens of each item.

    Args:
        log_probs: ``(batch, tokens, vocab)`` log-softmax outputs.
        targets: ``(batch, tokens)`` label ids (padding ignored via ``lengths``).
        lengths: ``(batch,)`` valid tokens.
        label_smoothing: mass spread uniformly over the vocabulary.
        reduction: ``"mean"`` (over items), ``"sum"`` or ``"none"``.
        normalize_by_length: per-item loss is the mean over its tokens (else the sum).
    """
    batch, tokens, vocab = log_probs.shape
    check_lengths(lengths, tokens, batch, "target lengths")
    if targets.shape != (batch, tokens):
        raise DataError(f"targets must have shape {(batch, tokens)}, got {tuple(targets.shape)}")
    log_probs = log_probs.float()
    mask = length_mask(lengths, tokens)
    safe_targets = targets.masked_fill(~mask, 0)
    nll = -log_probs.gather(-1, safe_targets.unsqueeze(-1)).squeeze(-1)
    smooth = -log_probs.mean(dim=-1)
    per_token = (1.0 - label_smoothing) * nll + label_smoothing * smooth
    per_item = per_token.masked_fill(~mask, 0.0).sum(dim=1)
    if normalize_by_length:
        per_item = per_item / lengths.clamp(min=1).to(per_item.dtype)
    return _reduce(per_item, reduction)


class CTCLoss(nn.Module):
    """Module form of :func:`ctc_loss` for YAML: ``loss: !new:speechkit.nn.CTCLoss {blank_index: 0}``."""

    def __init__(
        self, blank_index: int = 0, reduction: str = "mean", normalize_by_target_length: bool = False
    ):
        super().__init__()
        self.blank_index = blank_index
        self.reduction = reduction
        self.normalize_by_target_length = normalize_by_target_length

    def forward(self, log_probs, targets, input_lengths, target_lengths) -> torch.Tensor:
        return ctc_loss(
            log_probs,
            targets,
            input_lengths,
            target_lengths,
            self.blank_index,
            self.reduction,
            self.normalize_by_target_length,
        )


class LabelSmoothedNLLLoss(nn.Module):
    """Module form of :func:`label_smoothed_nll_loss`."""

    def __init__(
        self, label_smoothing: float = 0.1, reduction: str = "mean", normalize_by_length: bool = True
    ):
        super().__init__()
        self.label_smoothing = label_smoothing
        self.reduction = reduction
        self.normalize_by_length = normalize_by_length

    def forward(self, log_probs, targets, lengths) -> torch.Tensor:
        return label_smoothed_nll_loss(
            log_probs, targets, lengths, self.label_smoothing, self.reduction, self.normalize_by_length
        )
