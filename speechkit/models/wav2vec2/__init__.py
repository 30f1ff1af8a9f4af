"""wav2vec 2.0's encoder and three self-supervised objectives on it: wav2vec 2.0 (contrastive, learned
quantizer), HuBERT (masked prediction of k-means clusters) and BEST-RQ (masked prediction of a frozen
random-projection quantizer's codes); k-means, and the encoders of HuBERT, WavLM and data2vec-audio.

Example:
    >>> import torch
    >>> from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    >>> model = Wav2Vec2Model(Wav2Vec2Config.preset("small", num_layers=2)).eval()
    >>> out = model(torch.randn(1, 16000), torch.tensor([16000]))
    >>> out.output.shape
    torch.Size([1, 49, 256])
"""
from speechkit.models.wav2vec2.bestrq import RandomProjectionQuantizer
from speechkit.models.wav2vec2.checkpoint_sizes import (
    check_encoder_sizes,
    size_differences,
    sizes_in_state_dict,
)
from speechkit.models.wav2vec2.config import PRESETS, Wav2Vec2Config
from speechkit.models.wav2vec2.context import ContextEncoder
from speechkit.models.wav2vec2.feature_encoder import FeatureEncoder, WaveformNormalization
from speechkit.models.wav2vec2.kmeans import MiniBatchKMeans
from speechkit.models.wav2vec2.masked_prediction import (
    BestRqPretraining,
    HubertPretraining,
    MaskedPredictionOutput,
    masked_cross_entropy,
)
from speechkit.models.wav2vec2.masking import batch_generator, channel_mask, sample_negatives, span_mask
from speechkit.models.wav2vec2.model import (
    EncoderOutput,
    PretrainingOutput,
    Wav2Vec2Model,
    Wav2Vec2Pretraining,
    contrastive_logits,
)
from speechkit.models.wav2vec2.monitor import MaskedPredictionMonitor, PretrainingMonitor
from speechkit.models.wav2vec2.quantizer import GumbelQuantizer, GumbelTemperature, diversity_loss, perplexity
from speechkit.models.wav2vec2.targets import ClusterTargets, fbank_frames, mfcc_frames

__all__ = [
    "PRESETS",
    "BestRqPretraining",
    "ClusterTargets",
    "HubertPretraining",
    "MaskedPredictionMonitor",
    "MaskedPredictionOutput",
    "MiniBatchKMeans",
    "RandomProjectionQuantizer",
    "fbank_frames",
    "masked_cross_entropy",
    "mfcc_frames",
    "ContextEncoder",
    "EncoderOutput",
    "FeatureEncoder",
    "GumbelQuantizer",
    "GumbelTemperature",
    "PretrainingMonitor",
    "PretrainingOutput",
    "Wav2Vec2Config",
    "Wav2Vec2Model",
    "Wav2Vec2Pretraining",
    "WaveformNormalization",
    "batch_generator",
    "channel_mask",
    "check_encoder_sizes",
    "contrastive_logits",
    "diversity_loss",
    "perplexity",
    "sample_negatives",
    "size_differences",
    "sizes_in_state_dict",
    "span_mask",
]
