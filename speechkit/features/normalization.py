"""Mean and variance normalization of padded feature batches that counts only real frames.

Utterance normalization uses each item's own frames. Global normalization keeps running sums over every real
frame seen in training (float64 buffers: ``count``, ``sum``, ``sum_squares``), so its statistics are part of
``state_dict`` and are saved and restored with the checkpoint. Padding never enters a statistic, and the
output is zero past each item's frames.

Example:
    >>> norm = GlobalNormalization(num_features=80)
    >>> feats, lengths = torch.randn(4, 50, 80), torch.tensor([50, 40, 30, 20])
    >>> out, _ = norm(feats, lengths)       # training mode: statistics updated, then applied
    >>> sorted(norm.state_dict())
    ['count', 'num_updates', 'sum', 'sum_squares']
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.nn.masks import checked_lengths, length_mask


def masked_moments(x: torch.Tensor, lengths: torch.Tensor) -> tuple:
    """Per-item mean and (biased) variance over each item's frames.

    Args:
        x: (batch, frames, features); lengths: (batch,) int64 valid frames.

    Returns:
        ``(mean, var)``, each (batch, features); an item without frames gets mean 0 and variance 1.
    """
    lengths = checked_lengths(x, lengths)
    mask = length_mask(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype)
    count = lengths.clamp(min=1).to(x.dtype).unsqueeze(-1)
    mean = (x * mask).sum(dim=1) / count
    var = (((x - mean.unsqueeze(1)) * mask) ** 2).sum(dim=1) / count
    empty = (lengths == 0).unsqueeze(-1)
    return mean.masked_fill(empty, 0.0), var.masked_fill(empty, 1.0)


def utterance_normalize(x: torch.Tensor, lengths: torch.Tensor, norm_vars: bool = True,
                        eps: float = 1e-10) -> torch.Tensor:
    """Subtract each item's mean (and divide by its standard deviation) over its own frames."""
    mean, var = masked_moments(x, lengths)
    y = x - mean.unsqueeze(1)
    if norm_vars:
        y = y / torch.sqrt(var + eps).unsqueeze(1)
    return y * length_mask(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype)


class UtteranceNormalization(torch.nn.Module):
    """``forward(x, lengths) -> (normalized, lengths)``: per-utterance mean (and variance) normalization."""

    def __init__(self, norm_vars: bool = True, eps: float = 1e-10):
        super().__init__()
        self.norm_vars, self.eps = norm_vars, eps

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        return utterance_normalize(x, lengths, self.norm_vars, self.eps), lengths


def _all_reduce_sum(tensors: list) -> list:
    """Sum tensors across processes when a process group is running (every rank calls this together)."""
    import torch.distributed as torch_dist

    if not (torch_dist.is_available() and torch_dist.is_initialized()) or torch_dist.get_world_size() == 1:
        return tensors
    flat = torch.cat([t.reshape(-1) for t in tensors])
    device = "cuda" if torch_dist.get_backend() == "nccl" else "cpu"
    flat = flat.to(device)
    torch_dist.all_reduce(flat)
    flat = flat.to(tensors[0].device)
    out, offset = [], 0
    for t in tensors:
        out.append(flat[offset:offset + t.numel()].reshape(t.shape))
        offset += t.numel()
    return out


class GlobalNormalization(torch.nn.Module):
    """Normalize with the mean and variance of every training frame seen so far (a running estimate).

    In training mode each call first adds the batch's real frames to the statistics (summed across processes
    when ``sync`` and a process group is running, so every rank holds the same statistics), then normalizes.
    ``max_updates`` freezes the statistics after that many training batches (None: keep updating). In eval
    mode the statistics are only applied. Before any update the module passes features through unchanged.

    Args:
        num_features: size of the last dimension of x.
        norm_vars: also divide by the standard deviation.
    """

    def __init__(self, num_features: int, norm_vars: bool = True, eps: float = 1e-10,
                 max_updates: Optional[int] = None, sync: bool = True):
        super().__init__()
        self.num_features, self.norm_vars, self.eps = num_features, norm_vars, eps
        self.max_updates, self.sync = max_updates, sync
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("sum", torch.zeros(num_features, dtype=torch.float64))
        self.register_buffer("sum_squares", torch.zeros(num_features, dtype=torch.float64))
        self.register_buffer("num_updates", torch.zeros((), dtype=torch.int64))

    @property
    def mean(self) -> torch.Tensor:
        return (self.sum / self.count.clamp(min=1.0)).to(torch.float32)

    @property
    def var(self) -> torch.Tensor:
        count = self.count.clamp(min=1.0)
        mean = self.sum / count
        return (self.sum_squares / count - mean ** 2).clamp(min=0.0).to(torch.float32)

    @torch.no_grad()
    def update(self, x: torch.Tensor, lengths: torch.Tensor) -> None:
        """Add the real frames of ``x`` (batch, frames, features) to the statistics."""
        lengths = checked_lengths(x, lengths)
        mask = length_mask(lengths, x.shape[1]).unsqueeze(-1)
        frames = x.to(torch.float64) * mask
        batch_stats = [lengths.sum().to(torch.float64).reshape(()), frames.sum(dim=(0, 1)),
                       (frames ** 2).sum(dim=(0, 1))]
        if self.sync:
            batch_stats = _all_reduce_sum(batch_stats)
        self.count += batch_stats[0].to(self.count.device)
        self.sum += batch_stats[1].to(self.sum.device)
        self.sum_squares += batch_stats[2].to(self.sum_squares.device)
        self.num_updates += 1

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        if x.shape[-1] != self.num_features:
            raise ValueError(f"GlobalNormalization expects {self.num_features} features, got {x.shape[-1]}")
        lengths = checked_lengths(x, lengths)
        if self.training and (self.max_updates is None or int(self.num_updates) < self.max_updates):
            self.update(x, lengths)
        mask = length_mask(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype)
        y = x - self.mean.to(x.dtype)
        if self.norm_vars:
            y = y / torch.sqrt(self.var + self.eps).to(x.dtype)
        # No statistics yet: pass through (a tensor test, so no host synchronization in the forward).
        y = torch.where(self.count > 0, y, x)
        return y * mask, lengths

    def extra_repr(self) -> str:
        return f"num_features={self.num_features}, norm_vars={self.norm_vars}, max_updates={self.max_updates}"
