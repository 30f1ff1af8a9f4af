"""Fetch a whole model folder ahead of time, building nothing: its ``hyperparams.yaml`` and every file its
``pretrainer`` lists (``speechkit fetch`` on a cluster's login node, before jobs run offline).

The YAML is read as data. From a non-local folder it is bounded and checked like one that will be built
(size, the names that become paths, the pretrainer's files must be remote), so a pre-fetch never lets a
folder read or write this machine's files that loading it would refuse.

Example:
    >>> from speechkit.pretrained.sources.model_source import ModelSource
    >>> files = prefetch_model(ModelSource.resolve("models/asr", savedir="models/asr-copy"))  # doctest: +SKIP
    >>> sorted(files)  # doctest: +SKIP
    ['asr', 'hyperparams.yaml', 'tokenizer']
"""
from __future__ import annotations

import pathlib

from speechkit.errors import FetchError, FetchNotFoundError
from speechkit.pretrained.pretrainer import Pretrainer, declared_files
from speechkit.pretrained.safety.guard import read_untrusted_yaml
from speechkit.pretrained.sources.model_source import ModelSource
from speechkit.pretrained.sources.names import check_pretrainer_names
from speechkit.pretrained.transformers_folders import transformers_folder_interface


def prefetch_model(model: ModelSource, hparams_file: str = "hyperparams.yaml") -> dict:
    """Fetch ``hparams_file`` and the files its pretrainer names into ``model.savedir``.

    Returns file name -> path: ``hparams_file`` first, then each loadable's name; for a transformers folder
    loaded whole (a Whisper folder: ``config.json`` and no ``hyperparams.yaml``), each of its files. Raises
    ``FetchError`` or ``UnsafeSourceError`` naming the YAML and its source.
    """
    where = model.describe(hparams_file)
    bounded = not model.local and model.limits is not None
    try:
        yaml_path = model.fetch(hparams_file, max_bytes=model.limits.max_yaml_bytes if bounded else None)
    except FetchNotFoundError:  # a folder loaded whole (Whisper) has none; any other failure is reported
        whole = transformers_folder_interface(model, hparams_file)
        if whole is None:
            raise
        return whole.fetch_files(model)
    if model.local:
        text = _read_utf8(yaml_path, where)
    else:
        text = read_untrusted_yaml(yaml_path, where, model.limits)
        check_pretrainer_names(text, where)
    specs = declared_files(text, hparams_file)
    pretrainer = Pretrainer(model.savedir, {name: None for name in specs}, specs, strategy=model.strategy)
    return {hparams_file: yaml_path, **pretrainer.collect_model_files(model, model.savedir, where)}


def _read_utf8(path: pathlib.Path, where: str) -> str:
    try:
        return pathlib.Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise FetchError(f"{where}: byte {error.start} is not UTF-8; a hyperparams file must be UTF-8 "
                         "text") from None
