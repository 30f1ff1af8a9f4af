"""The ``file://`` rendezvous: check the path and the file before joining, bound the wait, clean up at exit.

torch's ``FileStore`` waits (silently, for minutes) when the folder of the file does not exist or the file
holds something it cannot parse, and a file left by an earlier run hands the new workers the addresses of
processes that are gone (gloo then fails with "connection refused"). So before a worker joins:

1. the folder must exist and be writable, and the path must not be a folder;
2. the file, if there is one, must parse as a ``FileStore`` file (records of a 4-byte little-endian length
   and bytes, key then value; user keys start with ``/``, deleted ones with ``-/``); anything else is
   refused, naming the path;
3. a file marked *closed* (by the end of a clean run) is emptied and used again; a file in which this rank
   has already checked in comes from a run that did not end cleanly (or one running now): refused, saying
   to delete it;
4. every rank checks in (one key per rank) and waits at most ``--distributed_timeout_s`` for the others,
   then withdraws its check-in and fails naming the ranks that did not come.

At a clean exit rank 0, once every rank has reported itself done, marks the file closed and removes it.
Checking, emptying and reading happen under ``flock``, the lock ``FileStore`` itself takes, so two workers
never see a half-written file nor empty one another's fresh records.

Example:
    >>> import os
    >>> store = join_file_store(f"file://{os.getcwd()}/rdv", rank=0, world_size=1, timeout_s=60)
    >>> type(store).__name__
    'FileStore'
"""
from __future__ import annotations

import fcntl
import os
import struct
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Optional

from speechkit.errors import DistributedError

#: Keys of this module in the store (``FileStore`` writes user keys with a leading ``/``).
CHECK_IN_PREFIX = "speechkit/rendezvous/rank/"
CLOSED_KEY = "speechkit/rendezvous/closed"
#: Keys ``FileStore`` writes for itself besides the user's (which start with ``/``).
_OWN_KEYS = (b"refcount/", b"cleanup/")
#: What to tell the user whenever the file cannot be used.
_ADVICE = "delete it (rm {path}) or give --sync-protocol a new file:// path, then start every worker again"


def file_path(init_method: str) -> Path:
    """The file of a ``file://`` init method (``file:///a/b`` -> ``/a/b``)."""
    return Path(init_method[len("file://"):])


def check_folder(path: Path) -> None:
    """Raise :class:`DistributedError` unless ``path`` can be a rendezvous file (its folder exists and is
    writable, and ``path`` is not a folder)."""
    folder = path.parent
    where = f"--sync-protocol file://{path}"
    if not folder.is_dir():
        raise DistributedError(f"{where}: the folder {folder} does not exist; create it (on a file system "
                               "that every worker sees) or choose another path")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise DistributedError(f"{where}: the folder {folder} is not writable by this user")
    if path.is_dir():
        raise DistributedError(f"{where}: {path} is a folder; give the path of a file in it")


def read_records(data: bytes, path: Path) -> dict:
    """The latest value of each key of a ``FileStore`` file's bytes.

    Raises:
        DistributedError: the bytes are not a ``FileStore`` file (naming ``path`` and the offset).

    Example:
        >>> record = lambda text: struct.pack("<I", len(text)) + text
        >>> read_records(record(b"/a") + record(b"1") + record(b"/a") + record(b"2"), Path("f"))
        {'/a': b'2'}
    """
    records, offset = {}, 0
    while offset < len(data):
        fields = []
        for _ in ("key", "value"):
            if offset + 4 > len(data):
                raise _not_a_store(path, offset)
            (size,) = struct.unpack_from("<I", data, offset)
            if offset + 4 + size > len(data):
                raise _not_a_store(path, offset)
            fields.append(data[offset + 4:offset + 4 + size])
            offset += 4 + size
        key, value = fields
        if key.startswith(b"-/"):  # a deleted key
            records.pop(key[1:].decode(errors="replace"), None)
            continue
        if not (key.startswith(b"/") or key in _OWN_KEYS):
            raise _not_a_store(path, offset)
        records[key.decode(errors="replace")] = value
    return records


