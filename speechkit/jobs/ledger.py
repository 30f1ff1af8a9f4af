"""The ledger of a shard: an append-only JSON Lines file of the items it finished, flushed in groups.

Rows, one JSON object a line:

- ``{"run": 2, "started": 1700000000.0, "host": "gpu07", "pid": 1234, "source": "slurm-array"}``: a run of
  the shard begins (``source``: where the shard identity came from);
- ``{"id": "utt1", "run": 2, "t": 1700000012.5, ...}``: an item is done; the rest is the task's record (a
  hypothesis, or the output file's name, size and checksum);
- ``{"redo": "utt1", "run": 3}``: the item's output was found missing or corrupt; it is being done again.

Finished items are buffered and appended every ``flush_every`` items or ``flush_seconds`` seconds (and on
preemption and at the end) with one write, so a job of millions of items does not pay a system call per item.
An item finished after the last flush is done again on a rerun; one flushed never is: a killed process's
writes are in the kernel's cache and survive it. The file is synced to disk only when a run ends (done,
preempted or failed): a crash of the whole machine may lose the lines written since, and those items are
simply done again, as are outputs the crash lost (a rerun checks every recorded output's size). A process
killed during a write leaves at most one torn last line, which readers ignore and the next run cuts off.

Example:
    >>> ledger = Ledger("out/ledger/shard-00000-of-00002.jsonl", flush_every=100)
    >>> run = ledger.open_run()
    >>> ledger.record("utt1", {"text": "HELLO"}); ledger.close()
    >>> [sorted(json.loads(line)) for line in open("out/ledger/shard-00000-of-00002.jsonl")]
    [['host', 'pid', 'run', 'started'], ['id', 'run', 't', 'text']]
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import NamedTuple, Optional, Union

from speechkit.errors import JobError

LEDGER_DIR = "ledger"


def ledger_path(folder: Union[str, os.PathLike], shard: int, num_shards: int) -> Path:
    """``<folder>/ledger/shard-KKKKK-of-NNNNN.jsonl``."""
    return Path(folder) / LEDGER_DIR / f"shard-{shard:05d}-of-{num_shards:05d}.jsonl"


def finished_marker(path: Union[str, os.PathLike]) -> Path:
    """The file a shard writes next to its ledger once every item of it is done (removed by a new run)."""
    return Path(path).with_suffix(".finished")


class LedgerContents(NamedTuple):
    """What a ledger says: ``records`` (id -> its latest record), ``runs`` (the run rows, in order),
    ``duplicates`` (ids recorded again without a redo row between: done twice), ``good_bytes`` (length of
    the file up to its last complete line)."""

    records: dict
    runs: list
    duplicates: list
    good_bytes: int


def read_ledger(path: Union[str, os.PathLike]) -> LedgerContents:
    """Read a ledger (a missing file is an empty ledger).

    Raises:
        JobError: a line other than a torn last one is not a ledger row (naming the file and line).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LedgerContents({}, [], [], 0)
    records: dict = {}
    runs: list = []
    duplicates: list = []
    good = 0
    lines = data.split(b"\n")
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        if last:  # after the final newline: empty, or a line torn by a kill during a write
            break
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
        except ValueError as error:
            raise JobError(f"{path}, line {number}: not a ledger row ({error}); the ledger is damaged: move "
                           "it away to redo this shard") from None
        good += len(line) + 1
        if "id" in row:
            if not isinstance(row["id"], str) or not row["id"]:
                raise JobError(f"{path}, line {number}: the item id {row['id']!r} is not a non-empty string; "
                               "the ledger is damaged: move it away to redo this shard")
            item_id = row["id"]
            if item_id in records:
                duplicates.append(item_id)
            records[item_id] = row
        elif "redo" in row:
            records.pop(str(row["redo"]), None)
        elif "run" in row:
            runs.append(row)
    return LedgerContents(records, runs, duplicates, good)


