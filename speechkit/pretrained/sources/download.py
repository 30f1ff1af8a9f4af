"""Download one http(s) file into place, resuming an interrupted download where it stopped.

The bytes go to ``.<name>.part`` beside the destination, which is renamed into place only when complete (and
its sha256 checked), so an interrupted download never looks present. The part file stays after an
interruption, with ``.<name>.part.json`` beside it recording the URL and the server's validator (``ETag`` or
``Last-Modified``). The next attempt asks for the missing bytes only (``Range``), and sends the validator as
``If-Range``, so a server whose file changed in between sends the whole new file instead. A server that
ignores ranges, or a part file without a validator, starts the download over. The caller holds a lock on the
destination, so one process at a time writes the part file.

A completed download records the server's validators in ``.<name>.validator.json``; a later download of the
same file with ``validator=`` is conditional (``If-None-Match`` / ``If-Modified-Since``), so a file that did
not change is not sent again (HTTP 304). ``max_bytes`` bounds the body (an endless stream stops there) and
``stall_timeout_s`` the wait for each next block of bytes.

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
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Optional

from speechkit.errors import FetchError, FetchNotFoundError

logger = logging.getLogger(__name__)

CHUNK_BYTES = 1 << 20
#: Seconds a download may wait for the server's next bytes before it stops (and resumes next time).
DEFAULT_STALL_TIMEOUT_S = 60.0
#: Seconds a whole download may take before it stops (and resumes next time, when the server allows it).
DEFAULT_DOWNLOAD_TIMEOUT_S = 4 * 3600.0
#: What :func:`download` returns when the server confirmed the cached file (HTTP 304).
NOT_MODIFIED = "not modified"
_CONTENT_RANGE = re.compile(r"bytes (\d+)-\d+/(\d+|\*)")


def file_sha256(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


class ServerUnavailable(FetchError):
    """The server did not answer, answered 5xx, or stopped sending: worth another try later."""


def validator_path(destination: Path) -> Path:
    """Where the validators (``ETag``, ``Last-Modified``) of a cached file are recorded."""
    return destination.with_name(f".{destination.name}.validator.json")


def read_validator(destination: Path) -> dict:
    """``{"etag": ..., "last_modified": ...}`` recorded with ``destination`` (``{}`` when none was sent)."""
    try:
        recorded = json.loads(validator_path(destination).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in recorded.items() if k in ("etag", "last_modified") and isinstance(v, str)}


def download(url: str, destination: Path, sha256: Optional[str], where: str, validator: Optional[dict] = None,
             max_bytes: Optional[int] = None, stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
             download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S):
    """Fetch ``url`` to ``destination``, resuming the part file of an earlier interrupted attempt.

    Args:
        validator: for a ``destination`` already cached, what :func:`read_validator` gives: the request is
            conditional (``If-None-Match`` / ``If-Modified-Since``) and a 304 answer keeps the cached file.
        max_bytes: the largest body accepted; a larger ``Content-Length`` or a longer body is refused.
        stall_timeout_s: the longest wait for the next bytes (a silent server stops the download).
        download_timeout_s: the longest the whole download may take (a server sending slowly stops).

    Returns:
        :data:`NOT_MODIFIED` when the server confirmed the cached file, else None (``destination`` replaced).

    Raises:
        FetchError: HTTP error, a short body or a sha256 mismatch (the part file is removed), a file over
            ``max_bytes``; :class:`~speechkit.errors.FetchNotFoundError` for a 404 or 410 answer;
            :class:`ServerUnavailable` for no answer, a 5xx or a cut connection (the part file is kept for the
            next attempt). The message names ``where``.
    """
    part = destination.with_name(f".{destination.name}.part")
    record = part.with_name(part.name + ".json")
    offset = _resumable_bytes(part, record, url)
    request = urllib.request.Request(url)
    if offset:
        request.add_header("Range", f"bytes={offset}-")
        request.add_header("If-Range", json.loads(record.read_text())["validator"])
    elif validator:
        if validator.get("etag"):
            request.add_header("If-None-Match", validator["etag"])
        if validator.get("last_modified"):
            request.add_header("If-Modified-Since", validator["last_modified"])
    try:
        response = _OPENER.open(request, timeout=stall_timeout_s)
    except FetchError as error:  # a redirect to a scheme other than http(s)
        raise FetchError(f"cannot fetch {where}: {error}") from None
    except urllib.error.HTTPError as error:
        if error.code == 304 and validator and not offset:
            return NOT_MODIFIED
        if error.code == 416 and offset:  # the range no longer fits the file: start over
            _remove(part, record)
            return download(url, destination, sha256, where, validator, max_bytes, stall_timeout_s,
                            download_timeout_s)
        kind = ServerUnavailable if error.code >= 500 else FetchNotFoundError if error.code in (404, 410) \
            else FetchError
        raise kind(f"cannot fetch {where}: HTTP {error.code} {error.reason}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        raise ServerUnavailable(f"cannot fetch {where}: no answer ({type(error).__name__}: "
                                f"{error})") from None
    with response:
        try:
            offset = _start_offset(response, offset, where)
        except FetchError:
            _remove(part, record)  # an answer that does not continue the part file: start over next time
            raise
        if offset:
            logger.info("resuming %s from byte %d", where, offset)
        total = _total_length(response, offset, where)
        if max_bytes is not None and total is not None and total > max_bytes:
            _remove(part, record)
            raise FetchError(f"cannot fetch {where}: the server announces {total} bytes, more than the limit "
                             f"of {max_bytes}; refused before downloading")
        headers = {"etag": response.headers.get("ETag"),
                   "last_modified": response.headers.get("Last-Modified")}
        resume_with = headers["etag"] or headers["last_modified"]
        if resume_with:
            record.write_text(json.dumps({"url": url, "validator": resume_with}))
        elif record.exists():
            record.unlink()
        next_time = ("the next fetch resumes there" if resume_with
                     else "the server sent no ETag or Last-Modified, so the next fetch starts over")
        try:
            received = _append_body(response, part, offset, f"{where}: download interrupted", next_time,
                                    max_bytes, stall_timeout_s, download_timeout_s)
        except ServerUnavailable:
            if not resume_with:
                _remove(part, record)
            raise
        except FetchError:  # over the limit: nothing of it is kept
            _remove(part, record)
            raise
    if total is not None and received != total:
        raise ServerUnavailable(f"cannot fetch {where}: download interrupted after {received} of {total} "
                                f"bytes; {next_time}")
    if sha256 is not None:
        actual = file_sha256(part)
        if actual != sha256.lower():
            _remove(part, record)
            raise FetchError(f"cannot fetch {where}: sha256 {actual} does not match the expected "
                             f"{sha256.lower()}")
    os.replace(part, destination)
    known = {k: v for k, v in headers.items() if v}
    validator_path(destination).write_text(json.dumps(known))
    if record.exists():
        record.unlink()
    return None


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


def _total_length(response, offset: int, where: str) -> Optional[int]:
    length = response.headers.get("Content-Length")
    if length is None:
        return None
    if not length.strip().isdigit():
        raise FetchError(f"cannot fetch {where}: the server sent Content-Length {length[:40]!r}")
    return offset + int(length)


def _append_body(response, part: Path, offset: int, what: str, next_time: str,
                 max_bytes: Optional[int] = None, stall_timeout_s: Optional[float] = None,
                 download_timeout_s: Optional[float] = None) -> int:
    """Write the body after the first ``offset`` bytes of the part file; returns the file's new size.

    Stops with a :class:`FetchError` once the file passes ``max_bytes`` (a body without end), and with a
    :class:`ServerUnavailable` when the connection breaks or stalls past the socket's timeout, or the body
    takes longer than ``download_timeout_s``.
    """
    received = offset
    deadline = None if download_timeout_s is None else time.monotonic() + download_timeout_s
    with open(part, "r+b" if offset else "wb") as out:
        out.truncate(offset)
        out.seek(offset)
        try:
            # read1: what has arrived, so that a stall keeps every byte received before it.
            for chunk in iter(lambda: response.read1(CHUNK_BYTES), b""):
                if max_bytes is not None and received + len(chunk) > max_bytes:
                    raise FetchError(f"cannot fetch {what}: the body passed the limit of {max_bytes} bytes; "
                                     "stopped and discarded")
                out.write(chunk)
                received += len(chunk)
                if deadline is not None and time.monotonic() > deadline:
                    raise _TooSlow()
        except _TooSlow:
            raise ServerUnavailable(f"cannot fetch {what} after {received} bytes: the download took longer "
                                    f"than its limit of {download_timeout_s:g} s; {next_time}") from None
        except TimeoutError:
            raise ServerUnavailable(f"cannot fetch {what} after {received} bytes: the server sent nothing "
                                    f"for {stall_timeout_s} s; {next_time}") from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
            raise ServerUnavailable(f"cannot fetch {what} after {received} bytes ({type(error).__name__}: "
                                    f"{error}); {next_time}") from None
        finally:
            out.flush()
            os.fsync(out.fileno())
    return received


class _TooSlow(Exception):
    """The download passed its deadline (turned into a ServerUnavailable naming the file)."""


class _HttpOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to an http(s) URL (urllib alone would follow one to ftp://)."""

    def http_error_302(self, req, fp, code, msg, headers):
        target = headers.get("location") or headers.get("uri") or ""
        scheme = urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, target)).scheme.lower()
        if scheme not in ("http", "https"):
            raise FetchError(f"the server redirected to {target[:200]!r}, scheme {scheme!r}; only http and "
                             "https are followed")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


_OPENER = urllib.request.build_opener(_HttpOnlyRedirects)


def _remove(*paths: Path) -> None:
    for path in paths:
        if path.exists():
            path.unlink()
