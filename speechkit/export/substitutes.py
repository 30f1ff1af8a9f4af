"""Traceable twins of the modules whose PyTorch code the ONNX exporter cannot follow for every length.

The feature front ends frame the signal with ``Tensor.unfold`` and transform it with ``torch.fft.rfft``;
the iSTFT vocoder overlaps frames with ``torch.fft.irfft`` and ``fold``. None of them export for a dynamic
time axis. Each twin computes the same function with gathers and matrix products (a real DFT as two
matrices), reads the original module's settings and buffers, and is checked against it on export
(:mod:`speechkit.export.convert`): differences stay around 1e-6.

:func:`exportable` returns a copy of a module tree with every such module replaced by its twin.

Example:
    >>> from speechkit.features import Fbank
    >>> twin = exportable(Fbank(n_mels=40))
    >>> type(twin).__name__
    'ExportableFbank'
"""
from __future__ import annotations

import copy
import math

import torch

from speechkit.features.filterbanks import Fbank, _with_deltas
from speechkit.models.conv_tasnet import ConvTasNet, frame_count
from speechkit.models.istft_vocoder import MAX_LOG_MAGNITUDE, ISTFTGenerator
from speechkit.models.vocoder import MelSpectrogram
from speechkit.nn.masks import length_mask


def dft_basis(n_fft: int, window: torch.Tensor) -> tuple:
    """``(cos, sin)``, each (n_fft, n_fft // 2 + 1) float32: the windowed real DFT, so that
    ``frames @ cos`` and ``-(frames @ sin)`` are the real and imaginary parts of ``rfft(frames * window)``."""
    n = torch.arange(n_fft, dtype=torch.float64).unsqueeze(1)
    k = torch.arange(n_fft // 2 + 1, dtype=torch.float64).unsqueeze(0)
    angle = 2.0 * math.pi * ((n * k) % n_fft) / n_fft  # reduced mod n_fft: exact angles for large n * k
    w = window.to(torch.float64).unsqueeze(1)
    return (w * torch.cos(angle)).to(torch.float32), (w * torch.sin(angle)).to(torch.float32)


def centered_frames(x: torch.Tensor, lengths: torch.Tensor, n_fft: int, hop_length: int) -> torch.Tensor:
    """(batch, time // hop + 1, n_fft) frames centred on ``t * hop``, each item reflect-padded at its own
    ends (as :func:`speechkit.nn.stft.stft` with ``center=True``), built with gathers only."""
    time = x.shape[1]
    pad = n_fft // 2
    mask = length_mask(lengths, time).to(torch.float32)
    x = x.to(torch.float32) * mask
    position = torch.arange(-pad, time + pad, device=x.device).unsqueeze(0)
    last = (lengths - 1).clamp(min=0).unsqueeze(1)
    index = position.abs()
    index = torch.where(position > last, 2 * last - position, index)
    index = torch.minimum(index.clamp(min=0), last)
    valid = (position < (lengths.unsqueeze(1) + pad)) & (lengths.unsqueeze(1) > 0)
    padded = x.gather(1, index.expand(x.shape[0], -1)) * valid.to(torch.float32)
    starts = torch.arange(0, time + 1, hop_length, device=x.device)  # time // hop + 1 frame starts
    frame_index = starts.unsqueeze(1) + torch.arange(n_fft, device=x.device).unsqueeze(0)
    return padded[:, frame_index]


def exportable_fbank(x: torch.Tensor, lengths: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     filters: torch.Tensor, n_fft: int, hop_length: int, power: float, log: bool,
                     floor: float) -> tuple:
    """:func:`speechkit.features.fbank` with the DFT as matrix products; returns ``(feats, frames)``."""
    frames = centered_frames(x, lengths, n_fft, hop_length)
    real, imag = frames @ cos, frames @ sin
    energies = real * real + imag * imag
    if power != 2.0:
        energies = energies ** (power / 2.0)
    energies = energies @ filters
    if log:
        energies = torch.log(torch.clamp(energies, min=floor))
    frame_lengths = torch.where(lengths > 0, 1 + torch.div(lengths, hop_length, rounding_mode="floor"),
                                torch.zeros_like(lengths))
    return energies * length_mask(frame_lengths, energies.shape[1]).unsqueeze(-1), frame_lengths


class ExportableFbank(torch.nn.Module):
    """Twin of :class:`~speechkit.features.Fbank` (and of the vocoder's
    :class:`~speechkit.models.vocoder.MelSpectrogram`): ``forward(x, lengths) -> (feats, frames)``."""

    def __init__(self, original: torch.nn.Module):
        super().__init__()
        options = original.options
        self.n_fft, self.hop_length = options["n_fft"], options["hop_length"]
        self.power = float(options.get("power", 2.0))
        self.log, self.floor = bool(options.get("log", True)), float(options.get("floor", 1e-10))
        self.delta_order = getattr(original, "delta_order", 0)
        cos, sin = dft_basis(self.n_fft, original.window_tensor)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.register_buffer("filters", original.filters.clone(), persistent=False)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        feats, frames = exportable_fbank(x, lengths, self.cos, self.sin, self.filters, self.n_fft,
                                         self.hop_length, self.power, self.log, self.floor)
        if self.delta_order:
            feats = _with_deltas(feats, frames, self.delta_order)
        return feats, frames


class ExportableISTFTGenerator(torch.nn.Module):
    """Twin of :class:`~speechkit.models.istft_vocoder.ISTFTGenerator`: the inverse DFT as two matrix
    products and the overlap-add as a scatter-add over frame positions."""

    def __init__(self, original: ISTFTGenerator):
        super().__init__()
        self.original = original
        n_fft = original.n_fft
        n = torch.arange(n_fft, dtype=torch.float64).unsqueeze(0)
        k = torch.arange(n_fft // 2 + 1, dtype=torch.float64).unsqueeze(1)
        angle = 2.0 * math.pi * ((n * k) % n_fft) / n_fft
        # irfft: x[n] = (X0 + X_{N/2} (-1)^n + 2 sum_{0<k<N/2} Re(X_k e^{i angle})) / N; Im of X0, X_{N/2}
        # is ignored, as torch.fft.irfft does.
        scale = torch.full((n_fft // 2 + 1, 1), 2.0, dtype=torch.float64)
        scale[0, 0] = scale[-1, 0] = 1.0
        window = original.window.to(torch.float64).unsqueeze(0)
        real = scale * torch.cos(angle) / n_fft * window
        imag = -scale * torch.sin(angle) / n_fft * window
        imag[0] = imag[-1] = 0.0
        self.register_buffer("inverse_real", real.to(torch.float32), persistent=False)
        self.register_buffer("inverse_imag", imag.to(torch.float32), persistent=False)

    def forward(self, mels: torch.Tensor, lengths: torch.Tensor) -> tuple:
        g = self.original
        frame_mask = length_mask(lengths, mels.shape[1]).to(mels.dtype)
        mask = frame_mask.unsqueeze(1)
        x = g.embed(mels.transpose(1, 2) * mask)
        x = g.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in g.blocks:
            x = block(x, mask)
        spectrum = g.head(g.final_norm(x.transpose(1, 2)))
        log_magnitude, phase = spectrum.float().chunk(2, dim=-1)
        magnitude = torch.exp(torch.clamp(log_magnitude, max=MAX_LOG_MAGNITUDE))
        chunks = (magnitude * torch.cos(phase)) @ self.inverse_real \
            + (magnitude * torch.sin(phase)) @ self.inverse_imag  # (batch, frames, n_fft), windowed
        chunks = chunks * frame_mask.unsqueeze(-1)
        signal = self._overlap_add(chunks)
        envelope = self._overlap_add((g.window ** 2).view(1, 1, -1) * frame_mask.unsqueeze(-1))
        signal = torch.where(envelope > 1e-6, signal / envelope.clamp(min=1e-6), torch.zeros_like(signal))
        frames = mels.shape[1]
        start = g.n_fft // 2
        wavs = signal[:, start:start + frames * g.hop_length]
        samples = lengths * g.hop_length
        return wavs * length_mask(samples, wavs.shape[1]).to(wavs.dtype), samples

    def _overlap_add(self, chunks: torch.Tensor) -> torch.Tensor:
        """(batch, frames, n_fft) -> (batch, (frames - 1) * hop + n_fft): frame t added at ``t * hop``."""
        g = self.original
        batch, frames = chunks.shape[0], chunks.shape[1]
        hop, n_fft = g.hop_length, g.n_fft
        positions = (torch.arange(frames, device=chunks.device).unsqueeze(1) * hop
                     + torch.arange(n_fft, device=chunks.device).unsqueeze(0)).reshape(1, -1)
        total = (frames - 1) * hop + n_fft
        out = torch.zeros(batch, total, dtype=chunks.dtype, device=chunks.device)
        return out.scatter_add(1, positions.expand(batch, -1), chunks.reshape(batch, -1))


class ExportableConvTasNet(torch.nn.Module):
    """Twin of :class:`~speechkit.models.ConvTasNet` laid out for onnxruntime's CPU kernels.

    The same function as PyTorch's, rearranged where onnxruntime is slow at batch 1:

    - the separation network runs channels-last, ``(batch, frames, channels)``, flattened to
      ``(batch * frames, channels)`` around each 1x1 convolution, which becomes one ``Gemm`` with its bias
      (and a matrix product that int8 quantisation turns into ``MatMulInteger``, several times faster than
      the ``ConvInteger`` a 1x1 convolution becomes);
    - a one-slope PReLU is a ``LeakyRelu`` with the slope as a constant (onnxruntime's broadcasting ``PRelu``
      took a quarter of the graph's time);
    - the frame count follows the input's size (PyTorch computes it as a Python int), and the masked
      normalization runs for every batch (PyTorch takes a fused path when nothing is padded: the same
      statistics);
    - each dilated depthwise convolution is one grouped ``Conv`` with the PReLU after it (fused by
      onnxruntime; int8 quantisation leaves grouped convolutions in float32:
      :mod:`speechkit.export.quantize`).

    benchmarks/export.py measures it against eager PyTorch. Needs at least ``kernel_size`` samples of
    padded input (checked by the runtime)."""

    def __init__(self, original: ConvTasNet):
        super().__init__()
        self.original = original

    def forward(self, mixture: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        m = self.original
        time = mixture.shape[1]
        frames = frame_count(lengths, m.kernel_size, m.stride)
        x = mixture * length_mask(lengths, time).to(mixture.dtype)
        # stride - 1 zeros: the encoder then gives ceil((time - K) / stride) + 1 frames, PyTorch's count.
        x = torch.nn.functional.pad(x, (0, m.stride - 1)).unsqueeze(1)
        encoded = torch.relu(m.encoder(x))  # (batch, enc_dim, frames)
        total = encoded.shape[2]
        frame_mask = length_mask(frames, total).to(x.dtype)
        encoded = encoded * frame_mask.unsqueeze(1)
        mask = frame_mask.unsqueeze(2)  # (batch, frames, 1)
        valid = mask.sum(dim=(1, 2), keepdim=True).clamp(min=1.0)
        y = _pointwise(m.bottleneck, _global_norm(m.input_norm, encoded.transpose(1, 2), mask, valid))
        skips = None
        for block in m.blocks:
            z = _global_norm(block.norm1, _prelu(block.act1, _pointwise(block.expand, y)), mask, valid)
            z = _depthwise_prelu(block.depthwise, block.act2, z * mask)  # zeros past each length, as PyTorch
            z = _global_norm(block.norm2, z, mask, valid)
            y = y + _pointwise(block.residual, z) if block.residual is not None else y
            skip = _pointwise(block.skip, z)
            skips = skip if skips is None else skips + skip
        masks = _pointwise(m.mask_conv, _prelu(m.mask_act, skips))  # (batch, frames, speakers * enc_dim)
        masks = torch.relu(masks) if m.mask_activation == "relu" else torch.sigmoid(masks)
        masks = masks.reshape(-1, total, m.num_speakers, m.enc_dim).permute(0, 2, 3, 1)
        separated = (masks * encoded.unsqueeze(1)).reshape(-1, m.enc_dim, total)
        out = m.decoder(separated)
        out = out.reshape(-1, m.num_speakers, out.shape[-1])[..., :time]
        return out * length_mask(lengths, time).to(out.dtype).unsqueeze(1)


def _pointwise(conv: torch.nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
    """A 1x1 convolution on channels-last ``x`` (batch, frames, in) -> (batch, frames, out), computed on
    ``(batch * frames, in)`` so that the exporter writes one ``Gemm`` with the bias inside."""
    batch, frames, channels = x.shape
    out = torch.nn.functional.linear(x.reshape(-1, channels), conv.weight[..., 0], conv.bias)
    return out.reshape(batch, frames, -1)


def _prelu(act: torch.nn.PReLU, x: torch.Tensor, channels_last: bool = True) -> torch.Tensor:
    """PReLU on ``x`` (batch, frames, C), or (batch, C, frames) with ``channels_last=False``: a ``LeakyRelu``
    when it has one slope (the value is fixed at export)."""
    if act.weight.numel() == 1:
        return torch.nn.functional.leaky_relu(x, float(act.weight))
    if channels_last:
        return torch.nn.functional.prelu(x.transpose(1, 2), act.weight).transpose(1, 2)
    return torch.nn.functional.prelu(x, act.weight)


def _global_norm(norm, x: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """:class:`~speechkit.models.conv_tasnet.GlobalLayerNorm` on channels-last ``x`` (batch, frames, C) over
    each item's valid frames (``mask`` (batch, frames, 1), ``valid`` their count (batch, 1, 1)); frames past
    a length are left as they come. Channels are summed first, so the mask multiplies one value a frame."""
    count = valid * x.shape[2]
    mean = (x.sum(dim=2, keepdim=True) * mask).sum(dim=1, keepdim=True) / count
    centered = x - mean
    var = ((centered * centered).sum(dim=2, keepdim=True) * mask).sum(dim=1, keepdim=True) / count
    scale = norm.weight.view(1, 1, -1) * torch.rsqrt(var + norm.eps)  # (batch, 1, C)
    return centered * scale + norm.bias.view(1, 1, -1)


def _depthwise_prelu(conv, act: torch.nn.PReLU, x: torch.Tensor) -> torch.Tensor:
    """:class:`~speechkit.models.conv_tasnet.DepthwiseDilatedConv` then ``act`` on channels-last ``x`` (batch,
    frames, C): one grouped ``Conv`` on the transposed frames, the activation before transposing back so
    that onnxruntime fuses the two (faster than shifted products along the frames: 1.19x against 1.11x
    eager in float32, 1.29x against 1.23x in int8, in one interleaved run)."""
    half = conv.dilation * (conv.kernel - 1) // 2
    out = torch.nn.functional.conv1d(x.transpose(1, 2), conv.weight, conv.bias, padding=half,
                                     dilation=conv.dilation, groups=conv.weight.shape[0])
    return _prelu(act, out, channels_last=False).transpose(1, 2)


def _twin(module: torch.nn.Module):
    if isinstance(module, ConvTasNet):
        return ExportableConvTasNet(module)
    if isinstance(module, (Fbank, MelSpectrogram)):
        return ExportableFbank(module)
    if isinstance(module, ISTFTGenerator):
        return ExportableISTFTGenerator(module)
    return None


def exportable(module: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of ``module`` with every module that has a traceable twin replaced by it."""
    twin = _twin(module)
    if twin is not None:
        return twin
    module = copy.deepcopy(module)
    _replace_children(module)
    return module


def _replace_children(module: torch.nn.Module) -> None:
    for name, child in list(module.named_children()):
        twin = _twin(child)
        if twin is not None:
            setattr(module, name, twin)
        else:
            _replace_children(child)
