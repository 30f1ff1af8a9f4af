"""Check a transformers folder's JSON configs before anything is built from them.

A ``config.json`` from a Hub repo or a URL says how large a model to build: a ``hidden_size`` of 10**7 would
try to allocate hundreds of gigabytes before any weight is compared. Every field speechkit reads is checked
here for its type (an int is not a string, a float, a bool or null; a bool is not ``"false"``) and against
bounds no real wav2vec 2.0 model passes, and the whole model against a parameter budget; the
:class:`~speechkit.errors.CheckpointError` names the file and the key.

Example:
    >>> check_wav2vec2_config({"hidden_size": 768, "num_attention_heads": 12}, "config.json")
    >>> check_wav2vec2_config({"hidden_size": "768"}, "config.json")
    Traceback (most recent call last):
    ...
    speechkit.errors.CheckpointError: config.json: key 'hidden_size' must be an integer in [1, 8192], got ...
"""
from __future__ import annotations

import json
import math
import os
from typing import Union

from speechkit.errors import CheckpointError

#: Most parameters a wav2vec 2.0 config may describe (the largest published model has about 2 billion).
MAX_PARAMETERS = 4_000_000_000
#: Largest JSON config read (real ones are a few kilobytes).
MAX_CONFIG_BYTES = 1 << 20

INT, FLOAT, BOOL = "integer", "number", "boolean"
# key -> (kind, low, high): the transformers fields speechkit reads, with bounds no real model passes.
FIELDS = {
    "hidden_size": (INT, 1, 8192), "num_hidden_layers": (INT, 0, 256), "num_attention_heads": (INT, 1, 512),
    "intermediate_size": (INT, 1, 65536), "num_conv_pos_embeddings": (INT, 1, 4096),
    "num_conv_pos_embedding_groups": (INT, 1, 8192), "mask_time_length": (INT, 0, 100_000),
    "mask_time_min_masks": (INT, 0, 100_000), "mask_feature_length": (INT, 0, 100_000),
    "num_codevector_groups": (INT, 1, 64), "num_codevectors_per_group": (INT, 1, 65536),
    "codevector_dim": (INT, 1, 16384), "proj_codevector_dim": (INT, 1, 16384),
    "num_negatives": (INT, 0, 100_000), "layer_norm_eps": (FLOAT, 1e-12, 1.0),
    "hidden_dropout": (FLOAT, 0.0, 1.0), "attention_dropout": (FLOAT, 0.0, 1.0),
    "activation_dropout": (FLOAT, 0.0, 1.0), "feat_proj_dropout": (FLOAT, 0.0, 1.0),
    "feat_quantizer_dropout": (FLOAT, 0.0, 1.0), "layerdrop": (FLOAT, 0.0, 1.0),
    "mask_time_prob": (FLOAT, 0.0, 1.0), "mask_feature_prob": (FLOAT, 0.0, 1.0),
    "contrastive_logits_temperature": (FLOAT, 1e-6, 1000.0), "diversity_loss_weight": (FLOAT, 0.0, 1e6),
    "conv_bias": (BOOL, None, None), "do_stable_layer_norm": (BOOL, None, None),
}
# key -> (low, high) of each element, and the most elements.
LIST_FIELDS = {"conv_dim": (1, 8192), "conv_kernel": (1, 4096), "conv_stride": (1, 4096)}
MAX_CONV_LAYERS = 32
PREPROCESSOR_FIELDS = {"sampling_rate": (INT, 1000, 384_000), "do_normalize": (BOOL, None, None)}


def read_json_config(path: Union[str, os.PathLike], where: str) -> dict:
    """The JSON object in ``path``; a file that is too large, not UTF-8 JSON, or not an object raises
    :class:`CheckpointError` naming ``where``."""
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        raise CheckpointError(f"{where}: {size} bytes, more than the {MAX_CONFIG_BYTES} a JSON config may "
                              "have")
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except UnicodeDecodeError as error:
        raise CheckpointError(f"{where}: byte {error.start} is not UTF-8") from None
    except json.JSONDecodeError as error:  # its message gives line and column, never the text
        raise CheckpointError(f"{where}: not a readable JSON config ({error})") from None
    except RecursionError:
        raise CheckpointError(f"{where}: nested too deeply") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a JSON {_json_kind(config)}")
    return config


