"""Fetch one file of a pretrained model from a local folder, a Hugging Face Hub repo or an http(s) URL.

Every source ends the same way: the file is available as ``savedir/filename`` (a symlink or a copy), or, with
the in-place strategy, where it already lies (the local folder or the download cache). Remote files are first
downloaded into a cache shared by every job on the machine:

- Hugging Face repos use huggingface_hub's own cache (``HF_HUB_CACHE`` / ``HF_HOME``, or ``cache_dir``).
- URLs use ``<cache_dir>/url/<hash of the URL>/<filename>``, where ``cache_dir`` defaults to
  ``$SPEECHKIT_CACHE`` or ``~/.cache/speechkit``.

A download writes a part file that is renamed only once complete (and, if given, once its sha256 matches),
so an interrupted download never leaves a file that looks present; the next attempt resumes it
(:mod:`speechkit.pretrained.sources.download`). A file lock per cached file lets
one process download while every other rank or job on the machine waits and then reuses the result.
A cached URL file is revalidated with the server on each fetch (a conditional request: a 304 answer costs no
download) unless offline, pinned by ``sha256`` or the cache is read-only; ``force_download`` fetches it anew.

Every name that becomes a path is checked to stay inside its folder
(:mod:`speechkit.pretrained.sources.names`), and URL sources are http(s) only: ``file://`` would read this
machine's files.

Example:
    >>> path = fetch("model.ckpt", "speechkit/asr-ctc-mini", savedir="pretrained/asr")  # doctest: +SKIP
    >>> os.makedirs("results/asr-model"); torch.save({}, "results/asr-model/model.ckpt")
    >>> local = FetchSource(FetchFrom.LOCAL, "results/asr-model")   # a folder on this machine
    >>> path = fetch("model.ckpt", local, "out")
    >>> path, path.is_symlink()
    (PosixPath('out/model.ckpt'), True)
"""
from __future__ import annotations

import enum
import hashlib
import logging
import os
import pathlib
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Optional, Union

import filelock

from speechkit.errors import FetchError, FetchNotFoundError
from speechkit.pretrained.sources.download import (
    DEFAULT_DOWNLOAD_TIMEOUT_S,
    DEFAULT_STALL_TIMEOUT_S,
    NOT_MODIFIED,
    ServerUnavailable,
    download,
    file_sha256,
    read_validator,
)
from speechkit.pretrained.sources.hub_files import hub_file
from speechkit.pretrained.sources.names import check_relative_name, inside

logger = logging.getLogger(__name__)

#: Seconds a process waits for another one's download of the same file before giving up.
DEFAULT_LOCK_TIMEOUT_S = 6 * 3600.0
# owner/name (or a bare name), as the Hub spells repo ids.
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*(/[A-Za-z0-9][A-Za-z0-9_.\-]*)?$")


class FetchFrom(enum.Enum):
    """Where a source lives."""

    LOCAL = "local"
    HUGGING_FACE = "huggingface"
    URL = "url"


@dataclass(frozen=True)
class FetchSource:
    """A source whose kind is stated rather than guessed.

    Needed when a name is ambiguous, e.g. a local folder ``speechkit/asr`` next to the Hub repo of that name.
    The kind may be given as a :class:`FetchFrom` or its value (``"local"``, ``"huggingface"``, ``"url"``),
    which lets YAML files write ``!new:speechkit.pretrained.FetchSource [huggingface, org/repo]``.

    Example:
        >>> FetchSource("huggingface", "org/repo")
        FetchSource(kind=<FetchFrom.HUGGING_FACE: 'huggingface'>, path='org/repo')
    """

    kind: FetchFrom
    path: str

    def __post_init__(self):
        if not isinstance(self.kind, FetchFrom):
            text = str(self.kind)
            by_name = {k.name.lower(): k for k in FetchFrom} | {k.value: k for k in FetchFrom}
            if text.lower() not in by_name:
                raise FetchError(f"FetchSource: unknown kind {self.kind!r}; use one of "
                                 f"{', '.join(k.value for k in FetchFrom)}")
            object.__setattr__(self, "kind", by_name[text.lower()])
        object.__setattr__(self, "path", os.fspath(self.path))
        if self.kind is FetchFrom.URL:
            check_url_scheme(self.path, "FetchSource")


