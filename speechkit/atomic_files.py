"""Files that appear complete or not at all: written beside their final path, then renamed over it.

A reader (another process, a resumed run, a user's ``cat``) never sees half a manifest, report or settings
file, and a failure while writing (a full disk, a bad value, Ctrl-C) leaves the previous file as it was and
no temporary behind. The temporary file is hidden (``.<name>.tmp-<pid>``) in the same folder, so the rename
never crosses file systems (``os.replace`` is atomic on POSIX and Windows) and two processes never share one.

Example:
    >>> import json, os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "settings.json")
    >>> with atomic_write(path) as handle:
    ...     json.dump({"sample_rate": 16000}, handle)
    >>> open(path).read()
    '{"sample_rate": 16000}'
    >>> with replacing(path) as temporary:   # for writers that take a path (soundfile, torch.save)
    ...     with open(temporary, "w") as handle:
    ...         _ = handle.write("{}")
    >>> os.listdir(os.path.dirname(path))
    ['settings.json']
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import shutil
from collections.abc import Iterator
from typing import IO, Optional, Union


def temporary_path(path: Union[str, os.PathLike]) -> str:
    """The hidden temporary name beside ``path`` that this process writes before renaming."""
    folder, name = os.path.split(os.fspath(path))
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}")


@contextlib.contextmanager
def replacing(path: Union[str, os.PathLike]) -> Iterator[str]:
    """Yield a temporary path beside ``path``; what is written there replaces ``path`` when the block ends
    without an error. On an error the temporary is removed and ``path`` stays as it was."""
    temporary = temporary_path(path)
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(temporary)
        raise


@contextlib.contextmanager
def atomic_write(path: Union[str, os.PathLike], mode: str = "w", encoding: Optional[str] = "utf-8",
                 newline: Optional[str] = None) -> Iterator[IO]:
    """``open(path, mode)`` for writing, through a temporary file renamed over ``path`` once closed (see
    :func:`replacing`); ``encoding`` and ``newline`` apply to text modes."""
    text = "b" not in mode
    with replacing(path) as temporary:
        options = {"encoding": encoding, "newline": newline} if text else {}
        with open(temporary, mode, **options) as handle:
            yield handle


@contextlib.contextmanager
def replacing_folder(path: Union[str, os.PathLike]) -> Iterator[pathlib.Path]:
    """Yield a new, empty temporary folder beside ``path`` (its parents made); when the block ends without an
    error it takes ``path``'s place, a folder already there being removed first. On an error the temporary
    folder is removed and ``path`` stays as it was.

    A folder cannot replace another in one atomic step as a file can: between the removal and the rename
    ``path`` is briefly missing, but it is never seen half written.
    """
    temporary = pathlib.Path(temporary_path(path))
    shutil.rmtree(temporary, ignore_errors=True)  # left by a process of this id that was killed
    temporary.mkdir(parents=True)
    try:
        yield temporary
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)
        os.replace(temporary, path)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
