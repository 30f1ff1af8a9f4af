"""Conv-TasNet: a learned filterbank encoder, a temporal convolutional network that masks it, and a decoder.

Batch-invariant (docs/design.md, contract 2): the global layer norm takes its statistics over each mixture's
valid frames only, and every convolution whose receptive field spans frames sees zeros past an item's last
frame, as it would with that item alone; the encoder and decoder have no bias, so masked frames add nothing.
A mixture separated alone or padded in a batch gives the same sources.

Presets (``PRESETS``): ``paper`` is the published best configuration (N=512, L=16, B=128, H=512, P=3, X=8,
R=3, gLN); ``small`` trains on a CPU in minutes at 8 kHz; ``tiny`` is for smoke tests.

Example:
    >>> model = ConvTasNet.from_preset("small", num_speakers=2)
    >>> mixture = torch.randn(2, 8000)
    >>> model(mixture, torch.tensor([8000, 5000])).shape
    torch.Size([2, 2, 8000])
"""
from __future__ import annotations

import torch
from torch import nn

from speechkit.nn.masks import length_mask

#: name -> ConvTasNet keyword arguments (num_speakers apart).
PRESETS = {
    "paper": dict(enc_dim=512, kernel_size=16, bottleneck_dim=128, hidden_dim=512, conv_kernel=3,
                  blocks_per_repeat=8, repeats=3),
    "small": dict(enc_dim=128, kernel_size=32, bottleneck_dim=64, hidden_dim=128, conv_kernel=3,
                  blocks_per_repeat=6, repeats=2),
    # For smoke tests: separates nothing well, trains in a second.
    "tiny": dict(enc_dim=16, kernel_size=16, bottleneck_dim=8, hidden_dim=16, conv_kernel=3,
                 blocks_per_repeat=2, repeats=1),
}


