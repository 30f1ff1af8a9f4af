"""ASR encoders: convolutional 4x front-end followed by Conformer or Transformer layers.

Every encoder maps ``(features, lengths)`` to ``(encoded, encoded_lengths)`` with absolute lengths, and is
batch-invariant: an utterance's valid output frames do not depend on what it was batched with.

Example:
    >>> enc = ConformerEncoder(80, d_model=64, num_heads=4, num_layers=2, ffn_dim=128, kernel_size=15)
    >>> y, lengths = enc(torch.randn(2, 200, 80), torch.tensor([200, 120]))
    >>> y.shape, lengths.tolist()
    (torch.Size([2, 49, 64]), [49, 29])
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from speechkit.errors import HparamsError
from speechkit.nn.conformer import ConformerBlock
from speechkit.nn.positional import SinusoidalPositionalEncoding
from speechkit.nn.subsampling import Conv2dSubsampling
from speechkit.nn.transformer import TransformerEncoderLayer


def _check_sizes(d_model: int, num_heads: int) -> None:
    if d_model % num_heads:
        raise HparamsError(f"d_model ({d_model}) must be a multiple of num_heads ({num_heads})")


class ConformerEncoder(nn.Module):
    """Conformer encoder: ``Conv2dSubsampling`` (4x) then ``num_layers`` :class:`ConformerBlock`.

    Args:
        input_size: feature dimension (e.g. 80).
        d_model: model width (keep a multiple of 8, and of ``num_heads``).
        num_heads: attention heads.
        num_layers: Conformer blocks.
        ffn_dim: feed-forward hidden size (typically ``4 * d_model``).
        kernel_size: depthwise convolution kernel (odd).
        dropout: dropout everywhere.
        subsampling_channels: front-end conv channels (default ``d_model``).
        conv_norm: ``"layer"`` or ``"instance"`` normalization in the convolution module.
        depthwise_subsampling: depthwise-separable second front-end convolution (faster; see
            :class:`~speechkit.nn.Conv2dSubsampling`).

    Positions are rotary (relative) inside each attention.

    Shapes: x ``(batch, frames, input_size)``, lengths ``(batch,)`` ->
    ``(batch, frames', d_model)``, ``(batch,)`` with ``frames' = ((frames - 1) // 2 - 1) // 2``.
    """

    def __init__(
        self,
        input_size: int,
        d_model: int = 144,
        num_heads: int = 4,
        num_layers: int = 12,
        ffn_dim: int = 576,
        kernel_size: int = 31,
        dropout: float = 0.1,
        subsampling_channels: Optional[int] = None,
        conv_norm: str = "layer",
        depthwise_subsampling: bool = False,
    ):
        super().__init__()
        _check_sizes(d_model, num_heads)
        self.d_model = d_model
        self.frontend = Conv2dSubsampling(input_size, d_model, subsampling_channels, depthwise_subsampling)
        self.input_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            ConformerBlock(
                d_model, num_heads, ffn_dim, kernel_size, dropout, rotary=True, conv_norm=conv_norm
            )
            for _ in range(num_layers)
        )

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, lengths = self.frontend(x, lengths)
        x = self.input_dropout(x)
        for layer in self.layers:
            x = layer(x, lengths)
        return x, lengths


class TransformerEncoder(nn.Module):
    """Transformer encoder: ``Conv2dSubsampling`` (4x), sinusoidal positions, pre-norm layers, final norm.

    Same arguments and shapes as :class:`ConformerEncoder` (without ``kernel_size``).
    """

    def __init__(
        self,
        input_size: int,
        d_model: int = 256,
        num_heads: int = 4,
        num_layers: int = 12,
        ffn_dim: int = 1024,
        dropout: float = 0.1,
        subsampling_channels: Optional[int] = None,
        depthwise_subsampling: bool = False,
    ):
        super().__init__()
        _check_sizes(d_model, num_heads)
        self.d_model = d_model
        self.frontend = Conv2dSubsampling(input_size, d_model, subsampling_channels, depthwise_subsampling)
        self.positions = SinusoidalPositionalEncoding(d_model)
        self.input_dropout = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            TransformerEncoderLayer(d_model, num_heads, ffn_dim, dropout) for _ in range(num_layers)
        )
        self.final_norm = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, lengths = self.frontend(x, lengths)
        x = self.input_dropout(self.positions(x))
        for layer in self.layers:
            x = layer(x, lengths)
        return self.final_norm(x), lengths


class CTCHead(nn.Module):
    """Linear projection to the vocabulary followed by a float32 log-softmax.

    Shapes: ``(batch, frames, d_model)`` -> ``(batch, frames, vocab_size)`` log-probabilities.

    Example:
        >>> CTCHead(16, 10)(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 10])
    """

    def __init__(self, d_model: int, vocab_size: int):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(x).float().log_softmax(dim=-1)
