"""Position-wise feed-forward block (per frame, hence batch-invariant by construction).

Example:
    >>> FeedForward(16, 64)(torch.randn(2, 5, 16)).shape
    torch.Size([2, 5, 16])
"""

from __future__ import annotations

import torch
from torch import nn


class FeedForward(nn.Module):
    """``Linear(d_model, ffn_dim) -> activation -> dropout -> Linear(ffn_dim, d_model) -> dropout``.

    Shapes: ``(batch, time, d_model)`` -> ``(batch, time, d_model)``.
    """

    def __init__(self, d_model: int, ffn_dim: int, dropout: float = 0.0, activation: str = "silu"):
        super().__init__()
        activations = {"silu": nn.SiLU, "relu": nn.ReLU, "gelu": nn.GELU}
        self.net = nn.Sequential(
            nn.Linear(d_model, ffn_dim),
            activations[activation](),
            nn.Dropout(dropout),
            nn.Linear(ffn_dim, d_model),
            nn.Dropout(dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
