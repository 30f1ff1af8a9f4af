"""Bring SpeechBrain ECAPA-TDNN speaker models (``speechbrain/spkrec-ecapa-voxceleb``-style folders) into
speechkit, with equal embeddings.

Such a folder holds ``hyperparams.yaml`` (an ``embedding_model`` built by
``speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN``, ``compute_features`` (an 80-band filterbank),
``mean_var_norm`` (per-utterance mean subtraction) and ``mean_var_norm_emb`` (a global embedding mean)),
``embedding_model.ckpt`` (the model's state dict) and ``mean_var_norm_emb.ckpt`` (``glob_mean``,
``glob_std``, ``count``). :func:`import_speechbrain_folder` reads them as data only (the YAML with a loader
that builds nothing, the checkpoints with ``torch.load(weights_only=True)``), maps the weights onto
:class:`~speechkit.models.speaker.ECAPATDNN` (the same layers; SpeechBrain wraps each convolution and batch
norm in a module of its own, one more name in each key) and writes a speechkit model folder for
:class:`~speechkit.pretrained.SpeakerRecognition`.

Equal embeddings: from the same filterbank features the converted model gives SpeechBrain's embeddings
(to float rounding; tests/unit/models/test_speechbrain_import.py), and the embedding normalization is the
same. The filterbank front end is speechkit's :class:`~speechkit.features.Fbank` with SpeechBrain's
settings (80 bands, 25 ms Hamming windows every 10 ms), not a bit-exact copy of SpeechBrain's (which clips
each utterance's log energies 80 dB below its maximum and uses a 400-point FFT).

Example:
    >>> import_speechbrain_folder("spkrec-ecapa-voxceleb", "ecapa-speechkit")        # doctest: +SKIP
    >>> SpeakerRecognition.from_hparams("ecapa-speechkit").verify_files("a.wav", "b.wav")  # doctest: +SKIP
"""
from __future__ import annotations

import os
import pathlib

import torch
import yaml

from speechkit.errors import CheckpointError, HparamsError
from speechkit.models.speaker.ecapa import ECAPATDNN

#: SpeechBrain's wrapper modules: a key part named like this, after one of these, is the wrapper's inner
#: module (``blocks.0.conv.conv.weight`` -> ``blocks.0.conv.weight``).
_WRAPPED = {"conv": {"conv", "conv1", "conv2", "shortcut", "fc"}, "norm": {"norm", "asp_bn"}}
#: ECAPA_TDNN arguments speechkit's ECAPATDNN takes under the same name.
_ECAPA_ARGUMENTS = ("input_size", "channels", "kernel_sizes", "dilations", "attention_channels",
                    "res2net_scale", "se_channels", "lin_neurons", "global_context")


def speechbrain_key(key: str) -> str:
    """speechkit's name of a SpeechBrain ECAPA_TDNN state-dict key.

    Example:
        >>> speechbrain_key("blocks.1.se_block.conv1.conv.weight")
        'blocks.1.se_block.conv1.weight'
        >>> speechbrain_key("asp_bn.norm.running_mean")
        'asp_bn.running_mean'
    """
    parts = key.split(".")
    kept = [part for index, part in enumerate(parts)
            if not (index > 0 and part in _WRAPPED and parts[index - 1] in _WRAPPED[part]
                    and index < len(parts) - 1)]
    return ".".join(kept)


def convert_state_dict(state: dict) -> dict:
    """A SpeechBrain ECAPA_TDNN state dict with speechkit's key names."""
    return {speechbrain_key(key): value for key, value in state.items()}


class _DataLoader(yaml.SafeLoader):
    """A YAML loader that builds nothing: ``!new:``/``!name:``/``!ref`` ... nodes become plain data."""


def _tagged(loader, tag_suffix, node):
    if isinstance(node, yaml.MappingNode):
        return {"__tag__": tag_suffix, **loader.construct_mapping(node, deep=True)}
    if isinstance(node, yaml.SequenceNode):
        return {"__tag__": tag_suffix, "__args__": loader.construct_sequence(node, deep=True)}
    return {"__tag__": tag_suffix, "__value__": loader.construct_scalar(node)}


_DataLoader.add_multi_constructor("!", _tagged)


def read_speechbrain_hparams(path) -> dict:
    """The YAML of a SpeechBrain folder as data (no object is built, nothing is imported)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.load(handle, Loader=_DataLoader)  # noqa: S506 (builds plain data only)
    except (OSError, yaml.YAMLError) as error:
        raise HparamsError(f"{path}: cannot read it as YAML: {error}") from None
    if not isinstance(data, dict):
        raise HparamsError(f"{path}: expected a mapping of keys")
    return data


def _resolve(value, data: dict):
    """Follow ``!ref <key>`` nodes to their values (one level of arithmetic-free references)."""
    if isinstance(value, dict) and value.get("__tag__", "").startswith("ref"):
        name = str(value.get("__value__", "")).strip("<>")
        if name not in data:
            raise HparamsError(f"a !ref names {name!r}, which the YAML does not define")
        return _resolve(data[name], data)
    if isinstance(value, list):
        return [_resolve(v, data) for v in value]
    return value


def ecapa_arguments(data: dict, where: str) -> dict:
    """ECAPATDNN arguments from a SpeechBrain YAML's ``embedding_model``."""
    model = data.get("embedding_model")
    if not isinstance(model, dict) or not str(model.get("__tag__", "")).endswith("ECAPA_TDNN"):
        raise HparamsError(f"{where}: key 'embedding_model' must be a speechbrain ECAPA_TDNN "
                           "(!new:...ECAPA_TDNN)")
    arguments = {name: _resolve(model[name], data) for name in _ECAPA_ARGUMENTS if name in model}
    unknown = sorted(k for k in model if k not in _ECAPA_ARGUMENTS and not k.startswith("__")
                     and k not in ("activation", "groups", "dropout"))
    if unknown:
        raise HparamsError(f"{where}: embedding_model sets {unknown}, which speechkit's ECAPATDNN does not "
                           "take")
    return arguments


