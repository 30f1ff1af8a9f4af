"""The wav2vec 2.0 context network: convolutional positional embedding, then Transformer layers.

Post-norm (BASE): ``x + pos_conv(x)`` -> LayerNorm -> layers that normalize after each residual. Pre-norm
(LARGE): ``x + pos_conv(x)`` -> layers that normalize before each block -> a final LayerNorm. Padded frames
are zeroed before the positional convolution (so it sees the zeros an item alone would be padded with) and
masked out of every attention (docs/design.md, contract 2).

Two variants of the published families: a stack of plain positional convolutions with non-affine LayerNorms
(:class:`StackedPositionalConv`, data2vec-audio), and WavLM's gated relative position bias
(:class:`RelativePositionBias` shared by the layers, gated in each :class:`SelfAttention` by its input).

Example:
    >>> encoder = ContextEncoder(d_model=32, num_layers=2, num_heads=4, ffn_dim=64, pos_conv_kernel=8,
    ...                          pos_conv_groups=4)
    >>> out, hidden = encoder(torch.randn(2, 30, 32), torch.tensor([30, 12]))
    >>> out.shape, len(hidden)
    (torch.Size([2, 30, 32]), 3)
"""
from __future__ import annotations

import math
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


class StackedPositionalConv(nn.Module):
    """data2vec-audio's positional embedding: ``layers`` x (grouped convolution, LayerNorm without affine
    parameters, GELU). Padded frames are zeroed between the convolutions, so an item padded in a batch sees
    what it sees alone.

    Shapes: x ``(batch, frames, d_model)``, valid ``(batch, frames, 1)`` float ->
    ``(batch, frames, d_model)``.
    """

    def __init__(self, d_model: int, kernel: int, groups: int, layers: int, eps: float = 1e-5):
        super().__init__()
        self.convs = nn.ModuleList(nn.Conv1d(d_model, d_model, kernel, padding=kernel // 2, groups=groups)
                                   for _ in range(layers))
        self.trim = 1 if kernel % 2 == 0 else 0
        self.eps = eps

    def forward(self, x: torch.Tensor, valid: Optional[torch.Tensor] = None) -> torch.Tensor:
        for conv in self.convs:
            y = conv(x.transpose(1, 2))
            if self.trim:
                y = y[:, :, : -self.trim]
            x = F.gelu(F.layer_norm(y.transpose(1, 2), y.shape[1:2], eps=self.eps))
            if valid is not None:
                x = x * valid
        return x


def relative_position_buckets(relative: torch.Tensor, num_buckets: int, max_distance: int) -> torch.Tensor:
    """WavLM's (T5-style, bidirectional) bucket of each relative distance ``key - query``.

    Half the buckets for each direction; within one, exact distances below a quarter of ``num_buckets``,
    then logarithmically wider buckets up to ``max_distance`` (everything further shares the last).
    """
    half = num_buckets // 2
    buckets = (relative > 0).long() * half
    distance = relative.abs()
    exact = half // 2
    far = exact + (torch.log(distance.float() / exact) / math.log(max_distance / exact)
                   * (half - exact)).long()
    far = far.clamp(max=half - 1)
    return buckets + torch.where(distance < exact, distance, far)


class RelativePositionBias(nn.Module):
    """A learned bias per head and bucket of relative distance (WavLM), computed once per forward and
    shared by every layer (each gates it with its own input, see :class:`SelfAttention`).

    Shapes: ``frames`` -> ``(num_heads, frames, frames)``.
    """

    def __init__(self, num_heads: int, num_buckets: int, max_distance: int):
        super().__init__()
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def forward(self, frames: int) -> torch.Tensor:
        positions = torch.arange(frames, device=self.embedding.weight.device)
        buckets = relative_position_buckets(positions[None, :] - positions[:, None], self.num_buckets,
                                            self.max_distance)
        return self.embedding(buckets).permute(2, 0, 1)


class SelfAttention(nn.Module):
    """Multi-head self-attention with separate q/k/v projections and a key padding mask from lengths.

    With ``gated_bias`` (WavLM), a relative position bias ``(num_heads, frames, frames)`` passed to
    :meth:`forward` is scaled per head and query frame by a gate computed from the attention's input:
    ``a * (b * gate_const - 1) + 2`` with ``a, b = sigmoid`` of two sums of ``gate_proj`` of each head's
    slice.
    """

    def __init__(self, d_model: int, num_heads: int, dropout: float, gated_bias: bool = False):
        super().__init__()
        self.num_heads, self.dropout = num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model)
        self.k_proj = nn.Linear(d_model, d_model)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        if gated_bias:
            self.gate_const = nn.Parameter(torch.ones(1, num_heads, 1, 1))
            self.gate_proj = nn.Linear(d_model // num_heads, 8)

    def gated(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        """``(batch, num_heads, frames, frames)``: the bias scaled by each query frame's gate."""
        batch, frames, _ = x.shape
        per_head = x.view(batch, frames, self.num_heads, -1).transpose(1, 2)  # (batch, heads, frames, dim)
        gates = self.gate_proj(per_head).view(batch, self.num_heads, frames, 2, 4).sum(-1)
        gate_a, gate_b = torch.sigmoid(gates).chunk(2, dim=-1)
        gate = gate_a * (gate_b * self.gate_const - 1.0) + 2.0  # (batch, heads, frames, 1)
        return gate * bias.unsqueeze(0)

    def forward(self, x: torch.Tensor, key_mask: Optional[torch.Tensor],
                position_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        batch, frames, d_model = x.shape

        def heads(projection: nn.Linear) -> torch.Tensor:
            return projection(x).view(batch, frames, self.num_heads, -1).transpose(1, 2)

        attn_mask = key_mask
        if position_bias is not None:
            attn_mask = self.gated(x, position_bias).to(x.dtype)
            if key_mask is not None:
                attn_mask = attn_mask.masked_fill(~key_mask, float("-inf"))
        dropout = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(heads(self.q_proj), heads(self.k_proj), heads(self.v_proj),
                                           attn_mask=attn_mask, dropout_p=dropout)
        return self.out_proj(y.transpose(1, 2).reshape(batch, frames, d_model))


class ContextLayer(nn.Module):
    """One Transformer layer, post-norm or pre-norm (``layer_norm_first``)."""

    def __init__(self, d_model: int, num_heads: int, ffn_dim: int, dropout: float, attention_dropout: float,
                 activation_dropout: float, layer_norm_first: bool, eps: float = 1e-5,
                 gated_bias: bool = False):
        super().__init__()
        self.layer_norm_first = layer_norm_first
        self.attention = SelfAttention(d_model, num_heads, attention_dropout, gated_bias)
        self.attention_norm = nn.LayerNorm(d_model, eps=eps)
        self.ffn_in = nn.Linear(d_model, ffn_dim)
        self.ffn_out = nn.Linear(ffn_dim, d_model)
        self.final_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.activation_dropout = nn.Dropout(activation_dropout)

    def feed_forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.ffn_out(self.activation_dropout(F.gelu(self.ffn_in(x)))))

    def forward(self, x: torch.Tensor, key_mask: Optional[torch.Tensor],
                position_bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        if self.layer_norm_first:
            x = x + self.dropout(self.attention(self.attention_norm(x), key_mask, position_bias))
            return x + self.feed_forward(self.final_norm(x))
        x = self.attention_norm(x + self.dropout(self.attention(x, key_mask, position_bias)))
        return self.final_norm(x + self.feed_forward(x))


class ContextEncoder(nn.Module):
    """Positional convolution + ``num_layers`` Transformer layers, with LayerDrop while training.

    Shapes: x ``(batch, frames, d_model)``, lengths ``(batch,)`` -> output ``(batch, frames, d_model)`` and
    the list of ``num_layers + 1`` hidden states (the layers' input, then each layer's output).
    ``pos_conv_layers`` > 0: data2vec-audio's stacked positional convolutions; ``relative_position_buckets``
    > 0: WavLM's gated relative position bias (see the module doc).
    """

    def __init__(self, d_model: int, num_layers: int, num_heads: int, ffn_dim: int, pos_conv_kernel: int,
                 pos_conv_groups: int, dropout: float = 0.1, attention_dropout: float = 0.1,
                 activation_dropout: float = 0.0, layer_norm_first: bool = False, layer_drop: float = 0.0,
                 eps: float = 1e-5, pos_conv_layers: int = 0, relative_position_buckets: int = 0,
                 relative_position_max_distance: int = 800):
        super().__init__()
        self.layer_norm_first, self.layer_drop = layer_norm_first, layer_drop
        if pos_conv_layers:
            self.pos_conv = StackedPositionalConv(d_model, pos_conv_kernel, pos_conv_groups, pos_conv_layers,
                                                  eps)
        else:
            self.pos_conv = PositionalConvEmbedding(d_model, pos_conv_kernel, pos_conv_groups)
        self.relative_position = None
        if relative_position_buckets:
            self.relative_position = RelativePositionBias(num_heads, relative_position_buckets,
                                                          relative_position_max_distance)
        self.layer_norm = nn.LayerNorm(d_model, eps=eps)
        self.dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            ContextLayer(d_model, num_heads, ffn_dim, dropout, attention_dropout, activation_dropout,
                         layer_norm_first, eps, gated_bias=bool(relative_position_buckets))
            for _ in range(num_layers))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, num_layers: Optional[int] = None) -> tuple:
        """Run the first ``num_layers`` layers (all by default; fewer for features from a middle layer)."""
        x = zero_padding(x, lengths)
        key_mask = length_mask(lengths.clamp(min=1), x.shape[1])[:, None, None, :]
        if isinstance(self.pos_conv, StackedPositionalConv):
            x = x + self.pos_conv(x, length_mask(lengths, x.shape[1]).unsqueeze(-1).to(x.dtype))
        else:
            x = x + self.pos_conv(x)
        if not self.layer_norm_first:
            x = self.layer_norm(x)
        x = self.dropout(x)
        bias = None if self.relative_position is None else self.relative_position(x.shape[1])
        hidden = [x]
        layers = self.layers if num_layers is None else self.layers[:num_layers]
        for layer in layers:
            if self.training and self.layer_drop > 0 and float(torch.rand(())) < self.layer_drop:
                hidden.append(x)
                continue
            x = layer(x, key_mask, bias)
            hidden.append(x)
        if self.layer_norm_first and len(layers) == len(self.layers):
            x = self.layer_norm(x)
            hidden[-1] = x
        return x, hidden
