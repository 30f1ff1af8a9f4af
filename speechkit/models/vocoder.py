"""A small non-autoregressive neural vocoder (log-mel spectrogram -> waveform) and a Griffin-Lim baseline.

``MelSpectrogram`` gives the vocoder's input: natural-log mel magnitudes (power 1, Hann window, floor 1e-5)
from :func:`speechkit.features.fbank`. ``MelGenerator`` turns ``(batch, frames, n_mels)`` into
``(batch, frames * hop_length)`` samples in one pass: a convolution, then per stage a transposed convolution
that upsamples time by its rate and a multi-receptive-field fusion (the mean of residual blocks of dilated
convolutions with different kernels), then a convolution to one channel and tanh. The rates multiply to the
mel's hop length. Every layer's input is zeroed past the item's valid length, so an item's samples are the
same alone or padded in a batch (docs/design.md, contract 2). ``griffin_lim`` inverts the same mel without
training, for comparison.

Presets (``PRESETS``): ``small`` (CPU, 0.13 M parameters, 64 channels), ``base`` (256 channels, 3.5 M) and
``tiny`` (smoke tests).

Example:
    >>> mel = MelSpectrogram()
    >>> generator = MelGenerator.from_preset("small")
    >>> feats, frames = mel(torch.randn(2, 16000), torch.tensor([16000, 8000]))
    >>> wavs, samples = generator(feats, frames)
    >>> wavs.shape, samples.tolist()
    (torch.Size([2, 16128]), [16128, 8192])
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Optional

import torch

from speechkit.features.filterbanks import fbank, mel_filterbank
from speechkit.nn.masks import checked_lengths, length_mask
from speechkit.nn.stft import make_window

PRESETS = {
    "tiny": dict(channels=8, upsample_rates=(8, 8, 4), resblock_kernels=(3,), resblock_dilations=(1,)),
    "small": dict(channels=64, upsample_rates=(8, 8, 4), resblock_kernels=(3, 7), resblock_dilations=(1, 3)),
    "base": dict(channels=256, upsample_rates=(8, 8, 4), resblock_kernels=(3, 7, 11),
                 resblock_dilations=(1, 3, 5)),
}


def preset_sizes(presets: dict, name: str, kind: str, overrides: Optional[dict], sizes: dict) -> dict:
    """The sizes of preset ``name`` of ``presets``, updated by ``overrides`` (a mapping, for YAML) and
    ``sizes`` (keywords); ``kind`` names the model in the error for an unknown preset."""
    if name not in presets:
        raise ValueError(f"unknown {kind} preset {name!r}; known: {', '.join(presets)}")
    return {**presets[name], **(overrides or {}), **sizes}


def checked_mel_batch(mels: torch.Tensor, lengths: Optional[torch.Tensor], n_mels: int) -> torch.Tensor:
    """The (batch,) int64 valid frames of a generator's input ``mels`` (batch, frames, n_mels), all frames
    when ``lengths`` is None; ValueError for any other shape."""
    if mels.dim() != 3 or mels.shape[2] != n_mels:
        raise ValueError(f"expected mels (batch, frames, {n_mels}), got shape {tuple(mels.shape)}")
    if lengths is None:
        lengths = torch.full((mels.shape[0],), mels.shape[1], dtype=torch.int64, device=mels.device)
    return checked_lengths(mels, lengths)


class MelSpectrogram(torch.nn.Module):
    """Log mel magnitudes for the vocoder: ``forward(wavs, lengths) -> (mels, frames)``, mels
    ``(batch, frames, n_mels)`` (zero past each item's frames), ``frames = 1 + samples // hop_length``."""

    def __init__(self, sample_rate: int = 16000, n_fft: int = 1024, win_length: int = 1024,
                 hop_length: int = 256, n_mels: int = 80, f_min: float = 0.0, f_max: Optional[float] = None,
                 floor: float = 1e-5):
        super().__init__()
        self.options = dict(sample_rate=sample_rate, n_fft=n_fft, win_length=win_length,
                            hop_length=hop_length, n_mels=n_mels, f_min=f_min, f_max=f_max, window="hann",
                            power=1.0, log=True, floor=floor)
        self.sample_rate, self.hop_length, self.n_mels = sample_rate, hop_length, n_mels
        self.register_buffer("window_tensor", make_window("hann", win_length, n_fft), persistent=False)
        self.register_buffer("filters", mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate, f_min, f_max),
                             persistent=False)

    def forward(self, wavs: torch.Tensor, lengths: torch.Tensor) -> tuple:
        return fbank(wavs, lengths, **self.options, window_tensor=self.window_tensor, filters=self.filters)


class _Masked(torch.nn.Module):
    """Zero the input past ``lengths`` before a 1-d (transposed) convolution: padding never flows inward."""

    def __init__(self, conv: torch.nn.Module):
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.conv(x * mask)