class GlobalLayerNorm(nn.Module):
    """gLN: normalize each item over all channels and its valid frames, then a per-channel affine map.

    Input ``(batch, channels, frames)`` and ``mask`` ``(batch, 1, frames)``; the output is zero past each
    length. ``mask=None`` means every frame is valid: PyTorch's fused ``group_norm`` with one group computes
    the same statistics in one pass (the masked form costs several elementwise passes, forward and backward).
    """

    def __init__(self, channels: int, eps: float = 1e-8):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(1, channels, 1))
        self.bias = nn.Parameter(torch.zeros(1, channels, 1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor = None, zero_padding: bool = True) -> torch.Tensor:
        """``mask``: (batch, 1, frames) float, 1 on valid frames, or None when all are. ``zero_padding=False``
        leaves the frames past each length as they come (for a consumer that works frame by frame)."""
        if mask is None:
            return nn.functional.group_norm(x, 1, self.weight.view(-1), self.bias.view(-1), self.eps)
        count = (mask.sum(dim=(1, 2), keepdim=True) * x.shape[1]).clamp(min=1.0)
        mean = (x * mask).sum(dim=(1, 2), keepdim=True) / count
        centered = (x - mean) * mask
        var = (centered * centered).sum(dim=(1, 2), keepdim=True) / count
        # Fold the normalization into a per-item, per-channel scale and shift: one addcmul over the frames.
        scale = self.weight * torch.rsqrt(var + self.eps)  # (batch, channels, 1)
        out = torch.addcmul(self.bias - mean * scale, x, scale)
        return out * mask if zero_padding else out


class DepthwiseDilatedConv(nn.Module):
    """Same-length dilated depthwise convolution, written as a sum of ``kernel`` shifted products.

    Equal to ``nn.Conv1d(channels, channels, kernel, dilation=d, padding=d*(kernel-1)//2, groups=channels)``
    (same parameter shapes), and as fast or faster in training on CPU (benchmarks/separation.py, small preset,
    torch 2.14: 1.1x in fp32 and bf16). Input and output ``(batch, channels, frames)``.
    """

    def __init__(self, channels: int, kernel: int, dilation: int):
        super().__init__()
        self.kernel, self.dilation = kernel, dilation
        self.weight = nn.Parameter(torch.empty(channels, 1, kernel))
        self.bias = nn.Parameter(torch.empty(channels))
        reference = nn.Conv1d(channels, channels, kernel, groups=channels)  # PyTorch's initialization
        with torch.no_grad():
            self.weight.copy_(reference.weight)
            self.bias.copy_(reference.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        frames, half = x.shape[-1], self.dilation * (self.kernel - 1) // 2
        padded = nn.functional.pad(x, (half, half))
        weight = self.weight.to(x.dtype).unsqueeze(0)  # (1, channels, 1, kernel)
        # addcmul writes each tap's product into the sum in one pass (a multiply then an add would take two).
        out = torch.addcmul(self.bias.to(x.dtype).view(1, -1, 1), weight[..., 0], padded[..., :frames])
        for k in range(1, self.kernel):
            start = k * self.dilation
            out = out.addcmul_(weight[..., k], padded[..., start:start + frames])
        return out


class TemporalBlock(nn.Module):
    """1x1 conv -> PReLU -> gLN -> dilated depthwise conv -> PReLU -> gLN -> (residual, skip) 1x1 convs."""

    def __init__(self, bottleneck_dim: int, hidden_dim: int, kernel: int, dilation: int, residual: bool):
        super().__init__()
        self.expand = nn.Conv1d(bottleneck_dim, hidden_dim, 1)
        self.act1, self.norm1 = nn.PReLU(), GlobalLayerNorm(hidden_dim)
        self.depthwise = DepthwiseDilatedConv(hidden_dim, kernel, dilation)
        self.act2, self.norm2 = nn.PReLU(), GlobalLayerNorm(hidden_dim)
        self.residual = nn.Conv1d(hidden_dim, bottleneck_dim, 1) if residual else None
        self.skip = nn.Conv1d(hidden_dim, bottleneck_dim, 1)

    def forward(self, x: torch.Tensor, mask: torch.Tensor = None) -> tuple:
        y = self.norm1(self.act1(self.expand(x)), mask)  # zero past the length: the depthwise conv's padding
        # Only 1x1 convolutions read norm2's output: what lies past a length never reaches a valid frame.
        y = self.norm2(self.act2(self.depthwise(y)), mask, zero_padding=False)
        out = x + self.residual(y) if self.residual is not None else x
        return out, self.skip(y)


def frame_count(lengths: torch.Tensor, kernel_size: int, stride: int) -> torch.Tensor:
    """Encoder frames of each item: enough to cover its samples (the last frame may run past them)."""
    extra = (lengths - kernel_size).clamp(min=0)
    return torch.div(extra + stride - 1, stride, rounding_mode="floor") + 1


class ConvTasNet(nn.Module):
    """Conv-TasNet separator.

    Args:
        num_speakers: sources to estimate (C).
        enc_dim: filters of the encoder (N). kernel_size: their length in samples (L); stride L/2.
        bottleneck_dim: channels between blocks (B); also the skip-connection channels (Sc).
        hidden_dim: channels inside a block (H). conv_kernel: depthwise kernel (P).
        blocks_per_repeat: blocks with dilations 1, 2, ..., 2**(X-1) (X). repeats: stacks of them (R).
        mask_activation: ``"relu"`` or ``"sigmoid"``.

    ``forward(mixture (batch, time), lengths (batch,))`` -> estimates (batch, num_speakers, time), zero past
    each length.
    """

    def __init__(self, num_speakers: int = 2, enc_dim: int = 512, kernel_size: int = 16,
                 bottleneck_dim: int = 128, hidden_dim: int = 512, conv_kernel: int = 3,
                 blocks_per_repeat: int = 8, repeats: int = 3, mask_activation: str = "relu"):
        super().__init__()
        if kernel_size % 2:
            raise ValueError(f"kernel_size must be even (stride is kernel_size / 2), got {kernel_size}")
        if conv_kernel % 2 == 0:
            raise ValueError(f"conv_kernel must be odd (same-length dilated convolutions), got {conv_kernel}")
        if mask_activation not in ("relu", "sigmoid"):
            raise ValueError(f"mask_activation must be relu or sigmoid, got {mask_activation!r}")
        self.num_speakers, self.enc_dim = num_speakers, enc_dim
        self.kernel_size, self.stride = kernel_size, kernel_size // 2
        self.encoder = nn.Conv1d(1, enc_dim, kernel_size, stride=self.stride, bias=False)
        self.input_norm = GlobalLayerNorm(enc_dim)
        self.bottleneck = nn.Conv1d(enc_dim, bottleneck_dim, 1)
        count = blocks_per_repeat * repeats
        self.blocks = nn.ModuleList(
            TemporalBlock(bottleneck_dim, hidden_dim, conv_kernel, 2 ** (i % blocks_per_repeat),
                          residual=i < count - 1)  # the last block's residual output is never used
            for i in range(count))
        self.mask_act = nn.PReLU()
        self.mask_conv = nn.Conv1d(bottleneck_dim, num_speakers * enc_dim, 1)
        self.mask_activation = mask_activation
        self.decoder = nn.ConvTranspose1d(enc_dim, 1, kernel_size, stride=self.stride, bias=False)

    @classmethod
    def from_preset(cls, name: str, num_speakers: int = 2, overrides: dict = None, **sizes) -> ConvTasNet:
        """``ConvTasNet.from_preset("paper", num_speakers=3)``; ``overrides`` (a dict, handy in YAML) and
        keyword arguments change single sizes."""
        if name not in PRESETS:
            raise ValueError(f"unknown Conv-TasNet preset {name!r}; known: {', '.join(PRESETS)}")
        return cls(num_speakers=num_speakers, **{**PRESETS[name], **(overrides or {}), **sizes})

    def forward(self, mixture: torch.Tensor, lengths: torch.Tensor = None) -> torch.Tensor:
        batch, time = mixture.shape
        if lengths is None:
            lengths = torch.full((batch,), time, dtype=torch.int64, device=mixture.device)
        lengths = lengths.to(mixture.device)
        frames = frame_count(lengths, self.kernel_size, self.stride)
        total = int(frame_count(torch.tensor(time), self.kernel_size, self.stride))
        padded = (total - 1) * self.stride + self.kernel_size
        # Zero the padding (it may hold anything) and extend to whole frames, as an item alone is extended.
        x = mixture * length_mask(lengths, time).to(mixture.dtype)
        x = nn.functional.pad(x, (0, padded - time)).unsqueeze(1)
        mask = length_mask(frames, total).to(x.dtype).unsqueeze(1)  # (batch, 1, frames)
        if lengths.numel() and bool((lengths >= time).all()):
            mask = None  # no padding anywhere (fixed-length training crops): the unmasked, fused gLN
        encoded = torch.relu(self.encoder(x))
        encoded = encoded if mask is None else encoded * mask
        y = self.bottleneck(self.input_norm(encoded, mask, zero_padding=False))  # 1x1: frame by frame
        skips = 0
        for block in self.blocks:
            y, skip = block(y, mask)
            skips = skips + skip
        masks = self.mask_conv(self.mask_act(skips)).view(batch, self.num_speakers, self.enc_dim, total)
        masks = torch.relu(masks) if self.mask_activation == "relu" else torch.sigmoid(masks)
        separated = (masks * encoded.unsqueeze(1)).view(batch * self.num_speakers, self.enc_dim, total)
        out = self.decoder(separated).view(batch, self.num_speakers, -1)[..., :time]
        return out * length_mask(lengths, time).to(out.dtype).unsqueeze(1)
