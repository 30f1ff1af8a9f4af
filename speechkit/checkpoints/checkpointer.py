"""Checkpoints that are atomic, complete and resumable mid-epoch.

A checkpoint is a folder ``CKPT+<date>+<time>+<nn>`` in ``checkpoints_dir`` holding one file per recoverable
(``<name>.ckpt``) and ``meta.json`` (epoch, end-of-epoch flag, metrics, step, time, the name of every file
and the class of every recoverable). It is written to a hidden temporary folder, every file is fsynced, and
only then the folder is renamed into place. Retention renames a checkpoint to a hidden ``.trash-`` folder
before deleting it. So a process killed at any point leaves complete ``CKPT+`` folders plus hidden debris that
is never listed and is removed when a writer next takes the folder; a ``CKPT+`` folder whose files do not
match its ``meta.json`` is never listed either.

A save that cannot be written (a full disk, a quota, a file size limit) removes its temporary folder and
raises a :class:`~speechkit.errors.CheckpointError` naming the folder, the file, the cause and the previous
checkpoint, which stays intact. ``meta.json`` also lists the modules that were frozen and never given weights
(``info.untrained``, :mod:`~speechkit.checkpoints.weights_origin`), so that an export never ships their
initial weights.

One process writes a folder at a time (:mod:`speechkit.checkpoints.lock`): the first save, or
:meth:`Checkpointer.acquire_writer_lock`, takes the lock; a second run is refused with a
:class:`~speechkit.errors.CheckpointError` naming the run that holds it. Reading needs no lock.

Loading a checkpoint that lacks the file of a registered recoverable is an error unless the caller asks for
``allow_partial=True``; an optimizer saved from one class does not load into another.

An object whose state differs between processes (random generators) sets ``checkpoint_per_process = True``:
every process's ``state_dict()`` is gathered into its file and, on recovery, ``load_process_states(states,
rank, world_size)`` gives each process its own (docs/distributed.md, "Elastic resume").

Any object with ``state_dict()``/``load_state_dict()`` is recoverable (modules, optimizers, schedulers,
loaders, gradient scalers). Other objects define ``save_checkpoint(path)`` and ``load_checkpoint(path)``
(optionally ``load_checkpoint(path, end_of_epoch)``); no global registry is involved. Weights load with
``torch.load(weights_only=True)``.

Example:
    >>> model = torch.nn.Linear(3, 1)
    >>> ckpt = Checkpointer("save", {"model": model, "counter": EpochCounter(10)})
    >>> saved = ckpt.save_and_keep_only(meta={"loss": 0.3}, min_keys=["loss"])
    >>> saved.meta, sorted(saved.info["files"])
    ({'loss': 0.3}, ['counter.ckpt', 'model.ckpt'])
    >>> ckpt.recover_if_possible(min_key="loss").path == saved.path   # in a restarted run
    True
"""

from __future__ import annotations

import errno
import inspect
import json
import logging
import os
import shutil
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from speechkit import distributed
from speechkit.checkpoints.lock import WriterLock
from speechkit.checkpoints.weights_origin import is_untrained, note_origin, note_untrained
from speechkit.errors import CheckpointError

logger = logging.getLogger(__name__)

