"""Checkpoints that are atomic, complete and resumable mid-epoch.

A checkpoint is a folder ``CKPT+<date>+<time>+<nn>`` in ``checkpoints_dir`` holding one file per recoverable
(``<name>.ckpt``) and ``meta.json`` (epoch, end-of-epoch flag, metrics, step, time). It is written to a hidden
temporary folder, every file is fsynced, and only then the folder is renamed into place: a process killed
half-way leaves a temporary folder that is never chosen (and is cleaned up by the next save).

Any object with ``state_dict()``/``load_state_dict()`` is recoverable (modules, optimizers, schedulers,
loaders, gradient scalers). Other objects define ``save_checkpoint(path)`` and ``load_checkpoint(path)``
(optionally ``load_checkpoint(path, end_of_epoch)``); no global registry is involved. Weights load with
``torch.load(weights_only=True)``.

Example:
    >>> ckpt = Checkpointer(tmp / "save", {"model": model, "counter": EpochCounter(10)})  # doctest: +SKIP
    >>> ckpt.save_and_keep_only(meta={"loss": 0.3}, min_keys=["loss"])                    # doctest: +SKIP
    >>> ckpt.recover_if_possible(min_key="loss")                                          # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from speechkit import distributed
from speechkit.errors import CheckpointError

logger = logging.getLogger(__name__)

PREFIX = "CKPT+"
TEMP_PREFIX = ".tmp-"
META_FILE = "meta.json"
SUFFIX = ".ckpt"


@dataclass
class Checkpoint:
    """A finished checkpoint on disk: its folder and its ``meta.json`` content.

    ``meta`` holds the user's metrics (``{"loss": 0.3, "WER": 12.1}``); ``info`` holds what the checkpointer
    records itself (``end_of_epoch``, ``unixtime``, ``epoch``, ``step``).
    """

    path: Path
    meta: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def end_of_epoch(self) -> bool:
        return bool(self.info.get("end_of_epoch", True))

    @property
    def unixtime(self) -> float:
        return float(self.info.get("unixtime", 0.0))


class Checkpointer:
    """Saves and recovers a set of named objects together.

    Args:
        checkpoints_dir: folder holding the checkpoints (created when missing).
        recoverables: ``{name: object}``; objects may also be added later with :meth:`add_recoverable`.
    """

    def __init__(self, checkpoints_dir: str | os.PathLike, recoverables: Optional[dict] = None):
        self.checkpoints_dir = Path(checkpoints_dir)
        self.recoverables: dict = {}
        self.saves = 0  # how many checkpoints this object wrote (Brain uses it to skip duplicate saves)
        for name, obj in (recoverables or {}).items():
            self.add_recoverable(name, obj)

    # --- registration -------------------------------------------------------------------------------------
    def add_recoverable(self, name: str, obj: Any) -> None:
        """Register ``obj`` under ``name`` (a file name: no path separators)."""
        if not name or "/" in name or os.sep in name or name == Path(META_FILE).stem:
            raise CheckpointError(f"recoverable name {name!r} must be a plain file name other than 'meta'")
        has_custom = callable(getattr(obj, "save_checkpoint", None)) and callable(
            getattr(obj, "load_checkpoint", None)
        )
        has_state = callable(getattr(obj, "state_dict", None)) and callable(
            getattr(obj, "load_state_dict", None)
        )
        if not (has_custom or has_state):
            raise CheckpointError(
                f"recoverable '{name}' ({type(obj).__name__}) has neither state_dict/"
                "load_state_dict nor save_checkpoint/load_checkpoint"
            )
        if name in self.recoverables and self.recoverables[name] is not obj:
            raise CheckpointError(f"recoverable name '{name}' is already used by another object")
        self.recoverables[name] = obj

    def add_missing_recoverables(self, candidates: dict) -> None:
        """Register each object not registered yet (under any name); ``None`` and stateless ones are skipped.

        A name already taken by another object gets a ``brain_`` prefix.
        """
        for name, obj in candidates.items():
            known = {id(o) for o in self.recoverables.values()}
            stateful = hasattr(obj, "state_dict") or hasattr(obj, "save_checkpoint")
            if obj is None or id(obj) in known or not stateful:
                continue
            self.add_recoverable(name if name not in self.recoverables else f"brain_{name}", obj)

    # --- saving ---------------------------------------------------------------------------------------------
    def save_checkpoint(
        self,
        meta: Optional[dict] = None,
        end_of_epoch: bool = True,
        name: Optional[str] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
    ) -> Optional[Checkpoint]:
        """Write a checkpoint of every recoverable. Only the main process writes; every process must call it.

        Returns the new :class:`Checkpoint` on the main process, ``None`` on the others.
        """
        dist = distributed
        checkpoint = None
        if dist.is_main():
            checkpoint = self._write(meta or {}, end_of_epoch, name, epoch, step)
        dist.barrier()
        self.saves += 1
        return checkpoint

    def _write(self, meta: dict, end_of_epoch: bool, name: Optional[str], epoch, step) -> Checkpoint:
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        self._remove_stale_temporaries()
        final = self._new_path(name)
        temporary = self.checkpoints_dir / f"{TEMP_PREFIX}{final.name}"
        temporary.mkdir()
        for obj_name, obj in self.recoverables.items():
            target = temporary / f"{obj_name}{SUFFIX}"
            if callable(getattr(obj, "save_checkpoint", None)):
                obj.save_checkpoint(target)
            else:
                torch.save(obj.state_dict(), target)
        info = {"end_of_epoch": bool(end_of_epoch), "unixtime": time.time(), "epoch": epoch, "step": step}
        try:
            payload = json.dumps({"meta": meta, "info": info}, indent=2, default=_json_number)
        except TypeError as error:
            shutil.rmtree(temporary, ignore_errors=True)
            raise CheckpointError(f"checkpoint meta must be JSON numbers/strings: {error}") from None
        (temporary / META_FILE).write_text(payload)
        _fsync_tree(temporary)
        os.rename(temporary, final)  # atomic on POSIX: the checkpoint appears complete or not at all
        _fsync_dir(self.checkpoints_dir)
        logger.info("Saved checkpoint %s", final)
        return Checkpoint(final, meta, info)

    def _new_path(self, name: Optional[str]) -> Path:
        stamp = name or time.strftime("%Y-%m-%d+%H-%M-%S")
        for index in range(10_000):
            path = self.checkpoints_dir / f"{PREFIX}{stamp}+{index:02d}"
            if not path.exists() and not (self.checkpoints_dir / f"{TEMP_PREFIX}{path.name}").exists():
                return path
        raise CheckpointError(f"{self.checkpoints_dir}: no free checkpoint name for {stamp}")

    def _remove_stale_temporaries(self) -> None:
        for stale in self.checkpoints_dir.glob(f"{TEMP_PREFIX}{PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)

    def save_and_keep_only(
        self,
        meta: Optional[dict] = None,
        end_of_epoch: bool = True,
        num_to_keep: int = 1,
        keep_recent: bool = True,
        min_keys: Optional[list] = None,
        max_keys: Optional[list] = None,
        ckpt_predicate: Optional[Callable] = None,
        name: Optional[str] = None,
        epoch: Optional[int] = None,
        step: Optional[int] = None,
    ) -> Optional[Checkpoint]:
        """Save, then delete older checkpoints except the best ``num_to_keep`` for each key and the newest.

        Without ``min_keys``/``max_keys`` the ``num_to_keep`` newest are kept. ``ckpt_predicate`` restricts
        which checkpoints may be deleted (e.g. only intra-epoch ones).
        """
        checkpoint = self.save_checkpoint(meta, end_of_epoch, name, epoch, step)
        dist = distributed
        if dist.is_main():
            self._delete_all_but(
                checkpoint, num_to_keep, keep_recent, min_keys or [], max_keys or [], ckpt_predicate
            )
        dist.barrier()
        return checkpoint

    def _delete_all_but(self, newest: Checkpoint, num_to_keep, keep_recent, min_keys, max_keys, predicate):
        checkpoints = self.list_checkpoints()
        keep = {newest.path} if keep_recent else set()
        if not min_keys and not max_keys:
            keep.update(c.path for c in checkpoints[-num_to_keep:] if num_to_keep > 0)
        for key, best_first in [(k, False) for k in min_keys] + [(k, True) for k in max_keys]:
            ranked = sorted(
                (c for c in checkpoints if key in c.meta), key=lambda c: c.meta[key], reverse=best_first
            )
            keep.update(c.path for c in ranked[:num_to_keep])
        for checkpoint in checkpoints:
            if checkpoint.path not in keep and (predicate is None or predicate(checkpoint)):
                shutil.rmtree(checkpoint.path, ignore_errors=True)

    # --- finding and loading ------------------------------------------------------------------------------
    def list_checkpoints(self) -> list:
        """Every complete checkpoint, oldest first (temporary folders are never listed)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = []
        for path in self.checkpoints_dir.glob(f"{PREFIX}*"):
            try:
                content = json.loads((path / META_FILE).read_text())
            except (OSError, ValueError):
                logger.warning("Ignoring %s: it has no readable %s", path, META_FILE)
                continue
            found.append(Checkpoint(path, content.get("meta", {}), content.get("info", {})))
        return sorted(found, key=lambda c: (c.unixtime, c.path.name))

    def find_checkpoint(
        self,
        min_key: Optional[str] = None,
        max_key: Optional[str] = None,
        ckpt_predicate: Optional[Callable] = None,
    ) -> Optional[Checkpoint]:
        """The checkpoint with the lowest ``min_key`` / highest ``max_key`` in its meta, else the newest."""
        if min_key and max_key:
            raise CheckpointError("give min_key or max_key, not both")
        checkpoints = [c for c in self.list_checkpoints() if ckpt_predicate is None or ckpt_predicate(c)]
        key = min_key or max_key
        if key:
            checkpoints = [c for c in checkpoints if key in c.meta]
            if not checkpoints:
                return None
            chosen = min if min_key else max
            return chosen(checkpoints, key=lambda c: c.meta[key])
        return checkpoints[-1] if checkpoints else None

    def recover_if_possible(
        self,
        min_key: Optional[str] = None,
        max_key: Optional[str] = None,
        ckpt_predicate: Optional[Callable] = None,
    ) -> Optional[Checkpoint]:
        """Load the checkpoint :meth:`find_checkpoint` chooses into the recoverables; ``None`` if none."""
        checkpoint = self.find_checkpoint(min_key, max_key, ckpt_predicate)
        if checkpoint is None:
            if min_key or max_key:
                logger.info("No checkpoint in %s has the key %r", self.checkpoints_dir, min_key or max_key)
            return None
        self.load_checkpoint(checkpoint)
        return checkpoint

    def load_checkpoint(self, checkpoint: Checkpoint) -> None:
        """Load every registered recoverable from ``checkpoint``."""
        for name, obj in self.recoverables.items():
            path = checkpoint.path / f"{name}{SUFFIX}"
            if not path.exists():
                logger.warning(
                    "Checkpoint %s holds nothing for '%s'; it keeps its current state", checkpoint.path, name
                )
                continue
            try:
                _load_into(obj, path, checkpoint.end_of_epoch)
            except CheckpointError:
                raise
            except Exception as error:
                raise CheckpointError(
                    f"{path}: cannot load '{name}': {type(error).__name__}: {error}"
                ) from error
        logger.info("Recovered checkpoint %s", checkpoint.path)