class ResidualBlock(torch.nn.Module):
    """Pairs of (dilated conv, conv) with leaky ReLUs and a skip connection each; same length in and out."""

    def __init__(self, channels: int, kernel_size: int, dilations: Sequence[int]):
        super().__init__()

        def conv(dilation):
            return _Masked(torch.nn.Conv1d(channels, channels, kernel_size, dilation=dilation,
                                           padding=dilation * (kernel_size - 1) // 2))

        self.dilated = torch.nn.ModuleList(conv(d) for d in dilations)
        self.plain = torch.nn.ModuleList(conv(1) for _ in dilations)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        for dilated, plain in zip(self.dilated, self.plain):
            y = dilated(torch.nn.functional.leaky_relu(x, 0.1), mask)
            x = x + plain(torch.nn.functional.leaky_relu(y, 0.1), mask)
        return x


class MelGenerator(torch.nn.Module):
    """Mel spectrogram to waveform, non-autoregressive (see the module doc).

    Args:
        n_mels: mel bins of the input.
        channels: channels after the first convolution; halved by every upsampling stage.
        upsample_rates: time factor of each stage; their product is the mel's hop length.
        resblock_kernels, resblock_dilations: kernel of each residual block of a stage, dilations inside one.
    """

    def __init__(self, n_mels: int = 80, channels: int = 64, upsample_rates: Sequence[int] = (8, 8, 4),
                 resblock_kernels: Sequence[int] = (3, 7), resblock_dilations: Sequence[int] = (1, 3)):
        super().__init__()
        if channels >> len(upsample_rates) < 1:
            raise ValueError(f"channels={channels} cannot be halved {len(upsample_rates)} times")
        self.n_mels = n_mels
        self.upsample_rates = [int(r) for r in upsample_rates]
        self.hop_length = math.prod(self.upsample_rates)
        self.pre = _Masked(torch.nn.Conv1d(n_mels, channels, 7, padding=3))
        self.upsamples, self.fusions = torch.nn.ModuleList(), torch.nn.ModuleList()
        width = channels
        for rate in self.upsample_rates:
            # kernel 2 * rate and padding rate // 2 (+ output_padding for odd rates): exactly rate x frames.
            self.upsamples.append(_Masked(torch.nn.ConvTranspose1d(
                width, width // 2, 2 * rate, stride=rate, padding=(rate + 1) // 2, output_padding=rate % 2)))
            width //= 2
            self.fusions.append(torch.nn.ModuleList(
                ResidualBlock(width, k, resblock_dilations) for k in resblock_kernels))
        self.post = _Masked(torch.nn.Conv1d(width, 1, 7, padding=3))

    @classmethod
    def from_preset(cls, name: str = "small", n_mels: int = 80, overrides: Optional[dict] = None,
                    **sizes) -> MelGenerator:
        """A generator of the preset ``name`` (``PRESETS``), with any size overridden (``overrides`` as a
        mapping, for YAML, or as keywords)."""
        return cls(n_mels=n_mels, **preset_sizes(PRESETS, name, "vocoder", overrides, sizes))

    def forward(self, mels: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """``(wavs, samples)``: wavs (batch, frames * hop_length) in [-1, 1], zero past each item's
        ``samples = lengths * hop_length``.

        Args:
            mels: (batch, frames, n_mels) log mel magnitudes (as :class:`MelSpectrogram` gives).
            lengths: (batch,) int64 valid frames (default: all).
        """
        lengths = checked_mel_batch(mels, lengths, self.n_mels)

        def mask_of(valid: torch.Tensor, time: int) -> torch.Tensor:
            return length_mask(valid, time).unsqueeze(1).to(mels.dtype)

        x = self.pre(mels.transpose(1, 2), mask_of(lengths, mels.shape[1]))
        valid = lengths
        for upsample, fusion, rate in zip(self.upsamples, self.fusions, self.upsample_rates):
            x = upsample(torch.nn.functional.leaky_relu(x, 0.1), mask_of(valid, x.shape[2]))
            valid = valid * rate
            mask = mask_of(valid, x.shape[2])
            x = sum(block(x, mask) for block in fusion) / len(fusion)
        mask = mask_of(valid, x.shape[2])
        wavs = torch.tanh(self.post(torch.nn.functional.leaky_relu(x, 0.1), mask)) * mask
        return wavs.squeeze(1), valid


def griffin_lim(mels: torch.Tensor, lengths: torch.Tensor, mel: MelSpectrogram, iterations: int = 32,
                momentum: float = 0.99, seed: int = 0) -> tuple:
    """Waveforms from log mel magnitudes without a model: the filterbank's least-squares inverse, then
    fast Griffin-Lim phase recovery (momentum ``momentum``) with the same STFT settings as ``mel``.

    Args:
        mels: (batch, frames, n_mels) as ``mel`` computes them; lengths: (batch,) int64 valid frames.

    Returns:
        ``(wavs, samples)``: (batch, max(lengths) * hop_length) and (batch,) int64 (``lengths * hop``),
        zero past each item's samples; each item is inverted on its own frames.
    """
    options = mel.options
    n_fft, hop, win = options["n_fft"], options["hop_length"], options["win_length"]
    window = torch.hann_window(win, periodic=True, device=mels.device)
    filters = mel.filters.to(mels.device)  # (bins, n_mels)
    inverse = torch.linalg.pinv(filters)  # (n_mels, bins)
    generator = torch.Generator(device="cpu").manual_seed(seed)
    frames_max = int(lengths.max()) if len(lengths) else 0
    out = torch.zeros(mels.shape[0], frames_max * hop, device=mels.device)
    for i, frames in enumerate(lengths.tolist()):
        magnitude = torch.clamp(torch.exp(mels[i, :frames].float()) @ inverse, min=0.0).T  # (bins, frames)
        phase = torch.rand(magnitude.shape, generator=generator).to(mels.device) * 2 * math.pi
        angles = torch.polar(torch.ones_like(magnitude), phase)
        previous = torch.zeros_like(angles)
        samples = frames * hop
        for _ in range(iterations):
            wav = torch.istft(magnitude * angles, n_fft, hop, win, window, center=True, length=samples)
            rebuilt = torch.stft(wav, n_fft, hop, win, window, center=True, return_complex=True)[:, :frames]
            accelerated = rebuilt - momentum / (1 + momentum) * previous
            previous = rebuilt
            angles = accelerated / accelerated.abs().clamp(min=1e-8)
        wav = torch.istft(magnitude * angles, n_fft, hop, win, window, center=True, length=samples)
        out[i, :samples] = wav
    return out, lengths.to(torch.int64) * hop
