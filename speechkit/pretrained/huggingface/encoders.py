"""Load and write the encoders of all four wav2vec 2.0-style families in the ``transformers`` folder format.

``config.json``'s ``model_type`` decides: ``wav2vec2`` goes to
:func:`~speechkit.pretrained.huggingface.wav2vec2.load_wav2vec2`; ``hubert``, ``wavlm`` and
``data2vec-audio`` are read here with the converters of :mod:`speechkit.models.wav2vec2.huggingface` into a
:class:`~speechkit.models.wav2vec2.Wav2Vec2Model` whose features equal the transformers model's. Weights
load as tensors only (safetensors or ``weights_only`` torch.load), through speechkit's fetching.

Example:
    >>> model, extra = load_encoder("microsoft/wavlm-base-plus", savedir="pretrained/wavlm")  # doctest: +SKIP
    >>> export_encoder(model, "exported/wavlm", "wavlm")  # doctest: +SKIP
"""
from __future__ import annotations

import os
import pathlib
from typing import Optional, Union

from speechkit.errors import CheckpointError, FetchError
from speechkit.models.wav2vec2 import Wav2Vec2Model, Wav2Vec2Pretraining
from speechkit.models.wav2vec2.huggingface import (
    FAMILIES,
    encoder_config_from_huggingface,
    encoder_config_to_huggingface,
    encoder_state_from_huggingface,
    encoder_state_to_huggingface,
    family_of,
)
from speechkit.pretrained.huggingface.config import MAX_CONFIG_BYTES, check_wav2vec2_config, read_json_config
from speechkit.pretrained.huggingface.wav2vec2 import load_whole, write_huggingface_folder
from speechkit.pretrained.loading import load_weights
from speechkit.pretrained.sources.fetching import fetch
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS

#: Every ``model_type`` :func:`load_encoder` reads.
MODEL_TYPES = ("wav2vec2", *FAMILIES)


def read_config(source, **options) -> tuple:
    """``(config dict, its path)`` of a folder's ``config.json``: bounded in size, a JSON object, its shared
    fields within the bounds and parameter budget of :mod:`speechkit.pretrained.huggingface.config`, and a
    ``model_type`` of the four families."""
    config_path = fetch("config.json", source, max_bytes=MAX_CONFIG_BYTES, **options)
    hf_config = read_json_config(config_path, str(config_path))
    check_wav2vec2_config(hf_config, str(config_path))  # before anything is built from it
    model_type = hf_config.get("model_type", "wav2vec2")
    if model_type not in MODEL_TYPES:
        raise CheckpointError(f"{config_path}: model_type {model_type!r} is not one of {list(MODEL_TYPES)}")
    return hf_config, config_path


def _fetch_weights(source, **options):
    missing = None
    for name in ("model.safetensors", "pytorch_model.bin"):
        try:
            # Bounded: a server streaming without Content-Length stops at the limit.
            return fetch(name, source, max_bytes=DEFAULT_LIMITS.max_file_bytes, **options)
        except FetchError as error:
            missing = error
    raise FetchError(f"{source}: no model.safetensors or pytorch_model.bin ({missing})")


def load_encoder(source: Union[str, os.PathLike], savedir: Optional[Union[str, os.PathLike]] = None, *,
                 revision: Optional[str] = None, allow_network: bool = True,
                 cache_dir: Optional[Union[str, os.PathLike]] = None) -> tuple:
    """``(model, extra tensors, model_type)`` of a transformers folder of any of the four families.

    ``model`` is a :class:`Wav2Vec2Model` (or a :class:`Wav2Vec2Pretraining` for a wav2vec 2.0 folder with
    its quantizer); ``extra`` holds the tensors that are not the encoder's (a CTC ``lm_head``, ...).

    Raises:
        FetchError: no weights in the source.
        CheckpointError: a config value of the wrong type or an unsupported variant (naming the file and
            key), or tensors missing or of the wrong shape.
    """
    strategy = "symlink" if savedir is not None else "in_place"
    options = dict(savedir=savedir, strategy=strategy, revision=revision, allow_network=allow_network,
                   cache_dir=cache_dir)
    hf_config, config_path = read_config(source, **options)
    model_type = hf_config.get("model_type", "wav2vec2")
    if model_type == "wav2vec2":
        from speechkit.pretrained.huggingface.wav2vec2 import load_wav2vec2

        model, extra = load_wav2vec2(source, savedir, revision=revision, allow_network=allow_network,
                                     cache_dir=cache_dir)
        return model, extra, model_type
    config = encoder_config_from_huggingface(hf_config, str(config_path))
    weights_path = _fetch_weights(source, **options)
    ours, extra = encoder_state_from_huggingface(load_weights(weights_path), model_type)
    model = Wav2Vec2Model(config)
    expected = model.state_dict()
    # transformers leaves the mask embedding out when its config masks nothing; keep ours then.
    ours.setdefault("masked_embedding", expected["masked_embedding"])
    load_whole(model, ours, f"{weights_path}: does not fit the {model_type} encoder of {config_path}")
    return model, extra, model_type


