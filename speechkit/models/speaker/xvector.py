"""The x-vector TDNN (Snyder et al., ICASSP 2018): five frame-level TDNN layers, statistics pooling, and the
segment-level layer whose output is the embedding.

Frame layers keep the length ("same" convolutions with per-item reflect padding), so items of any length
give embeddings and an item's embedding does not depend on its batch.

Example:
    >>> model = XVector(input_size=24, channels=(32, 32, 32, 32, 96), embedding_size=16)
    >>> model(torch.randn(2, 60, 24), torch.tensor([60, 33])).shape
    torch.Size([2, 16])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from speechkit.models.speaker.layers import StatisticsPooling, TDNNBlock, check_features


class XVector(nn.Module):
    """x-vector: ``forward(feats, lengths) -> (batch, embedding_size)``.

    Args:
        input_size: features per frame.
        channels, kernel_sizes, dilations: the five frame-level layers (published: 512 x 4 then 1500; kernels
            5, 3, 3, 1, 1; dilations 1, 2, 3, 1, 1).
        embedding_size: the segment-level layer (the x-vector, 512).
    """

    def __init__(self, input_size: int = 24, channels: Sequence[int] = (512, 512, 512, 512, 1500),
                 kernel_sizes: Sequence[int] = (5, 3, 3, 1, 1), dilations: Sequence[int] = (1, 2, 3, 1, 1),
                 embedding_size: int = 512):
        super().__init__()
        if not len(channels) == len(kernel_sizes) == len(dilations):
            raise ValueError("channels, kernel_sizes and dilations need one entry per layer")
        self.input_size, self.embedding_size = input_size, embedding_size
        sizes = [input_size] + list(channels)
        self.blocks = nn.ModuleList(TDNNBlock(sizes[i], sizes[i + 1], kernel_sizes[i], dilations[i])
                                    for i in range(len(channels)))
        self.pooling = StatisticsPooling()
        self.embedding = nn.Linear(2 * channels[-1], embedding_size)

    def forward(self, feats: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        lengths = check_features(feats, lengths, self.input_size, "XVector")
        x = feats.transpose(1, 2)
        for block in self.blocks:
            x = block(x, lengths)
        return self.embedding(self.pooling(x, lengths))
