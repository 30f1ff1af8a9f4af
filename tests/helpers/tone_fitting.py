"""A few optimizer steps of a vocoder on one tone: the losses show whether the STFT loss trains it."""
from __future__ import annotations

import math

import torch

from speechkit.nn import multi_resolution_stft_loss


def tone_fitting_losses(generator: torch.nn.Module, mel: torch.nn.Module, samples: int, steps: int,
                        lr: float = 3e-3) -> list:
    """The multi-resolution STFT loss after each of ``steps`` Adam steps of ``generator`` resynthesizing a
    440 Hz tone of ``samples`` samples at 16 kHz from ``mel``'s spectrogram of it."""
    target = 0.5 * torch.sin(2 * math.pi * 440 * torch.arange(samples) / 16000).unsqueeze(0)
    lengths = torch.tensor([samples])
    feats, frames = mel(target, lengths)
    optimizer = torch.optim.Adam(generator.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        wavs, _ = generator(feats, frames)
        loss, _ = multi_resolution_stft_loss(wavs[:, :samples], target, lengths,
                                             [(256, 64, 256), (128, 32, 128)])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    return losses
