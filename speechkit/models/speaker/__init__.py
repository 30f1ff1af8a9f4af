"""Speaker embedding models: ECAPA-TDNN, x-vector TDNN, ResNet34 (WeSpeaker); each maps filterbank frames
``(batch, frames, features)`` and int64 frame ``lengths`` to one embedding per item ``(batch, dim)``.

Example:
    >>> from speechkit.models.speaker import ECAPATDNN
    >>> ECAPATDNN.from_preset("tiny", input_size=40)(torch.randn(2, 90, 40), torch.tensor([90, 41])).shape
    torch.Size([2, 16])
"""
import torch  # noqa: F401  (the doctest above uses it)

from speechkit.models.speaker.ecapa import ECAPATDNN, PRESETS
from speechkit.models.speaker.layers import (
    AttentiveStatisticsPooling,
    EmbeddingNormalization,
    StatisticsPooling,
    TDNNBlock,
)
from speechkit.models.speaker.resnet import ResNetSpeaker, resnet34
from speechkit.models.speaker.xvector import XVector

__all__ = ["ECAPATDNN", "PRESETS", "AttentiveStatisticsPooling", "EmbeddingNormalization",
           "StatisticsPooling", "TDNNBlock", "ResNetSpeaker", "resnet34", "XVector"]
