"""Conformer block: half feed-forward, self-attention, convolution module, half feed-forward.

The convolution module zeroes the padded frames before its depthwise convolution, so the frames next to the
end of an utterance see zeros exactly as they would with no batch neighbours, and it normalizes with a
per-frame LayerNorm (or a per-utterance masked instance norm) instead of batch normalization, whose
statistics would mix items and padding.

Example:
    >>> block = ConformerBlock(d_model=32, num_heads=4, ffn_dim=64, kernel_size=7)
    >>> block(torch.randn(2, 9, 32), torch.tensor([9, 4])).shape
    torch.Size([2, 9, 32])
"""

from __future__ import annotations

import torch
from torch import nn

from speechkit.errors import HparamsError
from speechkit.nn.attention import MultiHeadAttention
from speechkit.nn.feedforward import FeedForward
from speechkit.nn.masks import zero_padding
from speechkit.nn.normalization import MaskedInstanceNorm


class ConvolutionModule(nn.Module):
    """Pointwise conv + GLU, depthwise conv over time, norm, SiLU, pointwise conv.

    Args:
        d_model: channels.
        kernel_size: odd depthwise kernel size.
        dropout: output dropout.
        norm: ``"layer"`` (per-frame LayerNorm) or ``"instance"`` (per-utterance masked statistics).

    Shapes: x ``(batch, time, d_model)``, lengths ``(batch,)`` -> ``(batch, time, d_model)``.
    """

    def __init__(self, d_model: int, kernel_size: int = 31, dropout: float = 0.0, norm: str = "layer"):
        super().__init__()
        if kernel_size % 2 == 0:
            raise HparamsError(f"the conformer kernel_size must be odd, got {kernel_size}")
        if norm not in ("layer", "instance"):
            raise HparamsError(f"conformer conv norm must be 'layer' or 'instance', got {norm!r}")
        self.pointwise_in = nn.Linear(d_model, 2 * d_model)
        self.depthwise = nn.Conv1d(d_model, d_model, kernel_size, padding=kernel_size // 2, groups=d_model)
        self.norm = nn.LayerNorm(d_model) if norm == "layer" else MaskedInstanceNorm(d_model)
        self.activation = nn.SiLU()
        self.pointwise_out = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = nn.functional.glu(self.pointwise_in(x), dim=-1)
        # Padding must read as zeros (like the conv's own edge padding) so edge frames ignore neighbours.
        x = zero_padding(x, lengths)
        x = self.depthwise(x.transpose(1, 2)).transpose(1, 2)
        x = self.norm(x) if isinstance(self.norm, nn.LayerNorm) else self.norm(x, lengths)
        return self.dropout(self.pointwise_out(self.activation(x)))


class ConformerBlock(nn.Module):
    """One Conformer layer (macaron feed-forwards around attention and convolution, final LayerNorm).

    Args:
        d_model: model width.
        num_heads: attention heads.
        ffn_dim: hidden size of each feed-forward.
        kernel_size: depthwise convolution kernel (odd).
        dropout: dropout in every sub-block.
        rotary: use rotary (relative) positions in attention.
        conv_norm: ``"layer"`` or ``"instance"`` (see :class:`ConvolutionModule`).

    Shapes: x ``(batch, time, d_model)``, lengths ``(batch,)`` -> ``(batch, time, d_model)``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        kernel_size: int = 31,
        dropout: float = 0.1,
        rotary: bool = True,
        conv_norm: str = "layer",
    ):
        super().__init__()
        self.ffn1_norm = nn.LayerNorm(d_model)
        self.ffn1 = FeedForward(d_model, ffn_dim, dropout)
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, num_heads, dropout, rotary=rotary)
        self.attention_dropout = nn.Dropout(dropout)
        self.conv_norm = nn.LayerNorm(d_model)
        self.conv = ConvolutionModule(d_model, kernel_size, dropout, conv_norm)
        self.ffn2_norm = nn.LayerNorm(d_model)
        self.ffn2 = FeedForward(d_model, ffn_dim, dropout)
        self.final_norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = x + 0.5 * self.ffn1(self.ffn1_norm(x))
        x = x + self.attention_dropout(self.attention(self.attention_norm(x), key_lengths=lengths))
        x = x + self.conv(self.conv_norm(x), lengths)
        x = x + 0.5 * self.ffn2(self.ffn2_norm(x))
        return self.final_norm(x)