def _load_into(obj: Any, path: Path, end_of_epoch: bool) -> None:
    custom = getattr(obj, "load_checkpoint", None)
    if callable(custom) and callable(getattr(obj, "save_checkpoint", None)):
        if "end_of_epoch" in inspect.signature(custom).parameters:
            custom(path, end_of_epoch=end_of_epoch)
        else:
            custom(path)
        return
    obj.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def _json_number(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
    _fsync_dir(folder)


def _fsync_dir(folder: Path) -> None:
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass  # some file systems cannot sync a directory; the rename is still atomic
    finally:
        os.close(descriptor)


class EpochCounter:
    """Iterates over epochs ``current+1 .. limit``; recoverable, so a resumed run continues where it stopped.

    A checkpoint saved mid-epoch (``end_of_epoch=False``) makes the recovered counter yield that epoch again.

    Example:
        >>> list(EpochCounter(3))
        [1, 2, 3]
    """

    def __init__(self, limit: int):
        self.limit = int(limit)
        self.current = 0

    def __iter__(self):
        return self

    def __next__(self) -> int:
        if self.current < self.limit:
            self.current += 1
            return self.current
        raise StopIteration

    def save_checkpoint(self, path: Path) -> None:
        Path(path).write_text(json.dumps({"current": self.current}))

    def load_checkpoint(self, path: Path, end_of_epoch: bool = True) -> None:
        saved = int(json.loads(Path(path).read_text())["current"])
        self.current = saved if end_of_epoch else saved - 1
