"""Load and write wav2vec 2.0 models in the Hugging Face ``transformers`` folder format.

A folder holds ``config.json`` (``model_type: wav2vec2``) and ``model.safetensors`` (or
``pytorch_model.bin``); it may come from a local path, a Hub repo id or a URL, through speechkit's fetching
(cache, file lock, offline mode). Weights load as tensors only (safetensors or ``weights_only`` torch.load):
nothing from the folder runs.

- :func:`load_wav2vec2` -> :class:`~speechkit.models.wav2vec2.Wav2Vec2Pretraining` when the folder has the
  quantizer (``Wav2Vec2ForPreTraining`` checkpoints), else :class:`~speechkit.models.wav2vec2.Wav2Vec2Model`;
  a CTC head (``lm_head``, ``Wav2Vec2ForCTC``) is returned in ``extra``.
- :func:`export_wav2vec2` writes speechkit's model back as a folder ``transformers`` loads.

``config.json`` is checked field by field against sane bounds before the model is built
(:mod:`speechkit.pretrained.huggingface.config`).

Example:
    >>> model, extra = load_wav2vec2("facebook/wav2vec2-base", savedir="pretrained/w2v")  # doctest: +SKIP
    >>> export_wav2vec2(model, "exported/w2v")  # doctest: +SKIP
"""
from __future__ import annotations

import json
import logging
import os
from typing import Optional, Union

from speechkit.atomic_files import atomic_write
from speechkit.errors import CheckpointError, FetchError
from speechkit.models.wav2vec2 import Wav2Vec2Config, Wav2Vec2Model, Wav2Vec2Pretraining
from speechkit.models.wav2vec2.huggingface import EXPORT_NAMES, IMPORT_NAMES, rename_key
from speechkit.pretrained.huggingface.config import MAX_CONFIG_BYTES, check_wav2vec2_config, read_json_config
from speechkit.pretrained.loading import load_weights, save_weights
from speechkit.pretrained.sources.fetching import fetch
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS

logger = logging.getLogger(__name__)

#: speechkit config field -> transformers config field (same meaning, same value).
_CONFIG_FIELDS = {
    "conv_channels": "conv_dim", "conv_kernels": "conv_kernel", "conv_strides": "conv_stride",
    "conv_bias": "conv_bias", "feature_norm": "feat_extract_norm", "d_model": "hidden_size",
    "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads", "ffn_dim": "intermediate_size",
    "layer_norm_first": "do_stable_layer_norm", "pos_conv_kernel": "num_conv_pos_embeddings",
    "pos_conv_groups": "num_conv_pos_embedding_groups", "layer_norm_eps": "layer_norm_eps",
    "dropout": "hidden_dropout", "attention_dropout": "attention_dropout",
    "activation_dropout": "activation_dropout", "feature_dropout": "feat_proj_dropout",
    "quantizer_input_dropout": "feat_quantizer_dropout", "layer_drop": "layerdrop",
    "mask_prob": "mask_time_prob", "mask_length": "mask_time_length", "mask_min_spans": "mask_time_min_masks",
    "mask_channel_prob": "mask_feature_prob", "mask_channel_length": "mask_feature_length",
    "codebook_groups": "num_codevector_groups", "codebook_entries": "num_codevectors_per_group",
    "codevector_dim": "codevector_dim", "final_dim": "proj_codevector_dim",
    "logit_temperature": "contrastive_logits_temperature", "num_negatives": "num_negatives",
    "diversity_weight": "diversity_loss_weight",
}

#: Tensors of the pretraining heads: they keep their transformers names (the encoder's are renamed with
#: speechkit.models.wav2vec2.huggingface's tables).
_HEADS = ("quantizer.", "project_q.", "project_hid.")


