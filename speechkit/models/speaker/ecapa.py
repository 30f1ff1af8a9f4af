"""ECAPA-TDNN (Desplanques, Thienpondt and Demuynck, Interspeech 2020): a speaker embedding from filterbanks.

Layout as published: a TDNN layer, three SE-Res2Blocks with dilations 2, 3, 4 (1x1 TDNN, Res2Net dilated
convolutions over ``res2net_scale`` channel groups, 1x1 TDNN, squeeze-excitation, residual), multi-layer
feature aggregation (the outputs of the SE-Res2Blocks concatenated, then a 1x1 TDNN), attentive statistics
pooling with global context, batch norm and a linear layer to the embedding. Module names follow the widely
used published implementation, so that its checkpoints map onto this model key by key
(:mod:`speechkit.pretrained.speechbrain_import`).

Example:
    >>> model = ECAPATDNN(input_size=40, channels=(64, 64, 64, 64, 192), lin_neurons=32)
    >>> model(torch.randn(3, 120, 40), torch.tensor([120, 80, 50])).shape
    torch.Size([3, 32])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import torch
from torch import nn

from speechkit.models.speaker.layers import AttentiveStatisticsPooling, TDNNBlock, check_features, reflect_pad
from speechkit.nn.masks import length_mask

#: Sizes of the published model (C = 1024) and a small one for CPU training.
PRESETS = {
    "paper": dict(channels=(1024, 1024, 1024, 1024, 3072), attention_channels=128, lin_neurons=192,
                  res2net_scale=8, se_channels=128),
    "small": dict(channels=(128, 128, 128, 128, 384), attention_channels=32, lin_neurons=128, res2net_scale=4,
                  se_channels=32),
    "tiny": dict(channels=(32, 32, 32, 32, 96), attention_channels=16, lin_neurons=16, res2net_scale=4,
                 se_channels=8),
}


class Res2NetBlock(nn.Module):
    """Res2Net: split channels into ``scale`` groups; group i > 0 is convolved after adding group i - 1's
    output, which grows the receptive field within one layer. (batch, C, time) -> (batch, C, time)."""

    def __init__(self, in_channels: int, out_channels: int, scale: int = 8, kernel_size: int = 3,
                 dilation: int = 1):
        super().__init__()
        if in_channels % scale or out_channels % scale:
            raise ValueError(f"channels ({in_channels}, {out_channels}) must be divisible by scale {scale}")
        self.scale = scale
        self.blocks = nn.ModuleList(TDNNBlock(in_channels // scale, out_channels // scale, kernel_size,
                                              dilation)
                                    for _ in range(scale - 1))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        outputs = []
        previous = None
        for index, chunk in enumerate(torch.chunk(x, self.scale, dim=1)):
            if index == 0:
                current = chunk
            elif index == 1:
                current = self.blocks[0](chunk, lengths)
            else:
                current = self.blocks[index - 1](chunk + previous, lengths)
            outputs.append(current)
            previous = current
        return torch.cat(outputs, dim=1)


class SEBlock(nn.Module):
    """Squeeze-excitation: channel gains from the mean over each item's valid frames."""

    def __init__(self, in_channels: int, se_channels: int, out_channels: int):
        super().__init__()
        self.conv1 = nn.Conv1d(in_channels, se_channels, kernel_size=1)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv1d(se_channels, out_channels, kernel_size=1)
        self.sigmoid = nn.Sigmoid()

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = length_mask(lengths, x.shape[-1]).unsqueeze(1)
        count = mask.sum(dim=2, keepdim=True).clamp(min=1).to(x.dtype)
        squeezed = x.masked_fill(~mask, 0.0).sum(dim=2, keepdim=True) / count
        return self.sigmoid(self.conv2(self.relu(self.conv1(squeezed)))) * x


