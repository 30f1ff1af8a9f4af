"""Pre-norm Transformer encoder and decoder layers with length-based masks.

Example:
    >>> layer = TransformerDecoderLayer(d_model=16, num_heads=2, ffn_dim=32)
    >>> y = layer(torch.randn(2, 4, 16), torch.tensor([4, 2]), torch.randn(2, 9, 16), torch.tensor([9, 5]))
    >>> y.shape
    torch.Size([2, 4, 16])
"""

from __future__ import annotations

import torch
from torch import nn

from speechkit.nn.attention import MultiHeadAttention
from speechkit.nn.feedforward import FeedForward


class TransformerEncoderLayer(nn.Module):
    """Self-attention + feed-forward, each with a pre-LayerNorm and a residual.

    Shapes: x ``(batch, time, d_model)``, lengths ``(batch,)`` -> ``(batch, time, d_model)``. With
    ``causal=True`` a frame attends only to itself and earlier frames (language models).
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        ffn_dim: int,
        dropout: float = 0.1,
        rotary: bool = False,
        activation: str = "relu",
    ):
        super().__init__()
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, num_heads, dropout, rotary=rotary)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, causal: bool = False) -> torch.Tensor:
        x = x + self.dropout(self.attention(self.attention_norm(x), key_lengths=lengths, causal=causal))
        return x + self.ffn(self.ffn_norm(x))


class TransformerDecoderLayer(nn.Module):
    """Causal self-attention, cross-attention over an encoder memory, feed-forward (all pre-norm).

    Shapes: x ``(batch, tokens, d_model)``, lengths ``(batch,)``, memory ``(batch, frames, d_model)``,
    memory_lengths ``(batch,)`` -> ``(batch, tokens, d_model)``.
    """

    def __init__(
        self, d_model: int, num_heads: int, ffn_dim: int, dropout: float = 0.1, activation: str = "relu"
    ):
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(d_model)
        self.self_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.cross_attention_norm = nn.LayerNorm(d_model)
        self.cross_attention = MultiHeadAttention(d_model, num_heads, dropout)
        self.ffn_norm = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, ffn_dim, dropout, activation)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        lengths: torch.Tensor,
        memory: torch.Tensor,
        memory_lengths: torch.Tensor,
    ) -> torch.Tensor:
        x = x + self.dropout(
            self.self_attention(self.self_attention_norm(x), key_lengths=lengths, causal=True)
        )
        x = x + self.dropout(
            self.cross_attention(self.cross_attention_norm(x), memory, key_lengths=memory_lengths)
        )
        return x + self.ffn(self.ffn_norm(x))