def config_from_huggingface(hf_config: dict, where: str = "config.json") -> Wav2Vec2Config:
    """A :class:`Wav2Vec2Config` from a transformers ``config.json`` dict (unsupported variants raise)."""
    if hf_config.get("model_type", "wav2vec2") != "wav2vec2":
        raise CheckpointError(f"{where}: model_type {hf_config.get('model_type')!r} is not wav2vec2")
    for name, expected in (("hidden_act", "gelu"), ("feat_extract_activation", "gelu"),
                           ("add_adapter", False), ("adapter_attn_dim", None)):
        if hf_config.get(name, expected) != expected:
            raise CheckpointError(f"{where}: {name}={hf_config[name]!r} is not supported (only {expected!r})")
    defaults = Wav2Vec2Config()
    values = {ours: hf_config[theirs] for ours, theirs in _CONFIG_FIELDS.items() if theirs in hf_config}
    for name in ("conv_channels", "conv_kernels", "conv_strides"):
        values.setdefault(name, getattr(defaults, name))
    return Wav2Vec2Config(**values)


def config_to_huggingface(config: Wav2Vec2Config, architecture: str) -> dict:
    """A transformers ``config.json`` dict for ``config`` (``architecture``: the transformers class name)."""
    hf_config = {"model_type": "wav2vec2", "architectures": [architecture], "hidden_act": "gelu",
                 "feat_extract_activation": "gelu", "num_feat_extract_layers": len(config.conv_channels)}
    for ours, theirs in _CONFIG_FIELDS.items():
        value = getattr(config, ours)
        hf_config[theirs] = list(value) if isinstance(value, tuple) else value
    return hf_config


def state_dict_from_huggingface(hf_state: dict) -> tuple:
    """Rename transformers tensors to speechkit's: ``(model tensors, other tensors)``.

    Model tensors are keyed for :class:`Wav2Vec2Pretraining` (``wav2vec2.`` prefix) when the state has the
    quantizer, else for :class:`Wav2Vec2Model`. Other tensors (e.g. ``lm_head.*``) are returned unchanged.
    """
    pretraining = any(key.startswith("quantizer.") for key in hf_state)
    ours, other = {}, {}
    for key, tensor in hf_state.items():
        inner = key[len("wav2vec2."):] if key.startswith("wav2vec2.") else None
        if inner is None and not key.startswith(_HEADS) and key.split(".")[0] in (
                "feature_extractor", "feature_projection", "encoder", "masked_spec_embed"):
            inner = key  # a bare Wav2Vec2Model state
        if inner is not None:
            inner = rename_key(inner, IMPORT_NAMES)
            ours[("wav2vec2." if pretraining else "") + inner] = tensor
        elif key.startswith(_HEADS) and pretraining:
            ours[key] = tensor
        else:
            other[key] = tensor
    return ours, other


def state_dict_to_huggingface(model: Union[Wav2Vec2Model, Wav2Vec2Pretraining]) -> dict:
    """speechkit's tensors under transformers names (``wav2vec2.`` prefixed for a pretraining model)."""
    hf_state = {}
    for key, tensor in model.state_dict().items():
        prefix, inner = ("wav2vec2.", key[len("wav2vec2."):]) if key.startswith("wav2vec2.") else ("", key)
        if prefix or isinstance(model, Wav2Vec2Model):
            inner = rename_key(inner, EXPORT_NAMES)
        hf_state[prefix + inner] = tensor
    return hf_state