def check_url_scheme(url: str, what: str) -> str:
    """``url`` when it is http(s); any other scheme (``file://``, ``ftp://``, ``data:``) is refused, since a
    URL source is fetched through urllib, which would read this machine's files for ``file://``."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchError(f"{what}: URL source {url!r} has scheme {scheme or 'none'!r}; only http:// and "
                         "https:// are fetched (use a local folder for files of this machine)")
    return url


class FetchStrategy(enum.Enum):
    """How a fetched file appears in ``savedir``."""

    SYMLINK = "symlink"  # a link to the local file or the cached download (copy where links fail)
    COPY = "copy"  # an independent copy
    IN_PLACE = "in_place"  # nothing in savedir: use the file where it lies (local folder or cache)


Source = Union[str, os.PathLike, FetchSource]


def resolve_source(source: Source) -> FetchSource:
    """Decide the kind of ``source``: URL by scheme, then an existing local path, then a Hub repo id.

    A local path wins over a repo id of the same spelling; pass a :class:`FetchSource` to choose otherwise.

    Example:
        >>> resolve_source("https://example.org/models/asr").kind
        <FetchFrom.URL: 'url'>
    """
    if isinstance(source, FetchSource):
        return source
    text = os.fspath(source)
    if re.match(r"^https?://", text):
        return FetchSource(FetchFrom.URL, text)
    if os.path.exists(os.path.expanduser(text)):
        return FetchSource(FetchFrom.LOCAL, text)
    if _REPO_ID.match(text) and not text.startswith(".") and "/" in text:
        return FetchSource(FetchFrom.HUGGING_FACE, text)
    return FetchSource(FetchFrom.LOCAL, text)


def is_repo_id(text: str) -> bool:
    """Whether ``text`` is spelled as a Hub repo id (``owner/name`` or ``name``)."""
    return bool(_REPO_ID.match(text))


def describe(source: FetchSource, revision: Optional[str] = None) -> str:
    """A human description of a source for messages, e.g. "Hugging Face repo 'org/x' (revision main)"."""
    if source.kind is FetchFrom.HUGGING_FACE:
        return f"Hugging Face repo '{source.path}' (revision {revision or 'main'})"
    if source.kind is FetchFrom.URL:
        return f"URL '{source.path}'"
    return f"local folder '{source.path}'"


def network_allowed(allow_network: bool = True) -> bool:
    """False when the caller or ``HF_HUB_OFFLINE=1`` (read at call time) forbids network access."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")
    return bool(allow_network) and not offline


def as_strategy(strategy: Union[FetchStrategy, str]) -> FetchStrategy:
    """A :class:`FetchStrategy` from itself or its value (``"symlink"``, ``"copy"``, ``"in_place"``)."""
    if isinstance(strategy, FetchStrategy):
        return strategy
    try:
        return FetchStrategy(str(strategy).lower().replace("-", "_").replace(" ", "_"))
    except ValueError:
        raise FetchError(f"unknown fetch strategy {strategy!r}; use one of "
                         f"{', '.join(s.value for s in FetchStrategy)}") from None


def default_cache_dir() -> pathlib.Path:
    """``$SPEECHKIT_CACHE``, else ``~/.cache/speechkit``."""
    return pathlib.Path(os.environ.get("SPEECHKIT_CACHE") or pathlib.Path.home() / ".cache" / "speechkit")


