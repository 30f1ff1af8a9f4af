"""HuBERT, WavLM and data2vec-audio encoders in the ``transformers`` folder format: configs and tensor names.

The three families share wav2vec 2.0's encoder (the same convolutional features, projection and Transformer)
and differ in a few parts that :class:`~speechkit.models.wav2vec2.Wav2Vec2Config` has switches for: HuBERT
may leave out the LayerNorm before the projection (``feat_proj_layer_norm``), data2vec-audio has a stack of
positional convolutions (``pos_conv_layers``) and layer-norm features, WavLM a gated relative position bias
(``relative_position_buckets``). The ``model_type`` of ``config.json`` names the family.

Pure functions of dicts and tensors (no files): :mod:`speechkit.pretrained.huggingface.encoders` fetches
and writes the folders. Every value read from a ``config.json`` is checked for its type and range before a
model is built, and a bad one raises :class:`~speechkit.errors.CheckpointError` naming the file and key.

Example:
    >>> config = encoder_config_from_huggingface({"model_type": "wavlm", "hidden_size": 32,
    ...     "num_attention_heads": 4, "num_conv_pos_embedding_groups": 4}, "wavlm/config.json")
    >>> config.relative_position_buckets, config.d_model
    (320, 32)
"""
from __future__ import annotations

import re
from typing import Any

from speechkit.errors import CheckpointError, HparamsError
from speechkit.models.wav2vec2.config import Wav2Vec2Config

#: ``model_type`` -> (the prefix of the encoder's tensors in task models, the bare model's class).
FAMILIES = {
    "hubert": ("hubert.", "HubertModel"),
    "wavlm": ("wavlm.", "WavLMModel"),
    "data2vec-audio": ("data2vec_audio.", "Data2VecAudioModel"),
}

_INT, _FLOAT, _BOOL, _STR, _INTS = "int", "float", "bool", "str", "ints"
#: speechkit field -> (transformers key, kind, families that have it (None: all)).
_FIELDS = {
    "conv_channels": ("conv_dim", _INTS, None),
    "conv_kernels": ("conv_kernel", _INTS, None),
    "conv_strides": ("conv_stride", _INTS, None),
    "conv_bias": ("conv_bias", _BOOL, None),
    "feature_norm": ("feat_extract_norm", _STR, ("hubert", "wavlm")),
    "d_model": ("hidden_size", _INT, None),
    "num_layers": ("num_hidden_layers", _INT, None),
    "num_heads": ("num_attention_heads", _INT, None),
    "ffn_dim": ("intermediate_size", _INT, None),
    "layer_norm_first": ("do_stable_layer_norm", _BOOL, ("hubert", "wavlm")),
    "pos_conv_groups": ("num_conv_pos_embedding_groups", _INT, None),
    "layer_norm_eps": ("layer_norm_eps", _FLOAT, None),
    "dropout": ("hidden_dropout", _FLOAT, None),
    "attention_dropout": ("attention_dropout", _FLOAT, None),
    "activation_dropout": ("activation_dropout", _FLOAT, None),
    "feature_dropout": ("feat_proj_dropout", _FLOAT, None),
    "layer_drop": ("layerdrop", _FLOAT, None),
    "mask_prob": ("mask_time_prob", _FLOAT, None),
    "mask_length": ("mask_time_length", _INT, None),
    "mask_min_spans": ("mask_time_min_masks", _INT, None),
    "mask_channel_prob": ("mask_feature_prob", _FLOAT, None),
    "mask_channel_length": ("mask_feature_length", _INT, None),
    "feature_projection_norm": ("feat_proj_layer_norm", _BOOL, ("hubert",)),
    "relative_position_buckets": ("num_buckets", _INT, ("wavlm",)),
    "relative_position_max_distance": ("max_bucket_distance", _INT, ("wavlm",)),
}
#: Settings speechkit's encoder has one value for: (key, the value, families).
_FIXED = (("hidden_act", "gelu", None), ("feat_extract_activation", "gelu", None),
          ("add_adapter", False, None),
          ("conv_pos_batch_norm", False, ("hubert",)), ("use_weighted_layer_sum", False, None))


