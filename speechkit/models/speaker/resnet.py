"""ResNet34 speaker embedding as in WeSpeaker (Wang et al., ICASSP 2023): 2-D residual blocks over
(frequency, time), temporal statistics pooling, a linear embedding layer.

Length-aware: after every layer the frames past an item's (strided) length are set to zero, which is what the
zero padding of a convolution sees when the item is alone; pooling uses each item's valid frames only.

Example:
    >>> model = ResNetSpeaker(input_size=40, num_blocks=(1, 1, 1, 1), base_channels=4, embedding_size=16)
    >>> model(torch.randn(2, 50, 40), torch.tensor([50, 23])).shape
    torch.Size([2, 16])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from speechkit.models.speaker.layers import StatisticsPooling, check_features
from speechkit.nn.masks import length_mask


def strided_lengths(lengths: torch.Tensor, stride: int) -> torch.Tensor:
    """Frames after a kernel-3, padding-1 convolution with ``stride`` (1 + (L - 1) // stride; 0 stays 0)."""
    if stride == 1:
        return lengths
    return torch.where(lengths > 0, 1 + torch.div(lengths - 1, stride, rounding_mode="floor"), lengths)


def _masked(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``x`` (batch, C, freq, time) with the frames past each length set to 0."""
    return x.masked_fill(~length_mask(lengths, x.shape[-1])[:, None, None, :], 0.0)


class BasicBlock(nn.Module):
    """Two 3x3 convolutions with batch norm and a (projected) shortcut; ``stride`` in frequency and time."""

    def __init__(self, in_channels: int, channels: int, stride: int = 1):
        super().__init__()
        self.stride = stride
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride, bias=False),
                                          nn.BatchNorm2d(channels))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        out_lengths = strided_lengths(lengths, self.stride)
        out = _masked(torch.relu(self.bn1(self.conv1(x))), out_lengths)
        out = torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))
        return _masked(out, out_lengths), out_lengths


class ResNetSpeaker(nn.Module):
    """ResNet speaker embedding: ``forward(feats, lengths) -> (batch, embedding_size)``.

    Args:
        input_size: features per frame (80 in WeSpeaker).
        num_blocks: basic blocks per stage (ResNet34: 3, 4, 6, 3).
        base_channels: channels of the first stage (32), doubled at each of the next three.
        embedding_size: embedding dimension (256).
    """

    def __init__(self, input_size: int = 80, num_blocks: Sequence[int] = (3, 4, 6, 3),
                 base_channels: int = 32, embedding_size: int = 256):
        super().__init__()
        self.input_size, self.embedding_size = input_size, embedding_size
        self.conv1 = nn.Conv2d(1, base_channels, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(base_channels)
        blocks, channels = [], base_channels
        for stage, count in enumerate(num_blocks):
            width = base_channels * 2 ** stage
            for index in range(count):
                blocks.append(BasicBlock(channels, width, 2 if stage > 0 and index == 0 else 1))
                channels = width
        self.blocks = nn.ModuleList(blocks)
        frequency = input_size
        for _ in range(len(num_blocks) - 1):
            frequency = (frequency - 1) // 2 + 1
        self.pooling = StatisticsPooling()
        self.embedding = nn.Linear(2 * channels * frequency, embedding_size)

    def forward(self, feats: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        lengths = check_features(feats, lengths, self.input_size, "ResNetSpeaker")
        x = _masked(feats.transpose(1, 2).unsqueeze(1), lengths)  # (batch, 1, freq, time)
        x = _masked(torch.relu(self.bn1(self.conv1(x))), lengths)
        for block in self.blocks:
            x, lengths = block(x, lengths)
        x = x.flatten(1, 2)  # (batch, channels * freq, time)
        return self.embedding(self.pooling(x, lengths))


def resnet34(input_size: int = 80, embedding_size: int = 256) -> ResNetSpeaker:
    """WeSpeaker's ResNet34: stages of 3, 4, 6, 3 blocks, 32 to 256 channels."""
    return ResNetSpeaker(input_size, (3, 4, 6, 3), 32, embedding_size)
