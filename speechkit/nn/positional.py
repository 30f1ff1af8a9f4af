"""Positional encodings: absolute sinusoids added to the input, and rotary (relative) embeddings.

Items are left-aligned in a padded batch, so position ``t`` means the same frame in every batch composition
and both encodings are batch-invariant. Rotary embeddings rotate queries and keys so that attention scores
depend only on the distance between frames, and they work with ``scaled_dot_product_attention`` unchanged.

Example:
    >>> pe = SinusoidalPositionalEncoding(8)
    >>> pe(torch.zeros(2, 5, 8)).shape
    torch.Size([2, 5, 8])
"""

from __future__ import annotations

import math

import torch
from torch import nn

from speechkit.errors import HparamsError


def sinusoid_table(num_positions: int, dim: int, device=None, dtype=torch.float32) -> torch.Tensor:
    """``(num_positions, dim)`` table: sin on even channels, cos on odd ones, geometric wavelengths."""
    position = torch.arange(num_positions, device=device, dtype=torch.float32).unsqueeze(1)
    frequencies = torch.exp(
        torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10000.0) / dim)
    )
    table = torch.zeros(num_positions, dim, device=device, dtype=torch.float32)
    table[:, 0::2] = torch.sin(position * frequencies)
    table[:, 1::2] = torch.cos(position * frequencies)
    return table.to(dtype)


class SinusoidalPositionalEncoding(nn.Module):
    """Add fixed sinusoidal absolute positions to ``x`` ``(batch, time, d_model)`` scaled by sqrt(d_model).

    The table grows on demand, so no maximum length must be chosen in advance.
    """

    def __init__(self, d_model: int, scale_input: bool = True):
        super().__init__()
        if d_model % 2:
            raise HparamsError(f"d_model must be even for sinusoidal positions, got {d_model}")
        self.d_model = d_model
        self.input_scale = math.sqrt(d_model) if scale_input else 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        table = sinusoid_table(x.shape[1], self.d_model, device=x.device, dtype=x.dtype)
        return x * self.input_scale + table.unsqueeze(0)


class RotaryEmbedding(nn.Module):
    """Rotary position embedding for attention heads of size ``head_dim`` (relative positions).

    ``forward(q, k)`` with q, k ``(batch, heads, time, head_dim)`` returns them rotated by their frame index.
    """

    def __init__(self, head_dim: int, base: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise HparamsError(f"rotary embeddings need an even head size, got {head_dim}")
        self.head_dim = head_dim
        self.base = base

    def _cos_sin(self, length: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        inv_freq = 1.0 / (
            self.base
            ** (torch.arange(0, self.head_dim, 2, device=device, dtype=torch.float32) / self.head_dim)
        )
        angles = torch.arange(length, device=device, dtype=torch.float32).unsqueeze(1) * inv_freq
        angles = torch.cat([angles, angles], dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        first, second = x.chunk(2, dim=-1)
        return torch.cat([-second, first], dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self._cos_sin(max(q.shape[-2], k.shape[-2]), q.device, q.dtype)
        cos_q, sin_q = cos[: q.shape[-2]], sin[: q.shape[-2]]
        cos_k, sin_k = cos[: k.shape[-2]], sin[: k.shape[-2]]
        q = q * cos_q + self._rotate_half(q) * sin_q
        k = k * cos_k + self._rotate_half(k) * sin_k
        return q, k