#: Upper bounds of the family-specific sizes no real model passes (a config is data from the network: an
#: Embedding of 10**9 buckets would be allocated before any weight is compared).
_MAXIMA = {"num_buckets": 100_000, "max_bucket_distance": 10_000_000, "conv_pos_kernel_size": 4096,
           "num_conv_pos_embeddings": 4096}


def _checked(value: Any, kind: str, key: str, where: str) -> Any:
    """``value`` of ``key`` if it is of ``kind`` and in range, else a CheckpointError naming both."""
    def bad(expected: str):
        return CheckpointError(f"{where}: {key} must be {expected}, got {value!r}")

    if kind == _INT and key in _MAXIMA and not isinstance(value, bool) and isinstance(value, int) \
            and value > _MAXIMA[key]:
        raise bad(f"an integer <= {_MAXIMA[key]}")

    if kind == _BOOL:
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if kind == _INT:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad("an integer >= 0")
        return value
    if kind == _FLOAT:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1e6:
            raise bad("a number >= 0")
        return float(value)
    if kind == _STR:
        if not isinstance(value, str):
            raise bad("a string")
        return value
    if (not isinstance(value, (list, tuple)) or not value
            or any(isinstance(item, bool) or not isinstance(item, int) or item <= 0 for item in value)):
        raise bad("a non-empty list of positive integers")
    return tuple(value)


def encoder_config_from_huggingface(hf_config: dict, where: str = "config.json") -> Wav2Vec2Config:
    """The :class:`Wav2Vec2Config` of a HuBERT, WavLM or data2vec-audio ``config.json`` dict.

    Raises:
        CheckpointError: another ``model_type``, a value of the wrong type or range, or a variant speechkit's
            encoder does not have (adapters, other activations, batch-norm positional convolution), naming
            ``where`` and the key.
    """
    if not isinstance(hf_config, dict):
        raise CheckpointError(f"{where}: a config must be a JSON object, got {type(hf_config).__name__}")
    family = hf_config.get("model_type")
    if family not in FAMILIES:
        raise CheckpointError(f"{where}: model_type {family!r} is not one of {sorted(FAMILIES)}")
    for key, expected, families in _FIXED:
        if (families is None or family in families) and hf_config.get(key, expected) != expected:
            raise CheckpointError(f"{where}: {key}={hf_config[key]!r} is not supported (only {expected!r})")
    values = {}
    for ours, (theirs, kind, families) in _FIELDS.items():
        if theirs in hf_config and (families is None or family in families):
            values[ours] = _checked(hf_config[theirs], kind, theirs, where)
    defaults = Wav2Vec2Config()
    for name in ("conv_channels", "conv_kernels", "conv_strides"):
        values.setdefault(name, getattr(defaults, name))
    if "num_feat_extract_layers" in hf_config:
        layers = _checked(hf_config["num_feat_extract_layers"], _INT, "num_feat_extract_layers", where)
        if layers != len(values["conv_channels"]):
            raise CheckpointError(f"{where}: num_feat_extract_layers {layers} differs from the "
                                  f"{len(values['conv_channels'])} entries of conv_dim")
    if family == "data2vec-audio":
        # One LayerNorm after every convolution, post-norm Transformer, a stack of positional convolutions.
        values["feature_norm"] = "layer"
        values["pos_conv_kernel"] = _checked(hf_config.get("conv_pos_kernel_size", 19), _INT,
                                             "conv_pos_kernel_size", where)
        values["pos_conv_layers"] = _checked(hf_config.get("num_conv_pos_embeddings", 5), _INT,
                                             "num_conv_pos_embeddings", where)
        if not 1 <= values["pos_conv_layers"] <= 64:
            raise CheckpointError(f"{where}: num_conv_pos_embeddings (data2vec-audio: positional convolution "
                                  f"layers) must be in [1, 64], got {values['pos_conv_layers']}")
    else:
        values["pos_conv_kernel"] = _checked(hf_config.get("num_conv_pos_embeddings", 128), _INT,
                                             "num_conv_pos_embeddings", where)
        values.setdefault("feature_norm", "group")
    if family == "wavlm":
        values.setdefault("relative_position_buckets", 320)
        values.setdefault("relative_position_max_distance", 800)
    for name in ("d_model", "num_layers", "num_heads", "ffn_dim", "pos_conv_groups", "pos_conv_kernel"):
        if name in values and values[name] == 0:
            raise CheckpointError(f"{where}: {_FIELDS.get(name, (name,))[0]} must be >= 1, got 0")
    try:
        return Wav2Vec2Config(**values)
    except HparamsError as error:
        raise CheckpointError(f"{where}: {error}") from None


