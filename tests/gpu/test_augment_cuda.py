"""speechkit.augment on a GPU batch gives the CPU result: the draws are the same (made on a CPU generator),
only the arithmetic differs."""
from __future__ import annotations

import torch

from speechkit.augment import (
    AddNoise,
    Augmenter,
    BandLimit,
    ChunkDrop,
    Equalizer,
    FormantWarp,
    FrequencyDrop,
    MuLaw,
    PitchShift,
    RandomGain,
    SpeedPerturb,
    item_seeds,
)


def test_every_augmentation_on_cuda_equals_cpu():
    augmenter = Augmenter([SpeedPerturb(), PitchShift(), FormantWarp(), Equalizer(), BandLimit(), MuLaw(),
                           FrequencyDrop(), ChunkDrop(), AddNoise(), RandomGain(clip_probability=0.5)],
                          min_augmentations=3, max_augmentations=6).train()
    generator = torch.Generator().manual_seed(0)
    wavs = 0.1 * torch.randn(6, 24000, generator=generator)
    lengths = torch.tensor([24000, 20000, 16000, 12345, 9000, 8000])
    seeds = item_seeds([f"utt{i}" for i in range(6)], epoch=2, seed=5)
    cpu, cpu_lengths = augmenter(wavs, lengths, seeds)
    gpu, gpu_lengths = augmenter(wavs.cuda(), lengths.cuda(), seeds)
    assert gpu.is_cuda and gpu_lengths.cpu().tolist() == cpu_lengths.tolist()
    torch.testing.assert_close(gpu.cpu(), cpu, rtol=1e-3, atol=1e-4)