def fetch(
    filename: str,
    source: Source,
    savedir: Optional[Union[str, os.PathLike]] = None,
    strategy: Union[FetchStrategy, str] = FetchStrategy.SYMLINK,
    revision: Optional[str] = None,
    sha256: Optional[str] = None,
    allow_network: bool = True,
    save_filename: Optional[str] = None,
    cache_dir: Optional[Union[str, os.PathLike]] = None,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT_S,
    force_download: bool = False,
    max_bytes: Optional[int] = None,
    size: Optional[int] = None,
    stall_timeout_s: float = DEFAULT_STALL_TIMEOUT_S,
    download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S,
) -> pathlib.Path:
    """Make ``filename`` from ``source`` available and return its path.

    Args:
        filename: the file's name inside the source (may contain ``/`` for a subfolder).
        source: a local folder, a Hub repo id (``owner/name``), an http(s) URL of the folder holding the file,
            or a :class:`FetchSource` forcing the kind.
        savedir: where the file appears (as ``savedir/save_filename``); unused with ``IN_PLACE``.
        strategy: ``symlink`` (default; falls back to a copy where the file system refuses links), ``copy``,
            or ``in_place``.
        revision: Hub branch, tag or commit (Hub sources only; default ``main``).
        sha256: expected hex digest; a file that does not match is never returned.
        allow_network: False (or ``HF_HUB_OFFLINE=1``) serves remote files from the cache only.
        save_filename: the name in ``savedir`` (default: ``filename``).
        cache_dir: download cache (default ``$SPEECHKIT_CACHE`` or ``~/.cache/speechkit``; Hub files go to
            huggingface_hub's cache unless this is given, then to ``cache_dir/huggingface``).
        lock_timeout_s: how long to wait for another process downloading the same file.
        force_download: download again even when the cache holds the file (``--refresh``). Without it, a
            cached URL file is revalidated with the server (``If-None-Match`` / ``If-Modified-Since``) unless
            offline or pinned by ``sha256``; Hub files are revalidated by huggingface_hub.
        max_bytes: the largest file accepted (URL files): a larger ``Content-Length``, or a body growing past
            it, is refused and nothing is kept.
        size: the file's exact size in bytes, when known: any other size is refused (and the download stops
            there).
        stall_timeout_s: a download whose server sends nothing for this long stops (and resumes next time).
        download_timeout_s: a URL download taking longer than this stops (and resumes next time).

    Returns:
        The path of the usable file.

    Raises:
        FetchError: naming the file and the source (missing, offline, interrupted, checksum mismatch);
            :class:`~speechkit.errors.FetchNotFoundError` when the source has no such file (a missing local
            file, HTTP 404 or 410, a missing Hub entry; offline: one the cache recorded as missing).
    """
    fetch_source = resolve_source(source)
    strategy = as_strategy(strategy)
    where = f"'{filename}' from {describe(fetch_source, revision)}"
    check_relative_name(filename, f"fetching {where}: file name")
    if strategy is not FetchStrategy.IN_PLACE and savedir is None:
        raise FetchError(f"fetching {where}: savedir is required with strategy '{strategy.value}'")
    online = network_allowed(allow_network)
    limits = _Limits(max_bytes, size, stall_timeout_s, download_timeout_s)
    if fetch_source.kind is FetchFrom.LOCAL:
        stored = _local_file(filename, fetch_source)
    elif fetch_source.kind is FetchFrom.HUGGING_FACE:
        stored = hub_file(filename, fetch_source.path, revision, online, cache_dir, force_download,
                          limits.cap, where)
    else:
        stored = _url_file(filename, fetch_source, online, cache_dir, sha256, lock_timeout_s, force_download,
                           limits)
    if sha256 is not None and fetch_source.kind is not FetchFrom.URL:  # URL downloads are checked on arrival
        _check_sha256(stored, sha256, where)
    limits.check_stored(stored, where)
    if strategy is FetchStrategy.IN_PLACE:
        return stored
    destination = inside(savedir, save_filename or filename, f"fetching {where}: save name")
    place(stored, destination, strategy)
    return destination


