"""Load and write Whisper models in the Hugging Face ``transformers`` folder format.

A folder (``openai/whisper-tiny`` ... ``openai/whisper-large-v3-turbo``, or one written by
``save_pretrained``) holds ``config.json``, ``model.safetensors`` or ``pytorch_model.bin``,
``generation_config.json`` (special tokens and suppression rules) and the tokenizer (``tokenizer.json``, or
``vocab.json`` + ``merges.txt`` with ``added_tokens.json``). It may be a local path, a Hub repo id or a URL,
fetched through speechkit's fetching (cache, file lock, offline mode, size limits); the JSON files are checked
field by field before anything is built, and weights load as tensors only.

Example:
    >>> folder = load_whisper_folder("openai/whisper-tiny", savedir="whisper-tiny")  # doctest: +SKIP
    >>> folder.model.config.d_model                                                 # doctest: +SKIP
    384
    >>> export_whisper(folder, "exported/whisper-tiny")                              # doctest: +SKIP
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Optional, Union

from speechkit.atomic_files import atomic_write
from speechkit.errors import CheckpointError, FetchError, FetchNotFoundError
from speechkit.models.whisper.config import WhisperConfig
from speechkit.models.whisper.generation_config import WhisperGenerationConfig
from speechkit.models.whisper.huggingface import state_dict_from_huggingface, state_dict_to_huggingface
from speechkit.models.whisper.model import WhisperModel
from speechkit.models.whisper.tokenizer import WhisperTokenizer
from speechkit.pretrained.huggingface.config import MAX_CONFIG_BYTES, read_json_config
from speechkit.pretrained.huggingface.whisper_config_check import (
    check_generation_config,
    check_whisper_config,
)
from speechkit.pretrained.loading import load_weights, save_weights
from speechkit.pretrained.sources.fetching import network_allowed
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits
from speechkit.pretrained.sources.model_source import ModelSource

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
#: Largest tokenizer file read (tokenizer.json of the multilingual models is about 2.5 MB).
MAX_TOKENIZER_BYTES = 64 << 20


@dataclass
class WhisperFolder:
    """What a Whisper folder holds, built: the model, its decoding rules and tokenizer, and the weights'
    format (``"safetensors"`` or ``"bin"``, which :func:`export_whisper` writes back by default)."""

    model: WhisperModel
    generation: WhisperGenerationConfig
    tokenizer: Optional[WhisperTokenizer]
    weights_format: str
    files: dict


def load_whisper_folder(source, savedir=None, *, revision: Optional[str] = None, allow_network: bool = True,
                        cache_dir=None, limits: Optional[SourceLimits] = None,
                        force_download: bool = False) -> WhisperFolder:
    """Fetch and build a Whisper folder.

    Arguments:
        source: a :class:`~speechkit.pretrained.sources.model_source.ModelSource` (whose settings are used;
            the other arguments are then ignored), a local folder, a Hub repo id, a URL or a ``FetchSource``.
        savedir: where fetched files appear (default: in place / the cache).
        limits: size bounds on remote files (default :data:`DEFAULT_LIMITS`).

    Raises:
        FetchError: a required file is missing (``config.json``, the weights, ``generation_config.json``), or
            any file cannot be fetched (size limit, timeout, server error: an optional file is skipped only
            when the source does not have it).
        CheckpointError: a JSON file out of bounds or of the wrong type (naming file and key), an unsupported
            variant, or weights that do not fit the config.
    """
    if not isinstance(source, ModelSource):
        source = ModelSource(source, savedir, "symlink" if savedir is not None else "in_place",
                             revision=revision, allow_network=allow_network, cache_dir=cache_dir,
                             force_download=force_download, limits=limits or DEFAULT_LIMITS)
    files = fetch_whisper_files(source)
    config = WhisperConfig.from_huggingface(read_json_config(files["config.json"], str(files["config.json"])),
                                            str(files["config.json"]))
    path = files["generation_config.json"]
    generation = WhisperGenerationConfig.from_dict(read_json_config(path, str(path)), config, str(path))
    weights_name = next(name for name in WEIGHT_FILES if name in files)
    model = WhisperModel(config)
    load_whisper_weights(model, load_weights(files[weights_name]), str(files[weights_name]))
    tokenizer = None
    if "tokenizer.json" in files:
        tokenizer = WhisperTokenizer.from_file(files["tokenizer.json"])
    elif "vocab.json" in files:
        tokenizer = WhisperTokenizer.from_vocab_merges(files["vocab.json"], files["merges.txt"],
                                                       files.get("added_tokens.json"))
    weights_format = "safetensors" if weights_name.endswith(".safetensors") else "bin"
    return WhisperFolder(model.eval(), generation, tokenizer, weights_format, files)


def fetch_whisper_files(source: ModelSource) -> dict:
    """Fetch a Whisper folder's files through ``source`` (into its save folder), building nothing: name ->
    path. ``config.json`` and ``generation_config.json`` are checked field by field before the weights are
    fetched (``model.safetensors``, else ``pytorch_model.bin``); then the tokenizer (``tokenizer.json``, else
    ``vocab.json`` + ``merges.txt`` with ``added_tokens.json``) and the optional files transformers writes.

    Raises:
        FetchError, CheckpointError: as :func:`load_whisper_folder`.
    """
    limits = source.limits or DEFAULT_LIMITS
    where = source.source.path

    def optional(name: str, max_bytes: int):
        try:
            return source.fetch(name, max_bytes=max_bytes)
        except FetchNotFoundError:
            return None
        except FetchError:
            if network_allowed(source.allow_network):
                raise
            return None  # offline and not cached: whether the source has it cannot be asked

    files = {"config.json": source.fetch("config.json", max_bytes=MAX_CONFIG_BYTES)}
    hf_config = read_json_config(files["config.json"], str(files["config.json"]))
    check_whisper_config(hf_config, str(files["config.json"]))
    config = WhisperConfig.from_huggingface(hf_config, str(files["config.json"]))
    path = optional("generation_config.json", MAX_CONFIG_BYTES)
    if path is None:
        raise FetchError(f"{where}: no generation_config.json (Whisper's special tokens and suppression "
                         "rules are read from it)")
    files["generation_config.json"] = path
    check_generation_config(read_json_config(path, str(path)), config.vocab_size, str(path))
    for name in WEIGHT_FILES:
        path = optional(name, limits.max_file_bytes)
        if path is not None:
            files[name] = path
            break
    else:
        raise FetchError(f"{where}: no model.safetensors or pytorch_model.bin")
    tokenizer_json = optional("tokenizer.json", MAX_TOKENIZER_BYTES)
    if tokenizer_json is not None:
        files["tokenizer.json"] = tokenizer_json
    else:
        vocab, merges = optional("vocab.json", MAX_TOKENIZER_BYTES), optional("merges.txt",
                                                                              MAX_TOKENIZER_BYTES)
        if vocab is not None and merges is not None:
            files.update({"vocab.json": vocab, "merges.txt": merges})
            added = optional("added_tokens.json", MAX_TOKENIZER_BYTES)
            if added is not None:
                files["added_tokens.json"] = added
    for name in ("tokenizer_config.json", "preprocessor_config.json", "special_tokens_map.json",
                 "normalizer.json"):
        path = optional(name, MAX_TOKENIZER_BYTES)
        if path is not None:
            files[name] = path
    return files


def load_whisper_weights(model: WhisperModel, hf_state: dict, where: str) -> None:
    """Put a transformers state into ``model``; any missing, unexpected or mis-shaped tensor raises
    :class:`CheckpointError` naming ``where``."""
    ours = state_dict_from_huggingface(hf_state, model.config.tie_word_embeddings)
    expected = model.state_dict()
    if "encoder.embed_positions.weight" not in ours:  # fixed sinusoids: some exports leave them out
        ours["encoder.embed_positions.weight"] = expected["encoder.embed_positions.weight"]
    missing = sorted(set(expected) - set(ours))
    unexpected = sorted(set(ours) - set(expected))
    wrong = sorted(f"{key} {tuple(ours[key].shape)} (config: {tuple(expected[key].shape)})"
                   for key in set(ours) & set(expected) if ours[key].shape != expected[key].shape)
    if missing or unexpected or wrong:
        raise CheckpointError(f"{where}: does not fit the Whisper model of its config.json (missing "
                              f"{missing[:5]}, unexpected {unexpected[:5]}, wrong shape {wrong[:5]})")
    model.load_state_dict({key: tensor.float() for key, tensor in ours.items()})


def export_whisper(folder: Union[WhisperFolder, WhisperModel], path: Union[str, os.PathLike],
                   weights_format: Optional[str] = None) -> str:
    """Write a folder ``transformers`` loads: ``config.json``, the weights (``model.safetensors``, or
    ``pytorch_model.bin`` with ``weights_format="bin"``; default: the format it was loaded from), and, for a
    :class:`WhisperFolder`, its generation config and tokenizer files. The config is renamed into place last,
    so a half-written folder never looks complete. Returns the path."""
    model = folder.model if isinstance(folder, WhisperFolder) else folder
    weights_format = weights_format or (folder.weights_format if isinstance(folder, WhisperFolder)
                                        else "safetensors")
    if weights_format not in ("safetensors", "bin"):
        raise ValueError(f"weights_format must be 'safetensors' or 'bin', got {weights_format!r}")
    os.makedirs(path, exist_ok=True)
    hf_state = state_dict_to_huggingface(model.state_dict(), model.config.tie_word_embeddings)
    save_weights(hf_state, os.path.join(path, "model.safetensors" if weights_format == "safetensors"
                                        else "pytorch_model.bin"))
    if isinstance(folder, WhisperFolder):
        with open(os.path.join(path, "generation_config.json"), "w", encoding="utf-8") as handle:
            json.dump(folder.generation.to_dict(), handle, indent=2)
        for name, source in folder.files.items():
            if name.startswith(("tokenizer", "vocab", "merges", "added_tokens", "special_tokens",
                                "preprocessor",
                                "normalizer")):
                destination = os.path.join(path, name)
                if not (os.path.exists(destination) and os.path.samefile(source, destination)):
                    shutil.copyfile(source, destination)
    with atomic_write(os.path.join(path, "config.json")) as handle:  # last: a folder with it is complete
        json.dump(model.config.to_huggingface(), handle, indent=2)
    return os.fspath(path)
