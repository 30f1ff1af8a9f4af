"""The convolutional feature encoder: raw waveform -> one vector every 20 ms, with lengths.

Padding never reaches a valid frame: the convolutions have no padding, so a valid output frame reads only
valid input samples, and the group-norm variant takes its per-channel statistics over each item's valid frames
only (docs/design.md, contract 2). On unpadded input both variants equal the usual ``GroupNorm``/``LayerNorm``
stacks.

Example:
    >>> encoder = FeatureEncoder(channels=(32, 32), kernels=(10, 3), strides=(5, 2), norm="group")
    >>> features, lengths = encoder(torch.randn(2, 800), torch.tensor([800, 500]))
    >>> features.shape, lengths.tolist()
    (torch.Size([2, 79, 32]), [79, 49])
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.errors import DataError
from speechkit.nn.masks import check_lengths, length_mask, values_checkable


class MaskedGroupNorm(nn.Module):
    """Per-channel normalization over each item's valid time steps (``GroupNorm(C, C)`` without padding).

    Shapes: x ``(batch, channels, time)``, lengths ``(batch,)`` -> ``(batch, channels, time)``.
    """

    def __init__(self, channels: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        dtype, x = x.dtype, x.float()  # statistics in float32, also under bf16/fp16 autocast
        if values_checkable(lengths):
            # Lengths readable for free (CPU): the fused kernel on each item's valid frames, padding left 0.
            # (On an accelerator reading them would synchronize: the masked statistics below are used.)
            frames = x.shape[-1]
            if bool((lengths == frames).all()):
                return F.group_norm(x, x.shape[1], self.weight, self.bias, self.eps).to(dtype)
            # unbind, not x[i]: the backward of an indexed slice zero-fills a whole batch-sized gradient
            # per item; this way each item's gradient is zero-filled once, at its own size.
            items = [F.pad(F.group_norm(item[None, :, :length], x.shape[1], self.weight, self.bias, self.eps),
                           (0, frames - length))[0] for item, length in zip(x.unbind(0), lengths.tolist())]
            return torch.stack(items).to(dtype)
        return self.masked_statistics(x, lengths).to(dtype)

    def masked_statistics(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """The same normalization from masked sums, without reading ``lengths`` (for accelerators)."""
        valid = length_mask(lengths, x.shape[-1]).unsqueeze(1).to(x.dtype)
        count = lengths.clamp(min=1).to(x.dtype).view(-1, 1, 1)
        mean = (x * valid).sum(-1, keepdim=True) / count
        variance = ((x - mean) * valid).square().sum(-1, keepdim=True) / count
        # One pass for the output: x * scale + shift, with the affine parameters folded in.
        scale = torch.rsqrt(variance + self.eps) * self.weight.view(1, -1, 1)
        shift = self.bias.view(1, -1, 1) - mean * scale
        return torch.addcmul(shift, x, scale)


class ConvLayer(nn.Module):
    """One strided convolution, its normalization (``"group"``, ``"layer"`` or none) and a GELU."""

    def __init__(self, in_channels: int, out_channels: int, kernel: int, stride: int, bias: bool, norm: str):
        super().__init__()
        self.kernel, self.stride = kernel, stride
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=stride, bias=bias)
        self.norm = None
        if norm == "group":
            self.norm = MaskedGroupNorm(out_channels)
        elif norm == "layer":
            self.norm = nn.LayerNorm(out_channels)

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        return torch.div(lengths - self.kernel, self.stride, rounding_mode="floor").add(1).clamp(min=0)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        x = self.conv(x)
        lengths = self.output_lengths(lengths)
        if isinstance(self.norm, MaskedGroupNorm):
            x = self.norm(x, lengths)
        elif self.norm is not None:
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        return F.gelu(x), lengths


class FeatureEncoder(nn.Module):
    """Stacked strided convolutions from samples to frames (7 layers, 320x downsampling in BASE).

    Arguments:
        channels, kernels, strides: one entry per convolution.
        norm: ``"group"`` (a per-channel norm after the first convolution only) or ``"layer"`` (a layer norm
            after every one).
        bias: convolutions with a bias (the layer-norm variant has one in the published models).

    Shapes: wav ``(batch, samples)``, lengths ``(batch,)`` int64 -> features ``(batch, frames, channels[-1])``
    and frame lengths ``(batch,)``.
    """

    def __init__(self, channels: tuple, kernels: tuple, strides: tuple, norm: str = "group",
                 bias: bool = False):
        super().__init__()
        layers = []
        for index, (out_channels, kernel, stride) in enumerate(zip(channels, kernels, strides)):
            layer_norm = norm if norm == "layer" or index == 0 else "none"
            in_channels = channels[index - 1] if index else 1
            layers.append(ConvLayer(in_channels, out_channels, kernel, stride, bias, layer_norm))
        self.layers = nn.ModuleList(layers)
        self.receptive_field = 1
        for kernel, stride in zip(reversed(kernels), reversed(strides)):
            self.receptive_field = (self.receptive_field - 1) * stride + kernel

    def output_lengths(self, lengths: torch.Tensor) -> torch.Tensor:
        """Frames produced from ``lengths`` samples."""
        for layer in self.layers:
            lengths = layer.output_lengths(lengths)
        return lengths

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor) -> tuple:
        if wav.dim() != 2:
            raise DataError(f"the wav2vec 2.0 feature encoder takes waveforms (batch, samples), got shape "
                            f"{tuple(wav.shape)}")
        check_lengths(lengths, wav.shape[1], wav.shape[0], "wav lengths")
        if values_checkable(lengths) and lengths.numel() and int(lengths.min()) < self.receptive_field:
            raise DataError(f"an utterance has {int(lengths.min())} samples; the wav2vec 2.0 feature encoder "
                            f"needs at least {self.receptive_field} (filter out shorter audio)")
        x = wav.unsqueeze(1)
        for layer in self.layers:
            x, lengths = layer(x, lengths)
        return x.transpose(1, 2), lengths


class WaveformNormalization(nn.Module):
    """Zero mean and unit variance over each waveform's valid samples (what most published wav2vec 2.0
    models were trained on); padding stays zero.

    Shapes: wav ``(batch, samples)``, lengths ``(batch,)`` -> ``(wav, lengths)``.

    Example:
        >>> wav, _ = WaveformNormalization(eps=0.0)(torch.tensor([[1.0, 3.0, 9.0]]), torch.tensor([2]))
        >>> wav.tolist()
        [[-1.0, 1.0, 0.0]]
    """

    def __init__(self, eps: float = 1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, wav: torch.Tensor, lengths: torch.Tensor) -> tuple:
        valid = length_mask(lengths, wav.shape[1]).to(wav.dtype)
        count = lengths.clamp(min=1).to(wav.dtype).unsqueeze(1)
        mean = (wav * valid).sum(1, keepdim=True) / count
        variance = ((wav - mean).square() * valid).sum(1, keepdim=True) / count
        return (wav - mean) * torch.rsqrt(variance + self.eps) * valid, lengths
