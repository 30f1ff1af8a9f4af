"""wav2vec 2.0: self-supervised speech encoder, its quantizer, masking and contrastive objective.

Example:
    >>> import torch
    >>> from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model
    >>> model = Wav2Vec2Model(Wav2Vec2Config.preset("small", num_layers=2)).eval()
    >>> out = model(torch.randn(1, 16000), torch.tensor([16000]))
    >>> out.output.shape
    torch.Size([1, 49, 256])
"""
from speechkit.models.wav2vec2.config import PRESETS, Wav2Vec2Config
from speechkit.models.wav2vec2.context import ContextEncoder
from speechkit.models.wav2vec2.feature_encoder import FeatureEncoder, WaveformNormalization
from speechkit.models.wav2vec2.masking import batch_generator, channel_mask, sample_negatives, span_mask
from speechkit.models.wav2vec2.model import (
    EncoderOutput,
    PretrainingOutput,
    Wav2Vec2Model,
    Wav2Vec2Pretraining,
    contrastive_logits,
)
from speechkit.models.wav2vec2.monitor import PretrainingMonitor
from speechkit.models.wav2vec2.quantizer import GumbelQuantizer, GumbelTemperature, diversity_loss, perplexity

__all__ = [
    "PRESETS",
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
    "contrastive_logits",
    "diversity_loss",
    "perplexity",
    "sample_negatives",
    "span_mask",
]