def _load_checkpoint(path) -> dict:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 (any unreadable file: say which)
        raise CheckpointError(f"{path}: cannot load it as weights ({type(error).__name__}: {error})") \
            from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: expected a dict of tensors")
    return state


def load_speechbrain_ecapa(folder) -> tuple:
    """``(ECAPATDNN with SpeechBrain's weights, embedding (mean, std) or None, n_mels, sample_rate)``."""
    folder = pathlib.Path(folder)
    where = folder / "hyperparams.yaml"
    data = read_speechbrain_hparams(where)
    model = ECAPATDNN(**ecapa_arguments(data, str(where)))
    state = convert_state_dict(_load_checkpoint(folder / "embedding_model.ckpt"))
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise CheckpointError(f"{folder / 'embedding_model.ckpt'}: does not fit the YAML's ECAPA_TDNN "
                              f"(missing {missing[:5]}, unexpected {unexpected[:5]})")
    for key, value in state.items():
        if value.shape != expected[key].shape:
            raise CheckpointError(f"{folder / 'embedding_model.ckpt'}: {key} has shape {tuple(value.shape)}, "
                                  f"the YAML's model {tuple(expected[key].shape)}")
    model.load_state_dict(state)
    embedding_norm = None
    if (folder / "mean_var_norm_emb.ckpt").is_file():
        stats = _load_checkpoint(folder / "mean_var_norm_emb.ckpt")
        if "glob_mean" not in stats:
            raise CheckpointError(f"{folder / 'mean_var_norm_emb.ckpt'}: no glob_mean")
        settings = data.get("mean_var_norm_emb") if isinstance(data.get("mean_var_norm_emb"), dict) else {}
        std = stats.get("glob_std") if _resolve(settings.get("std_norm", True), data) else None
        embedding_norm = (stats["glob_mean"].float(), None if std is None else std.float().clamp(min=1e-10))
    features = data.get("compute_features") if isinstance(data.get("compute_features"), dict) else {}
    n_mels = int(_resolve(features.get("n_mels", 80), data))
    sample_rate = int(_resolve(data.get("sample_rate", 16000), data))
    return model, embedding_norm, n_mels, sample_rate


FOLDER_YAML = """\
# Converted from the SpeechBrain folder {source} by speechkit.pretrained.speechbrain_import.
interface: SpeakerRecognition
sample_rate: {sample_rate}
threshold: {threshold}
compute_features: !new:speechkit.features.Fbank
    sample_rate: {sample_rate}
    n_fft: 400
    n_mels: {n_mels}
mean_var_norm: !new:speechkit.features.UtteranceNormalization
    norm_vars: False
embedding_model: !new:speechkit.models.speaker.ECAPATDNN
{model_arguments}embedding_norm: !new:speechkit.models.speaker.EmbeddingNormalization
    dim: {dim}
modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    embedding_norm: !ref <embedding_norm>
pretrainer: !new:speechkit.pretrained.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
        embedding_norm: !ref <embedding_norm>
    paths:
        embedding_model: embedding_model.safetensors
        embedding_norm: embedding_norm.safetensors
"""


def import_speechbrain_folder(source, output, threshold: float = 0.25) -> pathlib.Path:
    """Write a speechkit model folder at ``output`` from the SpeechBrain folder ``source``; returns it.

    ``threshold`` is the cosine score from which ``verify_files`` says "same speaker" (SpeechBrain's
    ``SpeakerRecognition.verify_files`` uses 0.25).
    """
    from speechkit.models.speaker.layers import EmbeddingNormalization
    from speechkit.pretrained.loading import save_weights

    model, norm, n_mels, sample_rate = load_speechbrain_ecapa(source)
    output = pathlib.Path(output)
    output.mkdir(parents=True, exist_ok=True)
    arguments = ecapa_arguments(read_speechbrain_hparams(pathlib.Path(source) / "hyperparams.yaml"), "")
    lines = "".join(f"    {name}: {list(value) if isinstance(value, (list, tuple)) else value}\n"
                    for name, value in arguments.items())
    mean, std = norm if norm is not None else (None, None)
    embedding_norm = EmbeddingNormalization(model.embedding_size, mean, std)
    save_weights(model.state_dict(), output / "embedding_model.safetensors")
    save_weights(embedding_norm.state_dict(), output / "embedding_norm.safetensors")
    text = FOLDER_YAML.format(source=os.path.basename(os.path.abspath(source)), sample_rate=sample_rate,
                              threshold=threshold, n_mels=n_mels, model_arguments=lines,
                              dim=model.embedding_size)
    (output / "hyperparams.yaml").write_text(text, encoding="utf-8")
    return output