class Ledger:
    """Appends one shard's finished items (see the module docstring).

    Args:
        path: the ledger file.
        flush_every: append after this many finished items...
        flush_seconds: ...or once this many seconds have passed since the last flush.
    """

    def __init__(self, path: Union[str, os.PathLike], flush_every: int = 100, flush_seconds: float = 30.0):
        if flush_every < 1 or not flush_seconds > 0:
            raise JobError(f"flush_every must be >= 1 and flush_seconds > 0, got {flush_every} and "
                           f"{flush_seconds}")
        self.path = Path(path)
        self.flush_every = int(flush_every)
        self.flush_seconds = float(flush_seconds)
        self.run: Optional[int] = None
        self.done: dict = {}
        self._pending: list = []
        self._last_flush = time.monotonic()
        self._handle = None
        self._lock = None

    def open_run(self, **info) -> int:
        """Lock the shard, read what is done, cut a torn last line, and start a new run; returns its number.
        ``info`` (JSON-able) is kept in the run's row, e.g. where the shard identity came from.

        Raises:
            JobError: another process is running this shard now (its host and pid are named).
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = _lock_shard(self.path.with_suffix(".lock"))
        finished_marker(self.path).unlink(missing_ok=True)
        contents = read_ledger(self.path)
        self.done = dict(contents.records)
        with open(self.path, "ab") as handle:
            if handle.tell() != contents.good_bytes:
                handle.truncate(contents.good_bytes)
        self.run = max((int(row["run"]) for row in contents.runs), default=0) + 1
        self._handle = open(self.path, "a", encoding="utf-8")
        self._append([{"run": self.run, "started": time.time(), "host": socket.gethostname(),
                       "pid": os.getpid(), **info}])
        return self.run

    def redo(self, item_ids: list) -> None:
        """Mark done items as to be done again (their output is missing or corrupt); written at once."""
        for item_id in item_ids:
            self.done.pop(item_id, None)
        if item_ids:
            self._append([{"redo": item_id, "run": self.run} for item_id in item_ids])

    def record(self, item_id: str, record: dict) -> None:
        """Note ``item_id`` as done with its task record; appended at the next due flush."""
        row = {"id": item_id, "run": self.run, "t": round(time.time(), 3), **record}
        self.done[item_id] = row
        self._pending.append(row)
        due = time.monotonic() - self._last_flush >= self.flush_seconds
        if due or len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        """Append every pending row with one write."""
        if self._pending:
            self._append(self._pending)
            self._pending = []
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Flush, sync to disk, close the file and release the shard."""
        if self._handle is not None:
            self.flush()
            os.fsync(self._handle.fileno())
            self._handle.close()
            self._handle = None
        if self._lock is not None:
            self._lock.close()  # closing the descriptor releases the lock
            self._lock = None

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _append(self, rows: list) -> None:
        if self._handle is None:
            raise JobError(f"{self.path}: the ledger is not open (call open_run first)")
        self._handle.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
        self._handle.flush()  # to the kernel: it survives this process, whatever kills it


def shard_is_running(path: Union[str, os.PathLike]) -> Optional[bool]:
    """Whether a process holds the shard's lock now (None when the file system cannot tell)."""
    lock = Path(path).with_suffix(".lock")
    try:
        with open(lock, "rb") as handle:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)  # held for microseconds; see _lock_shard
    except FileNotFoundError:
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    return False


def _lock_shard(path: Path, patience_s: float = 2.0):
    """An exclusive lock held while this process runs the shard (released by the kernel if it dies).

    It is retried for ``patience_s``: ``--status`` probes the lock for an instant and must not make a worker
    that starts at that moment fail.
    """
    handle = open(path, "a+", encoding="utf-8")
    deadline = time.monotonic() + patience_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.05)
                continue
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise JobError(f"{path}: this shard is being run by {holder}; two processes must not run the same "
                       "shard (check --shard / the array indices)") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
    return handle
