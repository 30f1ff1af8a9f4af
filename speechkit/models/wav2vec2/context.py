"""The wav2vec 2.0 context network: convolutional positional embedding, then Transformer layers.

Post-norm (BASE): ``x + pos_conv(x)`` -> LayerNorm -> layers that normalize after each residual. Pre-norm
(LARGE): ``x + pos_conv(x)`` -> layers that normalize before each block -> a final LayerNorm. Padded frames
are zeroed before the positional convolution (so it sees the zeros an item alone would be padded with) and
masked out of every attention (docs/design.md, contract 2).

Example:
    >>> encoder = ContextEncoder(d_model=32, num_layers=2, num_heads=4, ffn_dim=64, pos_conv_kernel=8,
    ...                          pos_conv_groups=4)
    >>> out, hidden = encoder(torch.randn(2, 30, 32), torch.tensor([30, 12]))
    >>> out.shape, len(hidden)
    (torch.Size([2, 30, 32]), 3)
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.nn.masks import length_mask, zero_padding


class PositionalConvEmbedding(nn.Module):
    """Grouped, weight-normalized convolution over time + GELU (relative positions, no table)."""

    def __init__(self, d_model: int, kernel: int, groups: int):
        super().__init__()
        conv = nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2, groups=groups)
        nn.init.normal_(conv.weight, mean=0.0, std=(4.0 / (kernel * d_model)) ** 0.5)
        nn.init.zeros_(conv.bias)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        # An even kernel with kernel // 2 padding on both sides gives one frame too many: drop the last.
        self.trim = 1 if kernel % 2 == 0 else 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x.transpose(1, 2))
        if self.trim:
            y = y[:, :, : -self.trim]
        return F.gelu(y).transpose(1, 2)


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate q/k/v projections and a key padding mask from lengths."""

    def __init__(self, d_model: int, num_heads: int, dropout: float):
        super().__init__()
        self.num_heads, self.dropout = num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, key_mask: Optional[torch.Tensor]) -> torch.Tensor:
        batch, frames, d_model = x.shape

        def heads(projection: nn.Linear) -> torch.Tensor:
            return projection(x).view(batch, frames, self.num_heads, -1).transpose(1, 2)

        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(heads(self.q_proj), heads(self.k_proj), heads(self.v_proj),
                                           attn_mask=key_mask, dropout_p=dropout)
        return self.out_proj(y.transpose(1, 2).reshape(batch, frames, d_model))


class ContextLayer(nn.Module):
    """One Transformer layer, post-norm or pre-norm (``layer_norm_first``)."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation_dropout: float, layer_norm_first: bool, eps: float = 1e-5):
        super().__init__()
        self.layer_norm_first = layer_norm_first
        self.attention = SelfAttention(d_model, num_heads, attention_dropout)
        self.attention_norm = nn.LayerNorm(d_model, eps=eps)
        self.ffn_in = nn.Linear(d_model, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, d_model)
        self.final_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.activation_dropout = nn.Dropout(activation_dropout)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.ffn_out(self.activation_dropout(F.gelu(self.ffn_in(x)))))

    def forward(self, x: torch.Tensor, key_mask: Optional[torch.Tensor]) -> torch.Tensor:
        if self.layer_norm_first:
            x = x + self.dropout(self.attention(self.attention_norm(x), key_mask))
            return x + self.feed_forward(self.final_norm(x))
        x = self.attention_norm(x + self.dropout(self.attention(x, key_mask)))
        return self.final_norm(x + self.feed_forward(x))


class ContextEncoder(nn.Module):
    """Positional convolution + ``num_layers`` Transformer layers, with LayerDrop while training.

    Shapes: x ``(batch, frames, d_model)``, lengths ``(batch,)`` -> output ``(batch, frames, d_model)`` and
    the list of ``num_layers + 1`` hidden states (the layers' input, then each layer's output).
    """

    def __init__(self, d_model: int, num_layers: int, num_heads: int, ffn_dim: int, pos_conv_kernel: int,
                 pos_conv_groups: int, dropout: float = 0.1, attention_dropout: float = 0.1,
                 activation_dropout: float = 0.0, layer_norm_first: bool = False, layer_drop: float = 0.0,
                 eps: float = 1e-5):
        super().__init__()
        self.layer_norm_first, self.layer_drop = layer_norm_first, layer_drop
        self.pos_conv = PositionalConvEmbedding(d_model, pos_conv_kernel, pos_conv_groups)
        self.layer_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            ContextLayer(d_model, num_heads, ffn_dim, dropout, attention_dropout, activation_dropout,
                         layer_norm_first, eps) for _ in range(num_layers))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, num_layers: Optional[int] = None) -> tuple:
        """Run the first ``num_layers`` layers (all by default; fewer for features from a middle layer)."""
        x = zero_padding(x, lengths)
        key_mask = length_mask(lengths.clamp(min=1), x.shape[1])[:, None, None, :]
        x = x + self.pos_conv(x)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        x = self.dropout(x)
        hidden = [x]
        layers = self.layers if num_layers is None else self.layers[:num_layers]
        for layer in layers:
            if self.training and self.layer_drop > 0 and float(torch.rand(())) < self.layer_drop:
                hidden.append(x)
                continue
            x = layer(x, key_mask)
            hidden.append(x)
        if self.layer_norm_first and len(layers) == len(self.layers):
            x = self.layer_norm(x)
            hidden[-1] = x
        return x, hidden
