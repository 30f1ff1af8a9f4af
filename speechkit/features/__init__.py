"""Speech features on torch: STFT, mel filterbanks, MFCC, deltas, SpecAugment, vocal tract length
perturbation, speed perturbation and length-aware normalization.

Every function takes a padded batch and absolute int64 lengths, ``(x, lengths)``, and returns
``(y, out_lengths)`` (or ``y`` when lengths do not change); every module wraps one function. An item gives
the same result alone as padded in a batch.

Example:
    >>> from speechkit.features import Fbank, GlobalNormalization
    >>> feats, frames = Fbank(n_mels=80)(torch.randn(2, 16000), torch.tensor([16000, 9000]))
    >>> feats, frames = GlobalNormalization(80)(feats, frames)
"""
from speechkit.features.chain import FeatureChain
from speechkit.features.filterbanks import MFCC, Deltas, Fbank, deltas, fbank, mel_filterbank, mfcc
from speechkit.features.frequency_warp import FrequencyWarp, frequency_warp
from speechkit.features.normalization import (
    GlobalNormalization,
    UtteranceNormalization,
    masked_moments,
    utterance_normalize,
)
from speechkit.features.specaugment import SpecAugment, freq_mask, time_mask, time_warp
from speechkit.features.speed_perturb import SpeedPerturb, speed_perturb
from speechkit.nn.masks import length_mask
from speechkit.nn.stft import STFT, num_frames, stft  # the STFT lives in nn: nn's losses use it too

__all__ = ["FeatureChain", "FrequencyWarp", "frequency_warp", "MFCC", "Deltas", "Fbank", "deltas", "fbank",
           "mel_filterbank", "mfcc", "length_mask", "GlobalNormalization", "UtteranceNormalization",
           "masked_moments", "utterance_normalize", "SpecAugment", "freq_mask", "time_mask", "time_warp",
           "SpeedPerturb", "speed_perturb", "STFT", "num_frames", "stft"]