def _not_a_store(path: Path, offset: int) -> DistributedError:
    return DistributedError(f"--sync-protocol file://{path}: the file is not a rendezvous file of "
                            f"torch.distributed (unreadable from byte {offset}); "
                            + _ADVICE.format(path=path))


@contextmanager
def _locked(path: Path):
    """The open file under an exclusive ``flock`` (the lock ``FileStore`` takes), or None if absent."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        yield None
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # also releases the lock


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def prepare_file(path: Path, rank: int) -> None:
    """Check ``path`` before rank ``rank`` joins: empty a closed file, refuse garbage and stale ones."""
    check_folder(path)
    with _locked(path) as fd:
        if fd is None:
            return
        records = read_records(_read_all(fd), path)
        if "/" + CLOSED_KEY in records:  # a run that ended cleanly, whose removal was missed or raced
            os.ftruncate(fd, 0)
            return
        if f"/{CHECK_IN_PREFIX}{rank}" in records:
            raise DistributedError(
                f"--sync-protocol file://{path}: rank {rank} has already joined through this file: it was "
                "left by an earlier run that did not end cleanly (crashed or killed), or another run uses "
                "it now; " + _ADVICE.format(path=path))


def join_file_store(init_method: str, rank: int, world_size: int, timeout_s: float):
    """Check the file, create the ``FileStore``, check in and wait (bounded) for every rank.

    Returns:
        the ``torch.distributed.FileStore`` every rank now shares (pass it to ``init_process_group``).

    Raises:
        DistributedError: a bad path or file (at once), or ranks that did not check in within ``timeout_s``.
    """
    import torch.distributed as torch_dist

    path = file_path(init_method)
    prepare_file(path, rank)
    store = torch_dist.FileStore(str(path), world_size)
    store.set_timeout(timedelta(seconds=timeout_s))
    if store.add(f"{CHECK_IN_PREFIX}{rank}", 1) != 1:
        raise DistributedError(f"--sync-protocol file://{path}: another process checked in as rank {rank} "
                               "at the same time: two workers were given the same --worker-id")
    keys = [f"{CHECK_IN_PREFIX}{other}" for other in range(world_size)]
    try:
        store.wait(keys, timedelta(seconds=timeout_s))
    except Exception as error:  # noqa: BLE001 - torch raises a bare RuntimeError/DistStoreError on timeout
        missing = [other for other, key in enumerate(keys) if not _has(store, key)]
        try:  # withdraw, so that the file does not look left behind by a crash when the command is rerun
            store.delete_key(keys[rank])
        except Exception:  # noqa: BLE001 - the error below says what to do anyway
            pass
        if not missing:
            raise DistributedError(f"--sync-protocol file://{path}: {error}") from error
        raise DistributedError(
            f"rank {rank}/{world_size}: rank(s) {', '.join(map(str, missing))} did not join through "
            f"file://{path} within --distributed_timeout_s {timeout_s:g} s: start them with the same "
            "--sync-protocol and --num-workers (the path must be on a file system every worker sees)"
        ) from None
    return store


def _has(store, key: str) -> bool:
    try:
        return bool(store.check([key]))
    except Exception:  # noqa: BLE001 - a store that fails now cannot tell
        return False


def close_file_store(init_method: str, store) -> None:
    """Rank 0, once every rank is done with the store: mark the file closed, then remove it.

    The mark makes the file reusable if the removal is missed (another worker's ``FileStore`` may write its
    own last record after it).
    """
    path = file_path(init_method)
    try:
        store.set(CLOSED_KEY, str(time.time()))
    except Exception:  # noqa: BLE001 - the file is already gone
        pass
    remove_file(path)


def remove_file(path: Path) -> Optional[bool]:
    """Remove ``path`` if it is there; True if removed."""
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    except OSError:
        return None
