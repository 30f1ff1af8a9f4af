"""Random waveforms zero-padded into one batch, for the Hugging Face encoder tests."""
from __future__ import annotations

import torch


def waveforms(lengths, seed=0):
    """``(wav, lengths)``: wav (batch, max(lengths)) of seeded N(0, 1) noise, zero past each length;
    lengths an int64 tensor (batch,). ``waveforms([3, 2])[0].shape == (2, 3)``."""
    generator = torch.Generator().manual_seed(seed)
    wav = torch.zeros(len(lengths), max(lengths))
    for index, length in enumerate(lengths):
        wav[index, :length] = torch.randn(length, generator=generator)
    return wav, torch.tensor(lengths)
