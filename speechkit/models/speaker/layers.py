"""Length-aware building blocks of the speaker embedding models: time-delay convolutions with per-item
reflect padding, masked statistics pooling and attentive statistics pooling.

All take channels-first tensors ``(batch, channels, time)`` and absolute int64 ``lengths`` (frames). Frames
past an item's length may hold anything: every block reads only valid frames (the reflect padding mirrors each
item at its *own* last frame, and pooling masks the rest), so an item's output does not depend on the batch
(docs/design.md, contract 2).

Example:
    >>> block = TDNNBlock(80, 64, kernel_size=5, dilation=2)
    >>> block(torch.randn(2, 80, 50), torch.tensor([50, 31])).shape
    torch.Size([2, 64, 50])
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from speechkit.nn.masks import length_mask


def reflect_pad(x: torch.Tensor, lengths: torch.Tensor, pad: int) -> torch.Tensor:
    """(batch, channels, time + 2 * pad): each item reflect-padded at its start and its own last valid frame.

    Equal to ``F.pad(x[i:i+1, :, :lengths[i]], (pad, pad), mode="reflect")`` on the valid part of each item
    (indices are clamped for items shorter than ``pad + 1`` frames, where reflection is undefined). Built
    with a gather, so it exports to ONNX with a dynamic time axis.
    """
    if pad == 0:
        return x
    time = x.shape[-1]
    position = torch.arange(-pad, time + pad, device=x.device).unsqueeze(0)
    last = (lengths.to(x.device) - 1).clamp(min=0).unsqueeze(1)
    index = position.abs()
    index = torch.where(position > last, 2 * last - position, index)
    index = torch.minimum(index.clamp(min=0), last)
    return x.gather(2, index.unsqueeze(1).expand(x.shape[0], x.shape[1], -1))


def masked_statistics(x: torch.Tensor, weights: torch.Tensor, eps: float = 1e-12) -> tuple:
    """Weighted mean and standard deviation over time: ``x`` (batch, channels, time), ``weights``
    broadcastable to it and summing to one over each item's valid frames. Returns two (batch, channels)
    tensors."""
    x = x.masked_fill(weights == 0, 0.0)  # padded frames may hold NaN or inf; 0 * NaN would be NaN
    mean = (weights * x).sum(dim=2)
    var = (weights * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2)
    return mean, var.clamp(min=eps).sqrt()


def uniform_weights(lengths: torch.Tensor, time: int, dtype: torch.dtype) -> torch.Tensor:
    """(batch, 1, time): 1 / length on each item's valid frames, 0 elsewhere."""
    mask = length_mask(lengths, time).to(dtype).unsqueeze(1)
    return mask / mask.sum(dim=2, keepdim=True).clamp(min=1.0)


class TDNNBlock(nn.Module):
    """Dilated 1-D convolution ("same" length, per-item reflect padding), ReLU, batch norm.

    ``forward(x, lengths)``: (batch, in_channels, time) -> (batch, out_channels, time).
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 1, dilation: int = 1,
                 groups: int = 1):
        super().__init__()
        if kernel_size % 2 == 0:
            raise ValueError(f"kernel_size must be odd (same-length output), got {kernel_size}")
        self.pad = dilation * (kernel_size - 1) // 2
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size, dilation=dilation, groups=groups)
        self.activation = nn.ReLU()
        self.norm = nn.BatchNorm1d(out_channels)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.norm(self.activation(self.conv(reflect_pad(x, lengths, self.pad))))


class StatisticsPooling(nn.Module):
    """Mean and standard deviation over each item's valid frames: (batch, C, time) -> (batch, 2 * C)."""

    def __init__(self, eps: float = 1e-7):
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        weights = uniform_weights(lengths, x.shape[-1], x.dtype)
        mean, std = masked_statistics(x, weights, self.eps)
        return torch.cat([mean, std], dim=1)


class AttentiveStatisticsPooling(nn.Module):
    """Attentive statistics pooling with global context (ECAPA-TDNN, Desplanques et al. 2020, section 3.3).

    Each frame's attention weights (one per channel) come from the frame, concatenated with the utterance's
    mean and standard deviation when ``global_context``; the pooled vector is the attention-weighted mean and
    standard deviation. ``forward(x, lengths)``: (batch, channels, time) -> (batch, 2 * channels).
    """

    def __init__(self, channels: int, attention_channels: int = 128, global_context: bool = True,
                 eps: float = 1e-12):
        super().__init__()
        self.eps, self.global_context = eps, global_context
        self.tdnn = TDNNBlock(channels * 3 if global_context else channels, attention_channels, 1, 1)
        self.tanh = nn.Tanh()
        self.conv = nn.Conv1d(attention_channels, channels, kernel_size=1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        time = x.shape[-1]
        mask = length_mask(lengths, time).unsqueeze(1)
        if self.global_context:
            mean, std = masked_statistics(x, uniform_weights(lengths, time, x.dtype), self.eps)
            attention_input = torch.cat([x, mean.unsqueeze(2).expand(-1, -1, time),
                                         std.unsqueeze(2).expand(-1, -1, time)], dim=1)
        else:
            attention_input = x
        scores = self.conv(self.tanh(self.tdnn(attention_input, lengths)))
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=2)
        mean, std = masked_statistics(x, weights, self.eps)
        return torch.cat([mean, std], dim=1)


def check_features(x: torch.Tensor, lengths: Optional[torch.Tensor], num_features: int,
                   who: str) -> torch.Tensor:
    """The lengths of ``x`` (batch, frames, features) as int64 after checking shapes (all frames if None)."""
    from speechkit.nn.masks import checked_lengths

    if x.dim() != 3 or x.shape[2] != num_features:
        raise ValueError(f"{who} takes (batch, frames, {num_features}) features, got {tuple(x.shape)}")
    if lengths is None:
        return torch.full((x.shape[0],), x.shape[1], dtype=torch.int64, device=x.device)
    return checked_lengths(x, lengths)


class EmbeddingNormalization(nn.Module):
    """Subtract a global mean from embeddings (and divide by a global deviation when ``std`` is given):
    ``forward(embeddings (batch, dim)) -> (batch, dim)``. Imported SpeechBrain models carry one."""

    def __init__(self, dim: int, mean: Optional[torch.Tensor] = None, std: Optional[torch.Tensor] = None):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim) if mean is None else mean.reshape(dim).float())
        self.register_buffer("std", torch.ones(dim) if std is None else std.reshape(dim).float())

    def forward(self, embeddings: torch.Tensor) -> torch.Tensor:
        return (embeddings - self.mean) / self.std