class SERes2NetBlock(nn.Module):
    """1x1 TDNN, Res2Net, 1x1 TDNN, squeeze-excitation, plus the (projected) input."""

    def __init__(self, in_channels: int, out_channels: int, res2net_scale: int = 8, se_channels: int = 128,
                 kernel_size: int = 3, dilation: int = 1):
        super().__init__()
        self.tdnn1 = TDNNBlock(in_channels, out_channels, 1, 1)
        self.res2net_block = Res2NetBlock(out_channels, out_channels, res2net_scale, kernel_size, dilation)
        self.tdnn2 = TDNNBlock(out_channels, out_channels, 1, 1)
        self.se_block = SEBlock(out_channels, se_channels, out_channels)
        self.shortcut = nn.Conv1d(in_channels, out_channels, 1) if in_channels != out_channels else None

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        residual = x if self.shortcut is None else self.shortcut(x)
        x = self.tdnn2(self.res2net_block(self.tdnn1(x, lengths), lengths), lengths)
        return self.se_block(x, lengths) + residual


class ECAPATDNN(nn.Module):
    """ECAPA-TDNN speaker embedding: ``forward(feats, lengths) -> (batch, lin_neurons)``.

    Args:
        input_size: features per frame (80 log mels in the paper).
        channels: output channels of the first TDNN, the three SE-Res2Blocks, and the aggregation layer.
        kernel_sizes, dilations: of those five layers (published: 5, 3, 3, 3, 1 and 1, 2, 3, 4, 1).
        attention_channels: bottleneck of the attentive pooling.
        res2net_scale, se_channels: Res2Net groups and squeeze-excitation bottleneck.
        lin_neurons: embedding size.
        global_context: attentive pooling sees the utterance's mean and deviation too.

    ``feats`` is (batch, frames, input_size), ``lengths`` (batch,) int64 valid frames.
    """

    def __init__(self, input_size: int = 80, channels: Sequence[int] = (1024, 1024, 1024, 1024, 3072),
                 kernel_sizes: Sequence[int] = (5, 3, 3, 3, 1), dilations: Sequence[int] = (1, 2, 3, 4, 1),
                 attention_channels: int = 128, res2net_scale: int = 8, se_channels: int = 128,
                 lin_neurons: int = 192, global_context: bool = True):
        super().__init__()
        if not len(channels) == len(kernel_sizes) == len(dilations) or len(channels) < 3:
            raise ValueError("channels, kernel_sizes and dilations need one entry per layer (at least 3)")
        self.input_size, self.embedding_size = input_size, lin_neurons
        self.blocks = nn.ModuleList([TDNNBlock(input_size, channels[0], kernel_sizes[0], dilations[0])])
        for index in range(1, len(channels) - 1):
            self.blocks.append(SERes2NetBlock(channels[index - 1], channels[index], res2net_scale,
                                              se_channels, kernel_sizes[index], dilations[index]))
        self.mfa = TDNNBlock(sum(channels[1:-1]), channels[-1], kernel_sizes[-1], dilations[-1])
        self.asp = AttentiveStatisticsPooling(channels[-1], attention_channels, global_context)
        self.asp_bn = nn.BatchNorm1d(channels[-1] * 2)
        self.fc = nn.Conv1d(channels[-1] * 2, lin_neurons, kernel_size=1)

    @classmethod
    def from_preset(cls, name: str = "small", input_size: int = 80, overrides: Optional[dict] = None):
        """A model of :data:`PRESETS` ``name`` (``paper``, ``small``, ``tiny``), single sizes overridden."""
        if name not in PRESETS:
            raise ValueError(f"unknown ECAPA-TDNN preset {name!r}; known: {', '.join(PRESETS)}")
        return cls(input_size=input_size, **{**PRESETS[name], **(overrides or {})})

    def forward(self, feats: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        lengths = check_features(feats, lengths, self.input_size, "ECAPATDNN")
        x = feats.transpose(1, 2)
        outputs = []
        for block in self.blocks:
            x = block(x, lengths)
            outputs.append(x)
        x = self.mfa(torch.cat(outputs[1:], dim=1), lengths)
        x = self.asp_bn(self.asp(x, lengths))
        return self.fc(x.unsqueeze(2)).squeeze(2)


__all__ = ["ECAPATDNN", "PRESETS", "Res2NetBlock", "SEBlock", "SERes2NetBlock", "reflect_pad"]