def export_encoder(model: Union[Wav2Vec2Model, Wav2Vec2Pretraining], folder: Union[str, os.PathLike],
                   model_type: Optional[str] = None, extra: Optional[dict] = None,
                   architecture: Optional[str] = None) -> str:
    """Write ``config.json`` and ``model.safetensors`` that transformers loads as ``model_type``.

    ``model_type`` defaults to the family whose layout the encoder has (``wavlm`` with a relative position
    bias, ``data2vec-audio`` with stacked positional convolutions, else ``wav2vec2``); ``hubert`` must be
    asked for, since its encoder is wav2vec 2.0's. ``extra`` tensors (e.g. a CTC ``lm_head``) are added as
    they are, and the encoder's then take the family's prefix.
    """
    encoder = model.wav2vec2 if isinstance(model, Wav2Vec2Pretraining) else model
    if model_type is None:
        layout = family_of(encoder.config)
        model_type = "wav2vec2" if layout == "hubert" else layout
    if model_type == "wav2vec2":
        from speechkit.pretrained.huggingface.wav2vec2 import export_wav2vec2

        return export_wav2vec2(model, folder, extra, architecture)
    if model_type not in FAMILIES:
        raise CheckpointError(f"{folder}: cannot write model_type {model_type!r}; one of {list(MODEL_TYPES)}")
    prefix, bare = FAMILIES[model_type]
    hf_state = encoder_state_to_huggingface(encoder.state_dict(), prefix if extra else "")
    if extra:
        hf_state.update(extra)
    if architecture is None:
        task = bare.replace("Model", "ForCTC")
        architecture = task if extra and "lm_head.weight" in extra else bare
    hf_config = encoder_config_to_huggingface(encoder.config, model_type, architecture)
    return write_huggingface_folder(folder, hf_config, hf_state, extra)


def write_inference_yaml(template: Union[str, os.PathLike], path: Union[str, os.PathLike], config,
                         vocab_size: int) -> pathlib.Path:
    """Write ``path``: the inference YAML ``template`` with a fine-tuned encoder's sizes (``encoder_dim``,
    ``vocab_size`` and ``config``, a :class:`Wav2Vec2Config`) between its ``# SIZES`` and ``# END OF SIZES``
    lines, so that ``speechkit export`` builds the model folder of whichever encoder a run loaded.

    ``encoder_dim``, not ``d_model``: ``speechkit export`` takes the run YAML's sizes for an inference YAML's
    top-level keys, and a run YAML's ``d_model`` is its random encoder's, not the loaded one's.

    Example:
        >>> write_inference_yaml("hparams/inference.yaml", "out/inference.yaml", config, 40)  # doctest: +SKIP
    """
    import dataclasses

    import yaml

    from speechkit.errors import HparamsError

    sizes = {key: list(value) if isinstance(value, tuple) else value
             for key, value in dataclasses.asdict(config).items()}
    header = yaml.safe_dump({"encoder_dim": config.d_model, "vocab_size": vocab_size}, sort_keys=False)
    block = yaml.safe_dump(sizes, sort_keys=False, default_flow_style=None)
    before, found, rest = pathlib.Path(template).read_text(encoding="utf-8").partition("\n# SIZES")
    _, end, after = rest.partition("# END OF SIZES\n")
    if not (found and end):
        raise HparamsError(f"{template}: no '# SIZES' ... '# END OF SIZES' lines around the encoder's sizes")
    text = (f"{before}\n# SIZES of the fine-tuned encoder (written by the run)\n{header}"
            "config: !new:speechkit.models.wav2vec2.Wav2Vec2Config\n"
            + "".join(f"    {line}\n" for line in block.splitlines()) + end + after)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.with_suffix(".partial").write_text(text, encoding="utf-8")
    path.with_suffix(".partial").replace(path)
    return path
