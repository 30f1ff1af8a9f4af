"""Short-time Fourier transform of padded batches, on torch, with absolute lengths.

Unlike ``torch.stft`` on a padded batch, the centering pad at each item's end reflects that item's own last
samples (not the zeros of the padding), so an item gives the same frames alone or in a batch.

Example:
    >>> x = torch.randn(2, 16000)
    >>> spec, frames = stft(x, torch.tensor([16000, 8000]), n_fft=512, hop_length=160, win_length=400)
    >>> spec.shape, frames.tolist()
    (torch.Size([2, 101, 257]), [101, 51])
"""
from __future__ import annotations

from typing import Optional

import torch

from speechkit.nn.masks import checked_lengths, length_mask

WINDOWS = {
    "hann": lambda n: torch.hann_window(n, periodic=True, dtype=torch.float64),
    "hamming": lambda n: torch.hamming_window(n, periodic=True, dtype=torch.float64),
    "rectangular": lambda n: torch.ones(n, dtype=torch.float64),
}


def make_window(name: str, win_length: int, n_fft: int) -> torch.Tensor:
    """(n_fft,) float32 window of ``win_length`` non-zero samples, centered in ``n_fft`` like torch.stft."""
    if name not in WINDOWS:
        raise ValueError(f"unknown window {name!r}; choose one of {sorted(WINDOWS)}")
    if not 0 < win_length <= n_fft:
        raise ValueError(f"win_length must be in [1, n_fft={n_fft}], got {win_length}")
    window = torch.zeros(n_fft, dtype=torch.float64)
    start = (n_fft - win_length) // 2
    window[start:start + win_length] = WINDOWS[name](win_length)
    return window.to(torch.float32)


def num_frames(lengths: torch.Tensor, n_fft: int, hop_length: int, center: bool = True) -> torch.Tensor:
    """Frames the STFT gives for items of ``lengths`` samples (an empty item gives none)."""
    lengths = torch.as_tensor(lengths, dtype=torch.int64)
    if center:
        frames = 1 + lengths // hop_length
    else:
        frames = torch.clamp(1 + (lengths - n_fft) // hop_length, min=0)
    return torch.where(lengths > 0, frames, torch.zeros_like(frames))


def _centered(x: torch.Tensor, lengths: torch.Tensor, pad: int) -> torch.Tensor:
    """(batch, time + 2 * pad): each item reflect-padded at its own two ends, zero after that."""
    batch, time = x.shape
    position = torch.arange(-pad, time + pad, device=x.device).unsqueeze(0)  # index in the original signal
    last = (lengths - 1).clamp(min=0).unsqueeze(1)
    index = position.abs()  # reflection at the start
    index = torch.where(position > last, 2 * last - position, index)  # reflection at the item's end
    index = torch.minimum(index.clamp(min=0), last).expand(batch, -1)
    valid = (position < (lengths.unsqueeze(1) + pad)) & (lengths.unsqueeze(1) > 0)
    return x.gather(1, index) * valid.to(x.dtype)


def stft(x: torch.Tensor, lengths: torch.Tensor, n_fft: int = 512, hop_length: int = 160,
         win_length: int = 400, window: str = "hamming", center: bool = True,
         window_tensor: Optional[torch.Tensor] = None) -> tuple:
    """Complex spectrum of every frame.

    Args:
        x: (batch, time) waveforms; samples past ``lengths`` are ignored.
        lengths: (batch,) int64 valid samples per item.
        n_fft: FFT size (frequency bins: n_fft // 2 + 1); win_length: samples under the window;
        hop_length: samples between frame starts; center: frame t centered on sample t * hop_length.
        window_tensor: the (n_fft,) window already made by :func:`make_window` (modules cache it).

    Returns:
        ``(spec, frame_lengths)``: spec (batch, frames, n_fft // 2 + 1) complex64, zero past each item's
        frames; frame_lengths (batch,) int64.
    """
    if x.dim() != 2:
        raise ValueError(f"stft expects (batch, time) waveforms, got shape {tuple(x.shape)}")
    lengths = checked_lengths(x, lengths)
    x = x.to(torch.float32) * length_mask(lengths, x.shape[1]).to(torch.float32)
    if center:
        x = _centered(x, lengths, n_fft // 2)
    if x.shape[1] < n_fft:
        x = torch.nn.functional.pad(x, (0, n_fft - x.shape[1]))
    frames = x.unfold(1, n_fft, hop_length)  # (batch, frames, n_fft)
    if window_tensor is None:
        window_tensor = make_window(window, win_length, n_fft)
    frames = frames * window_tensor.to(device=x.device, dtype=frames.dtype)
    spec = torch.fft.rfft(frames, dim=-1)
    frame_lengths = num_frames(lengths, n_fft, hop_length, center).to(x.device)
    mask = length_mask(frame_lengths, spec.shape[1]).unsqueeze(-1)
    return spec * mask, frame_lengths


def power_spectrum(spec: torch.Tensor, power: float = 2.0) -> torch.Tensor:
    """``|spec| ** power``, computed without the square root when power is 2."""
    squared = spec.real ** 2 + spec.imag ** 2
    return squared if power == 2.0 else squared ** (power / 2.0)


class STFT(torch.nn.Module):
    """Module form of :func:`stft`; ``forward(x, lengths) -> (spec, frame_lengths)``."""

    def __init__(self, n_fft: int = 512, hop_length: int = 160, win_length: int = 400,
                 window: str = "hamming", center: bool = True):
        super().__init__()
        self.n_fft, self.hop_length, self.win_length = n_fft, hop_length, win_length
        self.window, self.center = window, center
        # Made once (bad settings fail here); moves with .to(device); not saved in checkpoints.
        self.register_buffer("window_tensor", make_window(window, win_length, n_fft), persistent=False)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple:
        return stft(x, lengths, self.n_fft, self.hop_length, self.win_length, self.window, self.center,
                    self.window_tensor)
