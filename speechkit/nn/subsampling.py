"""Convolutional front-end: two 3x3 convolutions with stride 2 (4x fewer frames), then a projection.

The convolutions use no padding along time, so output frame ``t`` reads input frames ``4t .. 4t+6`` only; the
valid output frames therefore never read padding, and the output lengths are exact:
``out = ((in - 1) // 2 - 1) // 2``.

Example:
    >>> sub = Conv2dSubsampling(input_size=80, d_model=144)
    >>> y, lengths = sub(torch.randn(2, 100, 80), torch.tensor([100, 37]))
    >>> y.shape, lengths.tolist()
    (torch.Size([2, 24, 144]), [24, 8])
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from speechkit.errors import DataError
from speechkit.nn.masks import check_features

MIN_INPUT_FRAMES = 7


def subsampled_lengths(lengths: torch.Tensor) -> torch.Tensor:
    """Number of output frames of :class:`Conv2dSubsampling` for ``lengths`` input frames."""
    return torch.div(torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2, rounding_mode="floor").clamp(
        min=0
    )


class Conv2dSubsampling(nn.Module):
    """Two ``Conv2d(kernel 3, stride 2) + ReLU`` layers over (time, feature), then ``Linear`` to ``d_model``.

    Args:
        input_size: feature dimension (e.g. 80 filterbanks).
        d_model: output width.
        channels: convolution channels (default ``d_model``).
        depthwise: make the second convolution depthwise-separable (much cheaper, same lengths).

    Shapes: x ``(batch, time, input_size)``, lengths ``(batch,)`` ->
    ``(batch, time', d_model)``, ``(batch,)`` with ``time' = ((time - 1) // 2 - 1) // 2``.
    """

    def __init__(
        self, input_size: int, d_model: int, channels: Optional[int] = None, depthwise: bool = False
    ):
        super().__init__()
        channels = channels or d_model
        self.input_size = input_size
        if depthwise:
            # Depthwise 3x3 then pointwise 1x1: about 9x fewer multiplies than a full 3x3 (the front-end's
            # second convolution otherwise costs as much as several Conformer layers).
            second = [
                nn.Conv2d(channels, channels, 3, stride=2, groups=channels),
                nn.Conv2d(channels, channels, 1),
            ]
        else:
            second = [nn.Conv2d(channels, channels, 3, stride=2)]
        self.conv = nn.Sequential(nn.Conv2d(1, channels, 3, stride=2), nn.ReLU(), *second, nn.ReLU())
        freq = ((input_size - 1) // 2 - 1) // 2
        if freq < 1:
            raise DataError(f"Conv2dSubsampling needs input_size >= 7 features, got {input_size}")
        self.proj = nn.Linear(channels * freq, d_model)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        check_features(x, lengths, self.input_size, MIN_INPUT_FRAMES, "Conv2dSubsampling (4x)")
        if x.shape[1] < MIN_INPUT_FRAMES:
            x = nn.functional.pad(x, (0, 0, 0, MIN_INPUT_FRAMES - x.shape[1]))
        y = self.conv(x.unsqueeze(1))  # (batch, channels, time', freq')
        batch, channels, time, freq = y.shape
        y = self.proj(y.permute(0, 2, 1, 3).reshape(batch, time, channels * freq))
        return y, subsampled_lengths(lengths)
