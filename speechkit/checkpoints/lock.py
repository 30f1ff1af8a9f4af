"""One writer per checkpoints folder: a lock that the operating system drops when its process ends.

Two runs started on the same output folder would delete each other's checkpoints (retention) and temporary
folders. The process that writes checkpoints therefore holds an exclusive lock on ``<folder>/.lock``
(``flock`` through the ``filelock`` package). The kernel releases it when the process exits, however it exits
(SIGKILL, out of memory, node reboot), so a killed run never leaves a stale lock behind; running the same
command again simply takes it. The holder writes who it is (host, pid, start time, command) to
``<folder>/.lock.holder`` so that a refused run can say which run is in the way.

Several :class:`~speechkit.checkpoints.Checkpointer` objects of one process share the lock (a script may
open the same folder twice); a forked child is another process and does not.

Example:
    >>> lock = WriterLock("save")
    >>> lock.acquire()
    True
    >>> read_holder("save")["pid"] == os.getpid()
    True
    >>> lock.release()
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

import filelock

from speechkit.atomic_files import atomic_write
from speechkit.errors import CheckpointError

LOCK_FILE = ".lock"
HOLDER_FILE = ".lock.holder"

# folder (resolved) -> [owning pid, filelock object, number of WriterLock objects holding it]
_HELD: dict = {}


class WriterLock:
    """The exclusive right to write into ``folder``; :meth:`acquire` is idempotent per object.

    ``why`` ends the refusal's message (why two runs must not share the folder); ``error`` is the exception
    class raised.
    """

    def __init__(self, folder: str | os.PathLike, why: str = "two runs writing one checkpoints folder delete "
                 "each other's checkpoints", error: type = CheckpointError):
        self.folder = Path(folder)
        self.held = False
        self.why, self.error = why, error

    def acquire(self) -> bool:
        """Take the lock, or raise ``error`` (CheckpointError) naming the folder and the run holding it.

        Returns:
            True when this call took it, False when this object already held it.
        """
        if self.held and _entry(self._key()) is not None:
            return False
        self.folder.mkdir(parents=True, exist_ok=True)
        key = self._key()
        entry = _entry(key)
        if entry is None:
            lock = filelock.FileLock(str(self.folder / LOCK_FILE), timeout=0, thread_local=False)
            try:
                lock.acquire(timeout=0)
            except filelock.Timeout:
                raise self.error(self._refusal()) from None
            entry = _HELD[key] = [os.getpid(), lock, 0]
            _write_holder(self.folder / HOLDER_FILE)
        entry[2] += 1
        self.held = True
        return True

    def release(self) -> None:
        """Give the lock up (when no other object of this process holds it)."""
        if not self.held:
            return
        self.held = False
        entry = _entry(self._key())
        if entry is None:
            return
        entry[2] -= 1
        if entry[2] <= 0:
            del _HELD[self._key()]
            entry[1].release(force=True)

    def _key(self) -> str:
        return os.path.realpath(self.folder)

    def _refusal(self) -> str:
        holder = read_holder(self.folder)
        who = describe_holder(holder) if holder else "another process"
        return (
            f"{self.folder} is in use by another run ({who}): {self.why}. Stop the other run, or give this "
            "one another output folder."
        )


def _entry(key: str) -> Optional[list]:
    entry = _HELD.get(key)
    if entry is not None and entry[0] != os.getpid():
        # Inherited through fork: the lock belongs to the parent. Forget it without unlocking (an unlock here
        # would drop the parent's lock too, since both share the open file).
        del _HELD[key]
        return None
    return entry


def _write_holder(path: Path) -> None:
    record = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "command": " ".join(sys.argv),
    }
    with atomic_write(path) as handle:
        handle.write(json.dumps(record))


def read_holder(folder: str | os.PathLike) -> Optional[dict]:
    """What the current (or last) writer of ``folder`` recorded about itself, or ``None``."""
    try:
        record = json.loads((Path(folder) / HOLDER_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def describe_holder(holder: dict) -> str:
    """``pid 123 on host gpu7, since 2026-01-02 03:04:05: train.py hp.yaml`` (and whether it still runs)."""
    text = f"pid {holder.get('pid')} on host {holder.get('host')}, since {holder.get('started')}"
    if holder.get("host") == socket.gethostname() and not _alive(holder.get("pid")):
        # The recorded process is gone, yet the lock is held: a child it started (e.g. a data loader worker)
        # inherited the lock and still runs.
        text += "; that process has ended but a child process of it still holds the lock"
    return f"{text}: {holder.get('command')}"


def _alive(pid) -> bool:
    try:
        os.kill(int(pid), 0)
    except (TypeError, ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
