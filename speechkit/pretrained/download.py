"""Download one http(s) file into place, resuming an interrupted download where it stopped.

The bytes go to ``.<name>.part`` beside the destination, which is renamed into place only when complete (and
its sha256 checked), so an interrupted download never looks present. The part file stays after an
interruption, with ``.<name>.part.json`` beside it recording the URL and the server's validator (``ETag`` or
``Last-Modified``). The next attempt asks for the missing bytes only (``Range``), and sends the validator as
``If-Range``, so a server whose file changed in between sends the whole new file instead. A server that
ignores ranges, or a part file without a validator, starts the download over. The caller holds a lock on the
destination, so one process at a time writes the part file.

Example:
    >>> download("https://example.org/models/asr/model.ckpt", Path("cache/model.ckpt"),  # doctest: +SKIP
    ...          sha256=None, where="'model.ckpt' from URL 'https://example.org/models/asr'")
"""
from __future__ import annotations

import hashlib
import http.client
import json
import logging
import os
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Optional

from speechkit.errors import FetchError

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, destination: Path, sha256: Optional[str], where: str) -> None:
    """Fetch ``url`` to ``destination``, resuming the part file of an earlier interrupted attempt.

    Raises:
        FetchError: HTTP error, no answer, a cut connection (the part file is kept for the next attempt), a
            short body or a sha256 mismatch (the part file is removed); the message names ``where``.
    """
    part = destination.with_name(f".{destination.name}.part")
    record = part.with_name(part.name + ".json")
    offset = _resumable_bytes(part, record, url)
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
        request.add_header("If-Range", json.loads(record.read_text())["validator"])
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # the range no longer fits the file: start over
            _remove(part, record)
            return download(url, destination, sha256, where)
        raise FetchError(f"cannot fetch {where}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        raise FetchError(f"cannot fetch {where}: no answer ({type(error).__name__}: {error})") from None
    with response:
        try:
            offset = _start_offset(response, offset, where)
        except FetchError:
            _remove(part, record)  # an answer that does not continue the part file: start over next time
            raise
        if offset:
            logger.info("resuming %s from byte %d", where, offset)
        total = _total_length(response, offset)
        validator = response.headers.get("ETag") or response.headers.get("Last-Modified")
        if validator:
            record.write_text(json.dumps({"url": url, "validator": validator}))
        elif record.exists():
            record.unlink()
        next_time = ("the next fetch resumes there" if validator
                     else "the server sent no ETag or Last-Modified, so the next fetch starts over")
        received = _append_body(response, part, offset, f"{where}: download interrupted", next_time)
    if total is not None and received != total:
        raise FetchError(f"cannot fetch {where}: download interrupted after {received} of {total} bytes; "
                         f"{next_time}")
    if sha256 is not None:
        actual = file_sha256(part)
        if actual != sha256.lower():
            _remove(part, record)
            raise FetchError(f"cannot fetch {where}: sha256 {actual} does not match the expected "
                             f"{sha256.lower()}")
    os.replace(part, destination)
    if record.exists():
        record.unlink()


def _resumable_bytes(part: Path, record: Path, url: str) -> int:
    """Bytes of an earlier attempt worth resuming: the part file's size when its record names this URL and a
    validator; otherwise 0 (and a stale part file is removed)."""
    if not part.exists():
        return 0
    try:
        recorded = json.loads(record.read_text())
        usable = recorded.get("url") == url and bool(recorded.get("validator"))
    except (OSError, ValueError, AttributeError):
        usable = False
    if usable and part.stat().st_size > 0:
        return part.stat().st_size
    _remove(part, record)
    return 0


def _start_offset(response, offset: int, where: str) -> int:
    """Where the body starts: ``offset`` for a 206 answer that continues the part file, else 0."""
    if response.status != 206:
        return 0  # a full answer: the server ignores ranges, or the file changed (If-Range)
    match = _CONTENT_RANGE.fullmatch(response.headers.get("Content-Range", "").strip())
    if not match or int(match.group(1)) != offset:
        raise FetchError(f"cannot fetch {where}: asked for bytes {offset}- and got Content-Range "
                         f"{response.headers.get('Content-Range')!r}")
    return offset


def _total_length(response, offset: int) -> Optional[int]:
    length = response.headers.get("Content-Length")
    return None if length is None else offset + int(length)


def _append_body(response, part: Path, offset: int, what: str, next_time: str) -> int:
    """Write the body after the first ``offset`` bytes of the part file; returns the file's new size."""
    received = offset
    with open(part, "r+b" if offset else "wb") as out:
        out.truncate(offset)
        out.seek(offset)
        try:
            for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                out.write(chunk)
                received += len(chunk)
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            raise FetchError(f"cannot fetch {what} after {received} bytes ({type(error).__name__}: {error}); "
                             f"{next_time}") from None
        finally:
            out.flush()
            os.fsync(out.fileno())
    return received


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            path.unlink()
