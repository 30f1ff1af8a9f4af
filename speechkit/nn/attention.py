"""Multi-head attention on ``scaled_dot_product_attention`` with key padding masks built from lengths.

Example:
    >>> mha = MultiHeadAttention(d_model=16, num_heads=2)
    >>> x = torch.randn(2, 7, 16)
    >>> mha(x, key_lengths=torch.tensor([7, 3])).shape
    torch.Size([2, 7, 16])
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.errors import HparamsError
from speechkit.nn.masks import length_mask
from speechkit.nn.positional import RotaryEmbedding


def attention_mask(
    key_lengths: Optional[torch.Tensor], num_queries: int, num_keys: int, causal: bool, device
) -> Optional[torch.Tensor]:
    """Boolean mask ``(batch or 1, 1, queries, keys)``, True where a query may attend to a key.

    An item with zero keys keeps its first key visible, so its (meaningless) output stays finite, not NaN.
    """
    mask = None
    if key_lengths is not None:
        valid = length_mask(key_lengths.clamp(min=1), num_keys)
        mask = valid[:, None, None, :]
    if causal:
        allowed = torch.ones(num_queries, num_keys, dtype=torch.bool, device=device).tril(
            num_keys - num_queries
        )
        allowed = allowed[None, None]
        mask = allowed if mask is None else mask & allowed
    return mask


def scaled_dot_product_attention_aligned(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: Optional[torch.Tensor] = None,
    dropout_p: float = 0.0,
    multiple: int = 8,
) -> torch.Tensor:
    """``scaled_dot_product_attention`` with the head size zero-padded to a multiple of ``multiple``.

    Fused GPU attention kernels need 16-bit heads sized in multiples of 8 and otherwise fall back to the slow
    path (d_model 144 with 4 heads gives heads of 36). Zero channels change no dot product, the scale stays
    that of the true head size, and the padded output channels are dropped, so the result is the same.

    Shapes: q ``(batch, heads, t_q, head_dim)``, k/v ``(batch, heads, t_k, head_dim)`` -> like q.
    """
    head_dim = q.shape[-1]
    pad = (-head_dim) % multiple
    if pad == 0:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)
    q, k, v = (F.pad(t, (0, pad)) for t in (q, k, v))
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=head_dim**-0.5
    )
    return out[..., :head_dim]


class MultiHeadAttention(nn.Module):
    """Multi-head (self or cross) attention whose keys are masked by their absolute lengths.

    Args:
        d_model: model width (a multiple of ``num_heads``).
        num_heads: number of heads.
        dropout: attention-weight dropout (training only).
        rotary: rotate queries and keys by their positions (relative positional encoding).
        bias: use biases in the projections.

    Shapes:
        query ``(batch, t_q, d_model)``; key/value ``(batch, t_k, d_model)`` (default: the query, i.e.
        self-attention); key_lengths ``(batch,)`` -> ``(batch, t_q, d_model)``.
    """

    def __init__(
        self, d_model: int, num_heads: int, dropout: float = 0.0, rotary: bool = False, bias: bool = True
    ):
        super().__init__()
        if d_model % num_heads:
            raise HparamsError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")
        self.d_model = d_model
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.dropout = dropout
        # One projection for q, k and v: a single matmul in self-attention, sliced for cross-attention.
        self.in_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.rotary = RotaryEmbedding(self.head_dim) if rotary else None

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, _ = x.shape
        return x.view(batch, time, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(
        self,
        query: torch.Tensor,
        key: Optional[torch.Tensor] = None,
        key_lengths: Optional[torch.Tensor] = None,
        causal: bool = False,
    ) -> torch.Tensor:
        if key is None:
            q, k, v = self.in_proj(query).chunk(3, dim=-1)
        else:
            w_q, w_kv = self.in_proj.weight.split([self.d_model, 2 * self.d_model])
            b_q, b_kv = (
                (None, None)
                if self.in_proj.bias is None
                else self.in_proj.bias.split([self.d_model, 2 * self.d_model])
            )
            q = F.linear(query, w_q, b_q)
            k, v = F.linear(key, w_kv, b_kv).chunk(2, dim=-1)
        q, k, v = self._split_heads(q), self._split_heads(k), self._split_heads(v)
        if self.rotary is not None:
            q, k = self.rotary(q, k)
        mask = attention_mask(key_lengths, q.shape[2], k.shape[2], causal, query.device)
        dropout = self.dropout if self.training else 0.0
        if q.device.type == "cuda":
            out = scaled_dot_product_attention_aligned(q, k, v, mask, dropout)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
        batch, _, time, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(batch, time, self.d_model))
