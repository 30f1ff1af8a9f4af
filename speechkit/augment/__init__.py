"""Waveform augmentations that a YAML composes, for models that must hold up on voices, microphones and
rooms they never heard (see docs/augment.md).

Every augmentation is length-aware (padding never enters), draws its randomness per item from a seed
(:func:`item_seeds`: the same audio for the same run seed, epoch and item id, whatever the batch, the
device or a resumption mid-epoch), and runs on a batch on CPU or GPU.

Example:
    >>> from speechkit.augment import Augmenter, AddNoise, SpeedPerturb, item_seeds
    >>> augmenter = Augmenter([SpeedPerturb(), AddNoise(snr_db=[10, 20])])
    >>> seeds = item_seeds(["a", "b"], epoch=1, seed=0)
    >>> wavs, lengths = augmenter(torch.randn(2, 1600), torch.tensor([1600, 900]), seeds)
"""
from speechkit.augment.augmenter import Augmenter
from speechkit.augment.channels import ChannelDrop, ChannelSwap
from speechkit.augment.codec import Codec
from speechkit.augment.core import (
    RandomGain,
    WaveAugmentation,
    generator_for,
    item_seed,
    item_seeds,
    random_crops,
)
from speechkit.augment.identities import SpeedIdentities
from speechkit.augment.level import LoudnessNormalize, Quantize, TimeShift
from speechkit.augment.noise import AddNoise, Babble, ChunkDrop, CutCat, colored_noise
from speechkit.augment.reverb import Reverb
from speechkit.augment.spectral import BandLimit, Equalizer, FormantWarp, FrequencyDrop
from speechkit.augment.tempo import MuLaw, PitchShift, Resample, SpeedPerturb, TimeStretch, time_stretch

__all__ = ["AddNoise", "Augmenter", "Babble", "BandLimit", "ChannelDrop", "ChannelSwap", "ChunkDrop", "Codec",
           "CutCat", "Equalizer", "FormantWarp", "FrequencyDrop", "LoudnessNormalize", "MuLaw", "PitchShift",
           "Quantize", "RandomGain", "Resample", "Reverb", "SpeedIdentities", "SpeedPerturb", "TimeShift",
           "TimeStretch", "WaveAugmentation", "colored_noise", "generator_for", "item_seed", "item_seeds",
           "random_crops", "time_stretch"]