@dataclass(frozen=True)
class _Limits:
    """Size and time bounds of one fetch (see :func:`fetch`)."""

    max_bytes: Optional[int]
    size: Optional[int]
    stall_timeout_s: float
    download_timeout_s: float = DEFAULT_DOWNLOAD_TIMEOUT_S

    @property
    def cap(self) -> Optional[int]:
        """The most bytes a download may bring."""
        caps = [n for n in (self.max_bytes, self.size) if n is not None]
        return min(caps) if caps else None

    def check_stored(self, path: pathlib.Path, where: str) -> None:
        """A file already on disk (local, cached, from the Hub) must fit the limits too."""
        actual = path.stat().st_size
        if self.size is not None and actual != self.size:
            raise FetchError(f"{where}: {path} has {actual} bytes, expected {self.size}")
        if self.max_bytes is not None and actual > self.max_bytes:
            raise FetchError(f"{where}: {path} has {actual} bytes, more than the limit of {self.max_bytes}")


# ----------------------------------------------------------------------------------------------- local
def _local_file(filename: str, source: FetchSource) -> pathlib.Path:
    path = pathlib.Path(os.path.expanduser(source.path)) / filename
    if not path.is_file():
        hint = ""
        if _REPO_ID.match(source.path) and "/" in source.path:
            hint = f" (for the Hub repo, pass FetchSource('huggingface', '{source.path}'))"
        raise FetchNotFoundError(f"cannot fetch '{filename}' from {describe(source)}: {path} does not "
                                 f"exist{hint}")
    return path


# ------------------------------------------------------------------------------------------------- url
def url_of(source: FetchSource, filename: str) -> str:
    """The URL of ``filename`` inside the URL folder ``source``."""
    return source.path.rstrip("/") + "/" + urllib.parse.quote(filename)


def url_cache_path(url: str, filename: str, cache_dir=None) -> pathlib.Path:
    """Where a download from ``url`` is cached."""
    root = pathlib.Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return root / "url" / hashlib.sha256(url.encode()).hexdigest()[:24] / pathlib.Path(filename).name


def _url_file(filename, source, online, cache_dir, sha256, lock_timeout_s, force_download,
              limits: _Limits) -> pathlib.Path:
    url = url_of(source, filename)
    check_url_scheme(url, f"fetching '{filename}'")
    cached = url_cache_path(url, filename, cache_dir)
    where = f"'{filename}' from URL '{url}'"
    if _is_usable(cached, sha256) and (not online or not os.access(cached.parent, os.W_OK)):
        return cached  # offline, or a read-only cache that could not take a newer file anyway: no lock
    if _is_usable(cached, sha256) and sha256 is not None and not force_download:
        return cached  # pinned by its digest: the server cannot change what is used
    absent = absence_marker(cached)
    if not online and not cached.is_file() and absent.is_file():
        raise FetchNotFoundError(f"offline (HF_HUB_OFFLINE=1 or allow_network=False): {where} was not on the "
                                 f"server when last asked ({absent})")
    if not online:
        raise FetchError(f"offline (HF_HUB_OFFLINE=1 or allow_network=False): {where} is not in the cache "
                         f"{cached}; fetch it once on a machine with network access into the same cache")
    was_cached = _is_usable(cached, sha256)
    cached.parent.mkdir(parents=True, exist_ok=True)
    with _lock(cached, lock_timeout_s, where):
        if not was_cached and _is_usable(cached, sha256):
            return cached  # another process downloaded it while we waited: fresh, no need to ask again
        validator = None if force_download else _cached_validator(cached, sha256)
        try:
            outcome = download(url, cached, sha256, where, validator=validator, max_bytes=limits.cap,
                               stall_timeout_s=limits.stall_timeout_s,
                               download_timeout_s=limits.download_timeout_s)
        except FetchNotFoundError:
            # Recorded, as huggingface_hub records a missing entry, so that offline the answer is still known.
            try:
                absent.touch()
            except OSError as error:  # a cache that takes no new file: offline it is merely not cached
                logger.debug("cannot record %s as missing in %s: %s", where, absent, error)
            raise
        except FetchError as error:
            if validator is None or not isinstance(error, ServerUnavailable):
                raise
            # As huggingface_hub does: a server that cannot be asked leaves the cached copy in use.
            logger.warning("cannot revalidate %s (%s); using the cached copy %s", where, error, cached)
            return cached
        if outcome is NOT_MODIFIED:
            logger.debug("%s: not modified since it was cached", where)
        if absent.exists():
            absent.unlink()
    return cached