def check_wav2vec2_config(config: dict, where: str) -> None:
    """Raise :class:`CheckpointError` naming ``where`` and the key of the first field of a wrong type or out
    of bounds, or when the model would have more than :data:`MAX_PARAMETERS` parameters."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a JSON {_json_kind(config)}")
    for key, (kind, low, high) in FIELDS.items():
        if key in config:
            _check_value(config[key], kind, low, high, where, key)
    for key, (low, high) in LIST_FIELDS.items():
        if key not in config:
            continue
        values = config[key]
        if not isinstance(values, list) or not 1 <= len(values) <= MAX_CONV_LAYERS:
            raise CheckpointError(f"{where}: key '{key}' must be a list of 1 to {MAX_CONV_LAYERS} integers, "
                                  f"got {_shown(values)}")
        for index, value in enumerate(values):
            _check_value(value, INT, low, high, where, f"{key}[{index}]")
    if "feat_extract_norm" in config and config["feat_extract_norm"] not in ("group", "layer"):
        raise CheckpointError(f"{where}: key 'feat_extract_norm' must be \"group\" or \"layer\", got "
                              f"{_shown(config['feat_extract_norm'])}")
    parameters = estimated_parameters(config)
    if parameters > MAX_PARAMETERS:
        raise CheckpointError(f"{where}: describes a model of about {parameters:.3g} parameters "
                              "(hidden_size, intermediate_size, num_hidden_layers, conv_dim), more than "
                              f"{MAX_PARAMETERS:.3g}; refused before building it")


def check_preprocessor_config(config: dict, where: str) -> None:
    """Like :func:`check_wav2vec2_config` for ``preprocessor_config.json`` (``sampling_rate``,
    ``do_normalize``)."""
    if not isinstance(config, dict):
        raise CheckpointError(f"{where}: must hold a JSON object, got a JSON {_json_kind(config)}")
    for key, (kind, low, high) in PREPROCESSOR_FIELDS.items():
        if key in config:
            _check_value(config[key], kind, low, high, where, key)


def estimated_parameters(config: dict) -> int:
    """About how many parameters the config describes (transformer layers, feature encoder, positional
    convolution), from fields already checked (defaults: wav2vec 2.0 BASE)."""
    hidden = config.get("hidden_size", 768)
    layers = config.get("num_hidden_layers", 12)
    ffn = config.get("intermediate_size", 3072)
    channels = config.get("conv_dim", [512] * 7)
    kernels = config.get("conv_kernel", [10, 3, 3, 3, 3, 2, 2])
    groups = config.get("num_conv_pos_embedding_groups", 16)
    transformer = layers * (4 * hidden * hidden + 2 * hidden * ffn)
    previous, encoder = 1, 0
    for index, out in enumerate(channels):
        encoder += previous * out * kernels[min(index, len(kernels) - 1)]
        previous = out
    positional = hidden * hidden // max(1, groups) * config.get("num_conv_pos_embeddings", 128)
    quantizer = config.get("num_codevector_groups", 2) * config.get("num_codevectors_per_group", 320) * (
        config.get("codevector_dim", 256) + previous)
    return transformer + encoder + positional + previous * hidden + quantizer


def _check_value(value, kind: str, low, high, where: str, key: str) -> None:
    if kind == BOOL:
        if not isinstance(value, bool):
            raise CheckpointError(f"{where}: key '{key}' must be true or false, got {_shown(value)}")
        return
    valid = not isinstance(value, bool) and (isinstance(value, int) if kind == INT
                                             else isinstance(value, (int, float)) and math.isfinite(value))
    if not valid or not low <= value <= high:
        raise CheckpointError(f"{where}: key '{key}' must be {'an' if kind == INT else 'a'} {kind} in "
                              f"[{low}, {high}], got {_shown(value)}")


def _json_kind(value) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _shown(value) -> str:
    """The JSON kind and a short view of a value (its first characters only)."""
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
    return f"{_json_kind(value)} {text[:40]}{'...' if len(text) > 40 else ''}"