def load_wav2vec2(source: Union[str, os.PathLike], savedir: Optional[Union[str, os.PathLike]] = None, *,
                  revision: Optional[str] = None, allow_network: bool = True,
                  cache_dir: Optional[Union[str, os.PathLike]] = None) -> tuple:
    """Build speechkit's model from a transformers wav2vec 2.0 folder: ``(model, extra tensors)``.

    Arguments:
        source: a local folder, a Hub repo id (``facebook/wav2vec2-base``), a URL or a ``FetchSource``.
        savedir: where the fetched files appear (default: in place, the local folder or the cache).

    Raises:
        FetchError: neither ``model.safetensors`` nor ``pytorch_model.bin`` in the source.
        CheckpointError: an unsupported config, or tensors missing or of the wrong shape.
    """
    strategy = "symlink" if savedir is not None else "in_place"
    options = dict(savedir=savedir, strategy=strategy, revision=revision, allow_network=allow_network,
                   cache_dir=cache_dir)
    config_path = fetch("config.json", source, max_bytes=MAX_CONFIG_BYTES, **options)
    hf_config = read_json_config(config_path, str(config_path))
    check_wav2vec2_config(hf_config, str(config_path))  # before anything is built from it
    config = config_from_huggingface(hf_config, str(config_path))
    weights_path = None
    for name in ("model.safetensors", "pytorch_model.bin"):
        try:
            # Bounded: a server streaming without Content-Length stops at the limit.
            weights_path = fetch(name, source, max_bytes=DEFAULT_LIMITS.max_file_bytes, **options)
            break
        except FetchError as error:
            missing = error
    if weights_path is None:
        raise FetchError(f"{source}: no model.safetensors or pytorch_model.bin ({missing})")
    ours, extra = state_dict_from_huggingface(load_weights(weights_path))
    pretraining = any(key.startswith("quantizer.") for key in ours)
    model = (Wav2Vec2Pretraining if pretraining else Wav2Vec2Model)(config)
    expected = model.state_dict()
    if "wav2vec2.masked_embedding" not in ours and "masked_embedding" not in ours:
        # transformers leaves the mask embedding out when its config masks nothing; keep ours.
        name = "wav2vec2.masked_embedding" if pretraining else "masked_embedding"
        ours[name] = expected[name]
    load_whole(model, ours, f"{weights_path}: does not fit the wav2vec 2.0 model of {config_path}")
    return model, extra


def load_whole(model, state: dict, does_not_fit: str) -> None:
    """Load ``state`` into ``model`` only if every key is there with its shape; else raise CheckpointError
    starting with ``does_not_fit`` and naming the first missing, unexpected and wrongly shaped keys."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    wrong = sorted(key for key in set(state) & set(expected) if state[key].shape != expected[key].shape)
    if missing or unexpected or wrong:
        raise CheckpointError(f"{does_not_fit} (missing {missing[:5]}, unexpected {unexpected[:5]}, wrong "
                              f"shape {wrong[:5]})")
    model.load_state_dict(state)


def export_wav2vec2(model: Union[Wav2Vec2Model, Wav2Vec2Pretraining], folder: Union[str, os.PathLike],
                    extra: Optional[dict] = None, architecture: Optional[str] = None) -> str:
    """Write ``config.json`` and ``model.safetensors`` that ``transformers`` loads; returns the folder.

    Arguments:
        extra: tensors to add as they are (e.g. ``{"lm_head.weight": ..., "lm_head.bias": ...}`` for a CTC
            model, whose encoder tensors then take the ``wav2vec2.`` prefix).
        architecture: the transformers class to name (default: ``Wav2Vec2ForPreTraining`` for a pretraining
            model, ``Wav2Vec2ForCTC`` with a ``lm_head``, else ``Wav2Vec2Model``).
    """
    hf_state = state_dict_to_huggingface(model)
    if extra:
        if isinstance(model, Wav2Vec2Model):
            hf_state = {f"wav2vec2.{key}": tensor for key, tensor in hf_state.items()}
        hf_state.update(extra)
    if architecture is None:
        architecture = ("Wav2Vec2ForPreTraining" if isinstance(model, Wav2Vec2Pretraining) else
                        "Wav2Vec2ForCTC" if extra and "lm_head.weight" in extra else "Wav2Vec2Model")
    hf_config = config_to_huggingface(model.config, architecture)
    return write_huggingface_folder(folder, hf_config, hf_state, extra)


def write_huggingface_folder(folder, hf_config: dict, hf_state: dict, extra: Optional[dict]) -> str:
    """Write ``config.json`` and ``model.safetensors`` as transformers reads them; a CTC head in ``extra``
    (``lm_head.weight``) sets the config's ``vocab_size``. The config is renamed into place last, so a
    half-written folder never looks complete. Returns the folder."""
    if extra and "lm_head.weight" in extra:
        hf_config["vocab_size"] = int(extra["lm_head.weight"].shape[0])
    os.makedirs(folder, exist_ok=True)
    save_weights(hf_state, os.path.join(folder, "model.safetensors"))
    with atomic_write(os.path.join(folder, "config.json")) as handle:
        json.dump(hf_config, handle, indent=2)
    return os.fspath(folder)