def absence_marker(cached: pathlib.Path) -> pathlib.Path:
    """The file beside a URL cache entry recording that the server answered "not found" for it (404 or 410):
    offline, the file counts as absent rather than merely not downloaded. A later download removes it."""
    return cached.with_name(f".{cached.name}.absent")


def _cached_validator(cached: pathlib.Path, sha256: Optional[str]) -> Optional[dict]:
    """The validator recorded with a usable cached file (``{}`` when the server sent none), or None when
    there is no usable cached file."""
    return read_validator(cached) if _is_usable(cached, sha256) else None


def _is_usable(path: pathlib.Path, sha256: Optional[str]) -> bool:
    if not path.is_file():
        return False
    return sha256 is None or file_sha256(path) == sha256.lower()


def _lock(path: pathlib.Path, timeout_s: float, where: str):
    # Group-writable, so that users sharing a cache can wait on each other's locks.
    lock = filelock.FileLock(str(path) + ".lock", timeout=timeout_s, mode=0o664)

    class _Guard:
        def __enter__(self):
            try:
                lock.acquire()
            except filelock.Timeout:
                raise FetchError(f"cannot fetch {where}: another process held the download lock "
                                 f"{lock.lock_file} for {timeout_s:.0f} s") from None
            return self

        def __exit__(self, *exc):
            lock.release()

    return _Guard()


def _check_sha256(path: pathlib.Path, expected: str, where: str) -> None:
    actual = file_sha256(path)
    if actual != expected.lower():
        raise FetchError(f"{where}: sha256 of {path} is {actual}, expected {expected.lower()}")


# ---------------------------------------------------------------------------------------------- placing
def place(stored: pathlib.Path, destination: pathlib.Path, strategy: FetchStrategy) -> None:
    """Make ``destination`` a link to (or a copy of) ``stored``, replacing what was there atomically.

    Links point at the real file (``stored`` resolved through any symlinks, as in the Hub cache) so they keep
    working whatever the working directory. Where the file system refuses links, a copy is made instead.
    """
    target = pathlib.Path(os.path.realpath(stored))
    destination.parent.mkdir(parents=True, exist_ok=True)
    if os.path.lexists(destination) and os.path.realpath(destination) == str(target):
        if strategy is FetchStrategy.SYMLINK or not destination.is_symlink():
            return  # already the file itself, or already a link to it
    if strategy is FetchStrategy.COPY and _same_copy(target, destination):
        return
    # Unique per process and call: ranks of several machines may place into one shared folder at once.
    tmp = destination.with_name(f".{destination.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    if strategy is FetchStrategy.SYMLINK:
        try:
            os.symlink(target, tmp)
        except OSError as error:
            logger.warning("cannot link %s -> %s (%s); copying instead", destination, target, error)
            strategy = FetchStrategy.COPY
    try:
        if strategy is FetchStrategy.COPY:
            shutil.copy2(target, tmp)
        os.replace(tmp, destination)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _same_copy(target: pathlib.Path, destination: pathlib.Path) -> bool:
    if destination.is_symlink() or not destination.is_file():
        return False
    a, b = target.stat(), destination.stat()
    return a.st_size == b.st_size and int(a.st_mtime) == int(b.st_mtime)