def family_of(config: Wav2Vec2Config) -> str:
    """The family whose layout ``config`` has: ``wavlm``, ``data2vec-audio``, else ``hubert`` (whose
    encoder is wav2vec 2.0's)."""
    if config.relative_position_buckets:
        return "wavlm"
    if config.pos_conv_layers:
        return "data2vec-audio"
    return "hubert"


def encoder_config_to_huggingface(config: Wav2Vec2Config, family: str, architecture: str) -> dict:
    """A ``config.json`` dict of ``family`` for ``config`` (``architecture``: the transformers class)."""
    if family not in FAMILIES:
        raise HparamsError(f"unknown encoder family {family!r}; choose one of {sorted(FAMILIES)}")
    layout = family_of(config)
    if family != layout:
        raise HparamsError(f"this encoder has the layout of {layout}, it cannot be written as {family}")
    if family != "hubert" and not config.feature_projection_norm:
        raise HparamsError(f"{family} always has the LayerNorm before the projection "
                           "(feature_projection_norm: True)")
    if family == "data2vec-audio" and (config.feature_norm != "layer" or config.layer_norm_first):
        raise HparamsError("data2vec-audio has layer-norm features and a post-norm Transformer")
    hf_config = {"model_type": family, "architectures": [architecture], "hidden_act": "gelu",
                 "feat_extract_activation": "gelu", "num_feat_extract_layers": len(config.conv_channels)}
    for ours, (theirs, _, families) in _FIELDS.items():
        if families is None or family in families:
            value = getattr(config, ours)
            hf_config[theirs] = list(value) if isinstance(value, tuple) else value
    if family == "data2vec-audio":
        hf_config.update(conv_pos_kernel_size=config.pos_conv_kernel,
                         num_conv_pos_embeddings=config.pos_conv_layers)
    else:
        hf_config["num_conv_pos_embeddings"] = config.pos_conv_kernel
    return hf_config


