"""A frame-rate vocoder: ConvNeXt blocks predict each mel frame's STFT, an inverse STFT makes the waveform.

``ISTFTGenerator`` maps ``(batch, frames, n_mels)`` log mels to ``(batch, frames * hop_length)`` samples
like :class:`speechkit.models.MelGenerator`, but every layer runs at the mel's frame rate (62.5 frames per
second at 16 kHz, hop 256) instead of the sample rate: a convolution embeds the mels, ConvNeXt blocks
(depthwise convolution, layer norm, a two-layer MLP, a learned residual scale) mix them along time, and a
linear head gives each frame's log magnitude and phase at ``n_fft // 2 + 1`` bins. The waveform is the
windowed overlap-add of the frames' inverse FFTs, divided by the summed squared window of the item's own
frames: an item's samples do not depend on the padded frames of a batch (docs/design.md, contract 2). With
hop 256 this costs about 1/100 of the sample-rate generator's operations per second of audio, which is what
lets it train to intelligible speech on a CPU in minutes.

Presets (``ISTFT_PRESETS``): ``small`` (CPU, 1.1 M parameters), ``base`` (512 channels, 8 blocks, 13.5 M)
and ``tiny`` (smoke tests).

Example:
    >>> generator = ISTFTGenerator.from_preset("tiny")
    >>> wavs, samples = generator(torch.randn(2, 63, 80), torch.tensor([63, 32]))
    >>> wavs.shape, samples.tolist()
    (torch.Size([2, 16128]), [16128, 8192])
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.models.vocoder import checked_mel_batch, preset_sizes
from speechkit.nn.masks import length_mask

ISTFT_PRESETS = {
    "tiny": dict(channels=16, hidden=32, num_blocks=1),
    "small": dict(channels=192, hidden=576, num_blocks=6),
    "base": dict(channels=512, hidden=1536, num_blocks=8),
}

#: Log magnitudes above this are clipped before exp: keeps an untrained head from overflowing.
MAX_LOG_MAGNITUDE = 8.0


class ConvNeXtBlock(torch.nn.Module):
    """x + scale * MLP(LayerNorm(depthwise_conv(x))) on (batch, channels, frames); padding is zeroed first."""

    def __init__(self, channels: int, hidden: int, kernel_size: int = 7, layer_scale: float = 0.1):
        super().__init__()
        self.depthwise = torch.nn.Conv1d(channels, channels, kernel_size, padding=kernel_size // 2,
                                         groups=channels)
        self.norm = torch.nn.LayerNorm(channels)
        self.expand = torch.nn.Linear(channels, hidden)
        self.project = torch.nn.Linear(hidden, channels)
        self.scale = torch.nn.Parameter(torch.full((channels,), layer_scale))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        y = self.depthwise(x * mask).transpose(1, 2)
        y = self.project(torch.nn.functional.gelu(self.expand(self.norm(y))))
        return x + (self.scale * y).transpose(1, 2)


class ISTFTGenerator(torch.nn.Module):
    """Log mel frames to waveform through a predicted STFT (see the module doc).

    Args:
        n_mels: mel bins of the input.
        channels, hidden: width of the blocks and of their MLP.
        num_blocks: ConvNeXt blocks.
        n_fft, hop_length: the synthesis STFT (Hann window of ``n_fft`` samples); ``hop_length`` must be the
            mel's, whose frame ``t`` is centred on sample ``t * hop_length``.
    """

    def __init__(self, n_mels: int = 80, channels: int = 192, hidden: int = 576, num_blocks: int = 6,
                 n_fft: int = 1024, hop_length: int = 256):
        super().__init__()
        if n_fft < hop_length or n_fft % 2:
            raise ValueError(f"n_fft must be even and at least hop_length, got {n_fft} and {hop_length}")
        self.n_mels, self.n_fft, self.hop_length = n_mels, n_fft, hop_length
        self.embed = torch.nn.Conv1d(n_mels, channels, 7, padding=3)
        self.norm = torch.nn.LayerNorm(channels)
        self.blocks = torch.nn.ModuleList(ConvNeXtBlock(channels, hidden, layer_scale=1.0 / num_blocks)
                                          for _ in range(num_blocks))
        self.final_norm = torch.nn.LayerNorm(channels)
        self.head = torch.nn.Linear(channels, n_fft + 2)  # log magnitude and phase of n_fft // 2 + 1 bins
        self.register_buffer("window", torch.hann_window(n_fft, periodic=True), persistent=False)

    @classmethod
    def from_preset(cls, name: str = "small", n_mels: int = 80, overrides: Optional[dict] = None,
                    **sizes) -> ISTFTGenerator:
        """A generator of the preset ``name`` (``ISTFT_PRESETS``), with any size overridden."""
        return cls(n_mels=n_mels, **preset_sizes(ISTFT_PRESETS, name, "iSTFT vocoder", overrides, sizes))

    def forward(self, mels: torch.Tensor, lengths: Optional[torch.Tensor] = None) -> tuple:
        """``(wavs, samples)``: wavs (batch, frames * hop_length), zero past each item's
        ``samples = lengths * hop_length``.

        Args:
            mels: (batch, frames, n_mels) log mel magnitudes (as :class:`MelSpectrogram` gives).
            lengths: (batch,) int64 valid frames (default: all).
        """
        lengths = checked_mel_batch(mels, lengths, self.n_mels)
        frame_mask = length_mask(lengths, mels.shape[1]).to(mels.dtype)  # (batch, frames)
        mask = frame_mask.unsqueeze(1)
        x = self.embed(mels.transpose(1, 2) * mask)
        x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        for block in self.blocks:
            x = block(x, mask)
        spectrum = self.head(self.final_norm(x.transpose(1, 2)))  # (batch, frames, n_fft + 2)
        log_magnitude, phase = spectrum.float().chunk(2, dim=-1)
        magnitude = torch.exp(torch.clamp(log_magnitude, max=MAX_LOG_MAGNITUDE))
        wavs = self.overlap_add(torch.polar(magnitude, phase), frame_mask.float())
        samples = lengths * self.hop_length
        return wavs * length_mask(samples, wavs.shape[1]).to(wavs.dtype), samples

    def overlap_add(self, spectrum: torch.Tensor, frame_mask: torch.Tensor) -> torch.Tensor:
        """Inverse STFT of (batch, frames, bins) complex frames centred on ``t * hop_length``, normalized by
        each item's own window envelope; returns (batch, frames * hop_length)."""
        batch, frames, _ = spectrum.shape
        chunks = torch.fft.irfft(spectrum, n=self.n_fft, dim=-1) * self.window  # (batch, frames, n_fft)
        chunks = chunks * frame_mask.unsqueeze(-1)
        total = (frames - 1) * self.hop_length + self.n_fft

        def fold(columns: torch.Tensor) -> torch.Tensor:  # (batch, n_fft, frames) -> (batch, total)
            return torch.nn.functional.fold(columns, (1, total), (1, self.n_fft),
                                            stride=(1, self.hop_length)).reshape(batch, total)

        signal = fold(chunks.transpose(1, 2))
        envelope = fold((self.window ** 2).reshape(1, -1, 1) * frame_mask.unsqueeze(1))
        # Where no valid frame reaches (past the item's end) the envelope is 0: the sample is 0 too.
        signal = torch.where(envelope > 1e-6, signal / envelope.clamp(min=1e-6), torch.zeros_like(signal))
        start = self.n_fft // 2  # frames were centred: sample 0 sits half a window into the first one
        return signal[:, start:start + frames * self.hop_length]
