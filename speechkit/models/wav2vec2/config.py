"""wav2vec 2.0 sizes: one dataclass for every hyperparameter, and the BASE, LARGE and small presets.

Example:
    >>> config = Wav2Vec2Config.preset("small", num_layers=2)
    >>> config.d_model, config.num_layers, config.frames_for(16000)
    (256, 2, 49)
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from speechkit.errors import HparamsError


@dataclass
class Wav2Vec2Config:
    """Every size and rate of a wav2vec 2.0 model (defaults: BASE, as pretrained on LibriSpeech 960 h).

    Feature encoder: ``conv_channels[i]`` output channels, ``conv_kernels[i]``, ``conv_strides[i]``;
    ``feature_norm`` is ``"group"`` (BASE: one per-channel norm after the first convolution) or ``"layer"``
    (LARGE-LV60: a layer norm after every convolution). Transformer: post-norm (BASE) unless
    ``layer_norm_first`` (LARGE). Masking: spans of ``mask_length`` frames starting at a fraction
    ``mask_prob`` of the frames. Quantizer: ``codebook_groups`` codebooks of ``codebook_entries`` vectors,
    concatenated to ``codevector_dim``; both contexts and targets are projected to ``final_dim`` for the
    contrastive loss.

    Encoder variants of the other published families (read from and written to their ``transformers``
    folders, see :mod:`speechkit.models.wav2vec2.huggingface`): ``feature_projection_norm`` False leaves out
    the LayerNorm before the projection (some HuBERT checkpoints); ``pos_conv_layers`` > 0 replaces the
    weight-normalized positional convolution by that many plain convolutions of kernel ``pos_conv_kernel``,
    each followed by a LayerNorm without affine parameters (data2vec-audio); ``relative_position_buckets``
    > 0 adds WavLM's gated relative position bias to every attention (buckets of relative distance up to
    ``relative_position_max_distance`` frames, shared by the layers, gated per head by each layer's input).
    """

    conv_channels: tuple = (512,) * 7
    conv_kernels: tuple = (10, 3, 3, 3, 3, 2, 2)
    conv_strides: tuple = (5, 2, 2, 2, 2, 2, 2)
    conv_bias: bool = False
    feature_norm: str = "group"
    d_model: int = 768
    num_layers: int = 12
    num_heads: int = 12
    ffn_dim: int = 3072
    layer_norm_first: bool = False
    pos_conv_kernel: int = 128
    pos_conv_groups: int = 16
    layer_norm_eps: float = 1e-5
    dropout: float = 0.1
    attention_dropout: float = 0.1
    activation_dropout: float = 0.0
    feature_dropout: float = 0.1
    quantizer_input_dropout: float = 0.1
    layer_drop: float = 0.05
    mask_prob: float = 0.65
    mask_length: int = 10
    mask_min_spans: int = 2
    mask_channel_prob: float = 0.0
    mask_channel_length: int = 10
    codebook_groups: int = 2
    codebook_entries: int = 320
    codevector_dim: int = 256
    final_dim: int = 256
    logit_temperature: float = 0.1
    num_negatives: int = 100
    diversity_weight: float = 0.1
    feature_penalty_weight: float = 10.0
    gumbel_temperature: tuple = field(default=(2.0, 0.5, 0.999995))
    feature_projection_norm: bool = True
    pos_conv_layers: int = 0
    relative_position_buckets: int = 0
    relative_position_max_distance: int = 800

    def __post_init__(self) -> None:
        self.conv_channels = tuple(self.conv_channels)
        self.conv_kernels = tuple(self.conv_kernels)
        self.conv_strides = tuple(self.conv_strides)
        self.gumbel_temperature = tuple(self.gumbel_temperature)
        if not len(self.conv_channels) == len(self.conv_kernels) == len(self.conv_strides):
            raise HparamsError("wav2vec 2.0: conv_channels, conv_kernels and conv_strides need one entry per "
                               f"layer, got {len(self.conv_channels)}, {len(self.conv_kernels)}, "
                               f"{len(self.conv_strides)}")
        if self.feature_norm not in ("group", "layer"):
            raise HparamsError("wav2vec 2.0: feature_norm must be 'group' or 'layer', got "
                               f"{self.feature_norm!r}")
        if self.d_model % self.num_heads:
            raise HparamsError(f"wav2vec 2.0: d_model {self.d_model} is not divisible by num_heads "
                               f"{self.num_heads}")
        if self.codevector_dim % self.codebook_groups:
            raise HparamsError(f"wav2vec 2.0: codevector_dim {self.codevector_dim} is not divisible by "
                               f"codebook_groups {self.codebook_groups}")
        if self.d_model % self.pos_conv_groups:
            raise HparamsError(f"wav2vec 2.0: d_model {self.d_model} is not divisible by pos_conv_groups "
                               f"{self.pos_conv_groups}")
        if self.pos_conv_layers < 0 or self.relative_position_buckets < 0:
            raise HparamsError("wav2vec 2.0: pos_conv_layers and relative_position_buckets must be >= 0, got "
                               f"{self.pos_conv_layers}, {self.relative_position_buckets}")
        if self.relative_position_buckets and (self.relative_position_buckets < 4
                                               or self.relative_position_max_distance
                                               <= self.relative_position_buckets // 4):
            raise HparamsError("wav2vec 2.0: relative_position_buckets needs at least 4 buckets and "
                               "relative_position_max_distance above a quarter of them, got "
                               f"{self.relative_position_buckets}, {self.relative_position_max_distance}")
        if len(self.gumbel_temperature) != 3:
            raise HparamsError("wav2vec 2.0: gumbel_temperature is (start, end, decay per update), got "
                               f"{self.gumbel_temperature}")

    @property
    def receptive_field(self) -> int:
        """Samples one feature frame sees (400 for BASE: 25 ms at 16 kHz)."""
        size = 1
        for kernel, stride in zip(reversed(self.conv_kernels), reversed(self.conv_strides)):
            size = (size - 1) * stride + kernel
        return size

    def frames_for(self, num_samples: int) -> int:
        """Feature frames for ``num_samples`` samples of audio (0 when shorter than the receptive field)."""
        length = num_samples
        for kernel, stride in zip(self.conv_kernels, self.conv_strides):
            length = (length - kernel) // stride + 1 if length >= kernel else 0
        return max(length, 0)

    def replace(self, **changes: Any) -> Wav2Vec2Config:
        """A copy with some fields changed (unknown names raise :class:`HparamsError`)."""
        known = {item.name for item in dataclasses.fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise HparamsError(f"wav2vec 2.0 has no setting {unknown[0]!r} (known: {sorted(known)})")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self).items()}

    @classmethod
    def preset(cls, name: str, **changes: Any) -> Wav2Vec2Config:
        """``"base"``, ``"large"`` (LV-60 style: layer-norm features, pre-norm) or ``"small"`` (for CPU)."""
        if name not in PRESETS:
            raise HparamsError(f"unknown wav2vec 2.0 preset {name!r}; choose one of {sorted(PRESETS)}")
        return cls(**PRESETS[name]).replace(**changes)


PRESETS = {
    "base": {},
    "large": dict(feature_norm="layer", conv_bias=True, d_model=1024, num_layers=24, num_heads=16,
                  ffn_dim=4096, layer_norm_first=True, codevector_dim=768, final_dim=768, layer_drop=0.0),
    # A CPU-sized model: the same 20 ms frame rate, a narrower feature encoder and transformer. The
    # convolutions on raw audio are most of a CPU step: 128 channels halve it against 256.
    "small": dict(conv_channels=(128,) * 7, d_model=256, num_layers=4, num_heads=4, ffn_dim=1024,
                  pos_conv_kernel=32, pos_conv_groups=16, codebook_entries=64, codevector_dim=128,
                  final_dim=128, num_negatives=50, layer_drop=0.0, dropout=0.05, attention_dropout=0.05,
                  feature_dropout=0.05, quantizer_input_dropout=0.05),
}