# (transformers, speechkit) patterns of the encoder's tensors, without the task model's prefix.
IMPORT_NAMES = [
    (r"^feature_extractor\.conv_layers\.(\d+)\.conv\.", r"feature_encoder.layers.\1.conv."),
    (r"^feature_extractor\.conv_layers\.(\d+)\.layer_norm\.", r"feature_encoder.layers.\1.norm."),
    (r"^feature_projection\.layer_norm\.", "feature_norm."),
    (r"^feature_projection\.projection\.", "projection."),
    (r"^masked_spec_embed$", "masked_embedding"),
    (r"^encoder\.pos_conv_embed\.conv\.weight_g$", "encoder.pos_conv.conv.parametrizations.weight.original0"),
    (r"^encoder\.pos_conv_embed\.conv\.weight_v$", "encoder.pos_conv.conv.parametrizations.weight.original1"),
    (r"^encoder\.pos_conv_embed\.conv\.", "encoder.pos_conv.conv."),
    (r"^encoder\.pos_conv_embed\.layers\.(\d+)\.conv\.", r"encoder.pos_conv.convs.\1."),
    (r"^encoder\.layers\.0\.attention\.rel_attn_embed\.", "encoder.relative_position.embedding."),
    (r"^encoder\.layers\.(\d+)\.attention\.gru_rel_pos_const$", r"encoder.layers.\1.attention.gate_const"),
    (r"^encoder\.layers\.(\d+)\.attention\.gru_rel_pos_linear\.", r"encoder.layers.\1.attention.gate_proj."),
    (r"^encoder\.layers\.(\d+)\.layer_norm\.", r"encoder.layers.\1.attention_norm."),
    (r"^encoder\.layers\.(\d+)\.final_layer_norm\.", r"encoder.layers.\1.final_norm."),
    (r"^encoder\.layers\.(\d+)\.feed_forward\.intermediate_dense\.", r"encoder.layers.\1.ffn_in."),
    (r"^encoder\.layers\.(\d+)\.feed_forward\.output_dense\.", r"encoder.layers.\1.ffn_out."),
]
EXPORT_NAMES = [
    (r"^feature_encoder\.layers\.(\d+)\.conv\.", r"feature_extractor.conv_layers.\1.conv."),
    (r"^feature_encoder\.layers\.(\d+)\.norm\.", r"feature_extractor.conv_layers.\1.layer_norm."),
    (r"^feature_norm\.", "feature_projection.layer_norm."),
    (r"^projection\.", "feature_projection.projection."),
    (r"^masked_embedding$", "masked_spec_embed"),
    (r"^encoder\.pos_conv\.conv\.", "encoder.pos_conv_embed.conv."),
    (r"^encoder\.pos_conv\.convs\.(\d+)\.", r"encoder.pos_conv_embed.layers.\1.conv."),
    (r"^encoder\.relative_position\.embedding\.", "encoder.layers.0.attention.rel_attn_embed."),
    (r"^encoder\.layers\.(\d+)\.attention\.gate_const$", r"encoder.layers.\1.attention.gru_rel_pos_const"),
    (r"^encoder\.layers\.(\d+)\.attention\.gate_proj\.", r"encoder.layers.\1.attention.gru_rel_pos_linear."),
    (r"^encoder\.layers\.(\d+)\.attention_norm\.", r"encoder.layers.\1.layer_norm."),
    (r"^encoder\.layers\.(\d+)\.final_norm\.", r"encoder.layers.\1.final_layer_norm."),
    (r"^encoder\.layers\.(\d+)\.ffn_in\.", r"encoder.layers.\1.feed_forward.intermediate_dense."),
    (r"^encoder\.layers\.(\d+)\.ffn_out\.", r"encoder.layers.\1.feed_forward.output_dense."),
]
_ENCODER_ROOTS = ("feature_extractor", "feature_projection", "encoder", "masked_spec_embed")


def rename_key(key: str, table: list) -> str:
    """``key`` after the first pattern of ``table`` (:data:`IMPORT_NAMES` or :data:`EXPORT_NAMES`) that
    matches it; unchanged when none does."""
    for pattern, replacement in table:
        key, found = re.subn(pattern, replacement, key)
        if found:
            return key
    return key


def encoder_state_from_huggingface(hf_state: dict, family: str) -> tuple:
    """``(encoder tensors under speechkit's names, other tensors unchanged)`` of a transformers state dict of
    ``family`` (the bare model, or a task model whose encoder tensors carry the family's prefix)."""
    prefix = FAMILIES[family][0]
    ours, other = {}, {}
    for key, tensor in hf_state.items():
        inner = key[len(prefix):] if key.startswith(prefix) else key
        if inner.split(".")[0] in _ENCODER_ROOTS:
            ours[rename_key(inner, IMPORT_NAMES)] = tensor
        else:
            other[key] = tensor
    return ours, other


def encoder_state_to_huggingface(state: dict, prefix: str = "") -> dict:
    """speechkit's encoder tensors (a :class:`~speechkit.models.wav2vec2.Wav2Vec2Model` state dict) under
    transformers' names, each after ``prefix`` (``"hubert."`` etc. for a task model)."""
    return {prefix + rename_key(key, EXPORT_NAMES): tensor for key, tensor in state.items()}