PREFIX = "CKPT+"
TEMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
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
        self._lock = WriterLock(self.checkpoints_dir)
        # The lock goes with this object (or with the process): short-lived checkpointers never pile up.
        weakref.finalize(self, self._lock.release)
        self._reported: set = set()  # folders already warned about (once each, not at every save)
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
        per_process = self._gather_per_process_states()  # collective: every process's own states
        checkpoint = None
        if dist.is_main():
            self._take_lock()
            checkpoint = self._write(meta or {}, end_of_epoch, name, epoch, step, per_process)
        dist.barrier()
        self.saves += 1
        return checkpoint

    def _gather_per_process_states(self) -> dict:
        return {
            name: distributed.all_gather_object(obj.state_dict())
            for name, obj in self.recoverables.items()
            if getattr(obj, "checkpoint_per_process", False)
        }

    def _write(self, meta: dict, end_of_epoch: bool, name, epoch, step, per_process: dict) -> Checkpoint:
        final = self._new_path(name)
        temporary = self.checkpoints_dir / f"{TEMP_PREFIX}{final.name}"
        classes = {obj_name: _class_name(obj) for obj_name, obj in self.recoverables.items()}
        try:
            payload_meta = json.dumps(meta, default=_json_number)  # checked before anything is written
        except TypeError as error:
            raise CheckpointError(f"checkpoint meta must be JSON numbers/strings: {error}") from None
        writing = temporary
        try:
            temporary.mkdir()
            for obj_name, obj in self.recoverables.items():
                writing = temporary / f"{obj_name}{SUFFIX}"
                if obj_name in per_process:
                    states = per_process[obj_name]
                    _torch_save({"world_size": len(states), "states": states}, writing)
                elif callable(getattr(obj, "save_checkpoint", None)):
                    obj.save_checkpoint(writing)
                else:
                    _torch_save(obj.state_dict(), writing)
            info = {"end_of_epoch": bool(end_of_epoch), "unixtime": time.time(), "epoch": epoch, "step": step,
                    "files": _file_names(temporary), "classes": classes,
                    "untrained": sorted(n for n, obj in self.recoverables.items() if is_untrained(obj))}
            payload = json.dumps({"meta": json.loads(payload_meta), "info": info}, indent=2)
            writing = temporary / META_FILE
            writing.write_text(payload)
            writing = temporary
            _fsync_tree(temporary)
        except BaseException as error:
            # Nothing half-written stays behind (a full disk gets its space back); the checkpoints already in
            # the folder are untouched.
            shutil.rmtree(temporary, ignore_errors=True)
            failure = _write_failure(error)
            if failure is None:
                raise
            raise CheckpointError(self._describe_write_failure(final, writing, failure)) from error
        os.rename(temporary, final)  # atomic on POSIX: the checkpoint appears complete or not at all
        _fsync_dir(self.checkpoints_dir)
        logger.info("Saved checkpoint %s", final)
        return Checkpoint(final, meta, info)

    def _describe_write_failure(self, final: Path, writing: Path, failure: OSError) -> str:
        """What failed, where, how much room is left, and that the older checkpoints are intact."""
        what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                errno.EFBIG: "the file is larger than this process may write"}.get(failure.errno, "")
        reason = f"{what} ({failure.strerror})" if what else (failure.strerror or str(failure))
        try:
            free = shutil.disk_usage(self.checkpoints_dir).free
            room = f"; {_size(free)} free on that file system"
        except OSError:
            room = ""
        previous = self.list_checkpoints()
        kept = (f"The previous checkpoint {previous[-1].path} is intact" if previous
                else "No earlier checkpoint exists")
        return (f"cannot save checkpoint {final.name} in {self.checkpoints_dir}: writing {writing.name} "
                f"failed: {reason}{room}. The partial checkpoint was removed. {kept}; free some space (or "
                "choose another save folder) and run the same command again to resume from it.")

    def _new_path(self, name: Optional[str]) -> Path:
        stamp = name or time.strftime("%Y-%m-%d+%H-%M-%S")
        for index in range(10_000):
            path = self.checkpoints_dir / f"{PREFIX}{stamp}+{index:02d}"
            if not path.exists() and not (self.checkpoints_dir / f"{TEMP_PREFIX}{path.name}").exists():
                return path
        raise CheckpointError(f"{self.checkpoints_dir}: no free checkpoint name for {stamp}")

    # --- one writer, and its clean-up ---------------------------------------------------------------------
    def acquire_writer_lock(self) -> None:
        """Make this process the folder's only writer and clear what killed writers left; every process calls.

        The main process takes the lock (see :mod:`speechkit.checkpoints.lock`) and every process raises the
        same :class:`CheckpointError` when another run holds it, before any training starts. Saving takes the
        lock too, so calling this is only needed to fail early.
        """
        problem = None
        if distributed.is_main():
            try:
                self._take_lock()
            except CheckpointError as error:
                problem = str(error)
        problem = distributed.broadcast_object(problem)
        if problem is not None:
            raise CheckpointError(problem)

    def release_writer_lock(self) -> None:
        """Stop being the writer (the lock also goes with this object or with the process)."""
        self._lock.release()

    def _take_lock(self) -> None:
        if self._lock.acquire():  # cheap when held already; a forked child must take its own
            self._remove_leftovers()

    def _remove_leftovers(self) -> None:
        """Remove what killed writers left: temporary and trash folders, empty or incomplete checkpoints."""
        for stale in self.checkpoints_dir.glob(f"{TEMP_PREFIX}{PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        for stale in self.checkpoints_dir.glob(f"{TRASH_PREFIX}{PREFIX}*"):
            shutil.rmtree(stale, ignore_errors=True)
        for path in self.checkpoints_dir.glob(f"{PREFIX}*"):
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
                logger.info("Removed the empty checkpoint folder %s", path)
            elif path.is_dir() and _missing_files(path):
                # meta.json promises files that are gone: an unusable checkpoint. (A folder without our
                # meta.json is left alone: it may be another toolkit's.)
                logger.warning("Removing the incomplete checkpoint %s (missing %s)", path,
                               ", ".join(_missing_files(path)))
                self._discard(path)

    def _discard(self, path: Path) -> None:
        """Delete a checkpoint so that no kill can leave a partial ``CKPT+`` folder: rename, then remove."""
        trash = self.checkpoints_dir / f"{TRASH_PREFIX}{path.name}"
        shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(path, trash)
        except OSError as error:  # keeping an old checkpoint is better than stopping the training
            logger.warning("Cannot remove the old checkpoint %s: %s", path, error)
            return
        _fsync_dir(self.checkpoints_dir)
        shutil.rmtree(trash, ignore_errors=True)

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
        if dist.is_main():  # the lock is held: save_checkpoint took it
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
                self._discard(checkpoint.path)

    # --- finding and loading ------------------------------------------------------------------------------
    def list_checkpoints(self) -> list:
        """Every complete checkpoint, oldest first (temporary, trash and incomplete ones are not listed)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = []
        for path in self.checkpoints_dir.glob(f"{PREFIX}*"):
            try:
                found.append(read_checkpoint(path))
            except CheckpointError as error:  # "<path>: incomplete checkpoint (missing ...)"
                self._warn_once(path, f"Ignoring {error}")
        return sorted(found, key=lambda c: (c.unixtime, c.path.name))

    def _warn_once(self, path: Path, message: str) -> None:
        if path not in self._reported:
            self._reported.add(path)
            logger.warning(message)

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
        allow_partial: bool = False,
    ) -> Optional[Checkpoint]:
        """Load the checkpoint :meth:`find_checkpoint` chooses into the recoverables; ``None`` if none."""
        checkpoint = self.find_checkpoint(min_key, max_key, ckpt_predicate)
        if checkpoint is None:
            if min_key or max_key:
                logger.info("No checkpoint in %s has the key %r", self.checkpoints_dir, min_key or max_key)
            return None
        self.load_checkpoint(checkpoint, allow_partial=allow_partial)
        return checkpoint

    def load_checkpoint(self, checkpoint: Checkpoint, allow_partial: bool = False) -> None:
        """Load every registered recoverable from ``checkpoint``.

        Raises:
            CheckpointError: naming the checkpoint and the recoverable when its file is missing (unless
                ``allow_partial``: then it keeps its current state, with a warning), cannot be loaded, or
                holds an optimizer of another class.
        """
        missing = [name for name in self.recoverables if not (checkpoint.path / f"{name}{SUFFIX}").exists()]
        if missing and not allow_partial:
            raise CheckpointError(
                f"checkpoint {checkpoint.path} holds no file for {', '.join(repr(n) for n in missing)} "
                f"(expected {', '.join(n + SUFFIX for n in missing)}); it was written with other "
                "recoverables. Load it with allow_partial=True to keep their current state."
            )
        for name, obj in self.recoverables.items():  # before loading anything
            _check_class(checkpoint, name, obj)
        for name, obj in self.recoverables.items():
            path = checkpoint.path / f"{name}{SUFFIX}"
            if name in missing:
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
            note_loaded(obj, checkpoint, name)
        logger.info("Recovered checkpoint %s", checkpoint.path)


def read_checkpoint(path: str | os.PathLike) -> Checkpoint:
    """One checkpoint folder: a run's ``CKPT+`` folder, or one written by ``speechkit average-checkpoints``.

    Raises:
        CheckpointError: naming the folder when it has no readable ``meta.json`` or misses files it lists.
    """
    path = Path(path)
    try:
        content = json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        raise CheckpointError(f"{path}: not a checkpoint (it has no readable {META_FILE})") from None
    info = content.get("info", {}) if isinstance(content, dict) else {}
    missing = _missing_files(path, info)
    if missing:
        raise CheckpointError(f"{path}: incomplete checkpoint (missing {', '.join(missing)})")
    return Checkpoint(path, content.get("meta", {}), info)


def note_loaded(obj: Any, checkpoint: Checkpoint, name: str) -> None:
    """Note the origin of a module loaded from ``checkpoint``: its file, or ``untrained`` when the checkpoint
    lists it so (see :mod:`speechkit.checkpoints.weights_origin`)."""
    if not isinstance(obj, torch.nn.Module):
        return
    if name in (checkpoint.info.get("untrained") or []):
        note_untrained(obj)
    else:
        note_origin(obj, f"loaded from {checkpoint.path / (name + SUFFIX)}")


def _load_into(obj: Any, path: Path, end_of_epoch: bool) -> None:
    if getattr(obj, "checkpoint_per_process", False):
        saved = torch.load(path, map_location="cpu", weights_only=True)
        if isinstance(saved, dict) and "states" in saved:
            obj.load_process_states(list(saved["states"]), distributed.rank(), distributed.world_size())
        else:  # written before states were kept per process: one state for every process
            logger.warning("%s holds one state for all processes; every process loads it", path)
            obj.load_state_dict(saved)
        return
    custom = getattr(obj, "load_checkpoint", None)
    if callable(custom) and callable(getattr(obj, "save_checkpoint", None)):
        if "end_of_epoch" in inspect.signature(custom).parameters:
            custom(path, end_of_epoch=end_of_epoch)
        else:
            custom(path)
        return
    obj.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))


def _torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` through a file this module opens: a failed write (a full disk) then surfaces as the
    ``OSError`` it is, chained to torch's ``RuntimeError`` ("unexpected pos ..."), not only the latter."""
    with open(path, "wb") as handle:
        torch.save(obj, handle)


def _write_failure(error: BaseException) -> Optional[OSError]:
    """The ``OSError`` (with an errno) behind a failed write, following the exception chain; else ``None``."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno is not None:
            return error
        error = error.__cause__ or error.__context__
    return None


def _size(count: int) -> str:
    """``1.5 MB``-style byte counts for messages."""
    for unit in ("bytes", "kB", "MB", "GB"):
        if count < 1000 or unit == "GB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def _check_class(checkpoint: Checkpoint, name: str, obj: Any) -> None:
    """An optimizer's or scheduler's state fits only its own class (others fail later, deep in torch)."""
    saved = checkpoint.info.get("classes", {}).get(name)
    guarded = (torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler)
    if saved is None or not isinstance(obj, guarded) or saved == _class_name(obj):
        return
    raise CheckpointError(
        f"checkpoint {checkpoint.path}: '{name}' was saved from {saved} but this run's '{name}' is "
        f"{_class_name(obj)}; its state cannot be loaded into another class. Resume with {saved}, or start "
        "a new run (another output folder) that loads only the weights."
    )


def _file_names(folder: Path) -> list:
    """The names of a checkpoint's files (and of folders a custom saver wrote)."""
    return sorted(p.name for p in folder.iterdir())


def _missing_files(path: Path, info: Optional[dict] = None) -> list:
    """Files that ``meta.json`` lists and ``path`` lacks (older checkpoints list none)."""
    if info is None:
        try:
            info = json.loads((path / META_FILE).read_text()).get("info", {})
        except (OSError, ValueError, AttributeError):
            return []
    return [name for name in info.get("files") or [] if not (path / name).exists()]


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
