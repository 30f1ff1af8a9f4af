"""Normalization that only sees valid frames.

Per-frame normalization (``torch.nn.LayerNorm`` over channels) is batch-invariant by construction; the layers
here cover the per-utterance kind, whose statistics must skip the padding.

Example:
    >>> x = torch.randn(2, 5, 3)
    >>> y = MaskedInstanceNorm(3)(x, torch.tensor([5, 2]))
    >>> y.shape
    torch.Size([2, 5, 3])
"""

from __future__ import annotations

import torch
from torch import nn

from speechkit.nn.masks import length_mask


def masked_mean_var(x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and (biased) variance over the valid frames of each item.

    Args:
        x: ``(batch, time, channels)``.
        lengths: ``(batch,)`` absolute lengths.

    Returns:
        ``mean`` and ``var``, each ``(batch, 1, channels)``. Items of length 0 get mean 0 and variance 0.
    """
    mask = length_mask(lengths, x.shape[1]).unsqueeze(-1)
    count = lengths.clamp(min=1).to(x.dtype).view(-1, 1, 1)
    masked = x.masked_fill(~mask, 0.0)
    mean = masked.sum(dim=1, keepdim=True) / count
    centered = (x - mean).masked_fill(~mask, 0.0)
    var = centered.pow(2).sum(dim=1, keepdim=True) / count
    return mean, var


class MaskedInstanceNorm(nn.Module):
    """Normalize each channel of each utterance by its mean and variance over valid frames.

    A batch-invariant replacement for batch normalization in convolution modules: the statistics belong to
    one utterance, so neighbours in the batch and the padding cannot move them.

    Args:
        num_channels: size of the last dimension.
        eps: added to the variance.
        affine: learn a per-channel scale and shift.

    Shapes:
        x ``(batch, time, channels)``, lengths ``(batch,)`` -> ``(batch, time, channels)``.
    """

    def __init__(self, num_channels: int, eps: float = 1e-5, affine: bool = True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_channels)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_channels)) if affine else None

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mean, var = masked_mean_var(x.float(), lengths)
        y = ((x.float() - mean) * torch.rsqrt(var + self.eps)).to(x.dtype)
        if self.weight is not None:
            y = y * self.weight + self.bias
        return y
