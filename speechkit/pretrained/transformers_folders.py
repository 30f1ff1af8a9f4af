"""What a model folder without a ``hyperparams.yaml`` is: the one place that decides whether a folder is a
``transformers`` folder speechkit loads whole (Whisper), for a local folder, a Hub repo or a URL alike.

It is asked only after the source answered that the YAML is not there (a
:class:`~speechkit.errors.FetchNotFoundError`: a missing local file, HTTP 404 or 410, a Hub repo without the
file, or offline, a file recorded as missing): any other failure to fetch the YAML is the caller's to report,
never a reason to try something else. The folder's ``config.json`` is fetched through the
:class:`~speechkit.pretrained.sources.model_source.ModelSource` (its limits, cache and offline settings) and
its ``model_type`` names the interface
(:data:`~speechkit.pretrained.registry.TRANSFORMERS_FOLDER_INTERFACES`).

Example:
    >>> model = ModelSource.resolve("openai/whisper-tiny")        # doctest: +SKIP
    >>> transformers_folder_interface(model).__name__            # doctest: +SKIP
    'WhisperASR'
"""
from __future__ import annotations

from typing import Optional

from speechkit.errors import CheckpointError, FetchError, FetchNotFoundError
from speechkit.pretrained.huggingface.config import MAX_CONFIG_BYTES, read_json_config
from speechkit.pretrained.registry import interface_for_model_type
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS
from speechkit.pretrained.sources.model_source import ModelSource


def transformers_folder_interface(model: ModelSource,
                                  hparams_file: str = "hyperparams.yaml") -> Optional[type]:
    """The interface that loads ``model``'s folder whole, its ``hparams_file`` having been found missing:
    the one registered for its ``config.json``'s ``model_type``; None when the YAML was one the caller named
    (its absence is the answer), or the folder has no ``config.json``, an unreadable one (too large, not a
    JSON object) or one of another ``model_type``: the caller then reports the missing YAML.

    Raises:
        FetchError: ``config.json`` is there but cannot be fetched (a size limit, a timeout, a server error,
            offline and not cached), naming the missing YAML too.
    """
    if hparams_file != "hyperparams.yaml":
        return None
    max_bytes = min(MAX_CONFIG_BYTES, (model.limits or DEFAULT_LIMITS).max_yaml_bytes)
    try:
        config = model.fetch("config.json", max_bytes=max_bytes)
    except FetchNotFoundError:
        return None
    except FetchError as error:
        raise FetchError(f"{model.describe(hparams_file)} is missing, and its config.json could not be read "
                         f"to tell what the folder is: {error}") from None
    try:
        model_type = read_json_config(config, model.describe("config.json")).get("model_type")
    except CheckpointError:  # too large or not a JSON object: not a folder speechkit loads whole
        return None
    return interface_for_model_type(model_type)
