"""Which checkpoint to evaluate or export, and loading the module weights of one.

A checkpoint is chosen by path (a run's ``CKPT+...`` folder, or one written by ``speechkit
average-checkpoints``) or as the best of a checkpoints folder by a metric; ``speechkit export --checkpoints``
and the run option ``--eval_checkpoint`` use this module (docs/training.md, "Evaluating or exporting a chosen
checkpoint").

Example:
    >>> from speechkit.checkpoints import Checkpointer
    >>> encoder = torch.nn.Linear(3, 2)
    >>> for wer in (12.5, 9.8, 11.0):   # what a run's epochs leave in its save folder
    ...     _ = Checkpointer("save", {"encoder": encoder}).save_checkpoint(meta={"WER": wer})
    >>> best = select_checkpoint("save", min_key="WER")
    >>> best.meta
    {'WER': 9.8}
    >>> load_module_weights({"encoder": encoder}, best)
    ['encoder']
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import torch

from speechkit.checkpoints.checkpointer import (
    META_FILE,
    SUFFIX,
    Checkpoint,
    Checkpointer,
    note_loaded,
    read_checkpoint,
)
from speechkit.errors import CheckpointError


def select_checkpoint(path: str | os.PathLike, min_key: Optional[str] = None,
                      max_key: Optional[str] = None) -> Checkpoint:
    """``path`` itself when it is one checkpoint (it holds ``meta.json``: a ``CKPT+`` folder, an averaged
    one), else the best checkpoint of the checkpoints folder ``path`` by ``min_key``/``max_key`` (newest
    without a key).

    Raises:
        CheckpointError: no such checkpoint (naming the folder and the key), or a key with one checkpoint.
    """
    path = Path(path)
    if (path / META_FILE).is_file():
        if min_key or max_key:
            raise CheckpointError(f"{path} is one checkpoint: there is nothing to choose by "
                                  f"'{min_key or max_key}' (give its parent folder to choose among several)")
        return read_checkpoint(path)
    if not path.is_dir():
        raise CheckpointError(f"{path}: no such checkpoint or checkpoints folder")
    checkpoint = Checkpointer(path).find_checkpoint(min_key=min_key, max_key=max_key)
    if checkpoint is None:
        key = f" with the key '{min_key or max_key}'" if (min_key or max_key) else ""
        raise CheckpointError(f"{path}: no checkpoint{key}")
    return checkpoint


def load_module_weights(modules: dict, checkpoint: Checkpoint) -> list:
    """Load ``<name>.ckpt`` of ``checkpoint`` into each module of ``modules`` that has weights (an averaged
    checkpoint holds only these); returns the loaded names.

    Raises:
        CheckpointError: naming the checkpoint and the modules it has no file for.
    """
    with_weights = {n: m for n, m in modules.items() if isinstance(m, torch.nn.Module) and m.state_dict()}
    missing = [n for n in with_weights if not (checkpoint.path / f"{n}{SUFFIX}").is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {checkpoint.path} holds no weights for "
                              f"{', '.join(repr(n) for n in missing)} (expected "
                              f"{', '.join(n + SUFFIX for n in missing)})")
    for name, module in with_weights.items():
        path = checkpoint.path / f"{name}{SUFFIX}"
        try:
            module.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        except Exception as error:
            raise CheckpointError(f"{path}: cannot load '{name}': {type(error).__name__}: {error}") from error
        note_loaded(module, checkpoint, name)
    return list(with_weights)
