"""Where a model folder comes from and how its files are fetched, resolved once: :class:`ModelSource`.

Loading a model folder takes a dozen settings (the source, the save folder, the revision, the network and
cache, whether to download anew, how far to trust the folder's YAML and how much it may cost). They are
resolved into one frozen object before anything is fetched; every later step (the ``hyperparams.yaml``, the
pretrainer's files, exported graphs) fetches through it, so no step can see other settings than another.

The fields are plain keyword arguments, so command-line flags map onto them one to one; :meth:`ModelSource.
resolve` adds the defaults ``from_hparams`` applies (a remote folder lands in ``<cache>/models/<source>``, a
local one is used in place).

Example:
    >>> model = ModelSource.resolve("org/asr-ctc", revision="v1", allow_network=False)
    >>> model.local, model.strategy.value, model.savedir.name
    (False, 'symlink', 'org--asr-ctc')
    >>> model.describe("hyperparams.yaml")
    "hyperparams.yaml from Hugging Face repo 'org/asr-ctc' (revision v1)"
"""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from collections.abc import Sequence
from typing import Optional, Union

from speechkit.pretrained.sources.fetching import (
    FetchFrom,
    FetchSource,
    FetchStrategy,
    as_strategy,
    default_cache_dir,
    describe,
    fetch,
    resolve_source,
)
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A model folder's source and fetch settings.

    Args:
        source: local folder, Hub repo id, URL of the folder, or a ``FetchSource`` (resolved on creation).
        savedir: where the folder's files appear (None: in place, for a local folder).
        strategy: how fetched files appear in ``savedir`` (symlink, copy, in_place).
        revision: Hub revision (branch, tag or commit).
        allow_network: False serves remote sources from the cache only.
        cache_dir: the download cache (None: speechkit's, see docs/pretrained.md).
        force_download: fetch every remote file anew instead of revalidating the cached copy.
        trust_remote_code: let a YAML from a non-local source build any object.
        allow: exact dotted names a remote YAML may build on top of the built-in allowlist.
        limits: size and time bounds on a non-local folder (None: unbounded).
    """

    source: FetchSource
    savedir: Optional[pathlib.Path] = None
    strategy: FetchStrategy = FetchStrategy.SYMLINK
    revision: Optional[str] = None
    allow_network: bool = True
    cache_dir: Optional[Union[str, os.PathLike]] = None
    force_download: bool = False
    trust_remote_code: bool = False
    allow: tuple = ()
    limits: Optional[SourceLimits] = None

    def __post_init__(self):
        object.__setattr__(self, "source", resolve_source(self.source))
        if self.savedir is not None:
            object.__setattr__(self, "savedir", pathlib.Path(self.savedir))
        object.__setattr__(self, "strategy", as_strategy(self.strategy))
        object.__setattr__(self, "allow", tuple(self.allow))

    @classmethod
    def resolve(cls, source, savedir=None, strategy: Union[FetchStrategy, str] = FetchStrategy.SYMLINK,
                limits: Optional[SourceLimits] = None, allow: Sequence[str] = (), **settings) -> ModelSource:
        """The settings ``from_hparams`` uses: without ``savedir`` a local folder is read in place and a
        remote one lands in ``<cache>/models/<source>``; a ``savedir`` that is the local folder itself is read
        in place too; ``limits`` default to :class:`SourceLimits`'s. Other keywords are fields."""
        fetch_source = resolve_source(source)
        local = fetch_source.kind is FetchFrom.LOCAL
        if savedir is None:
            strategy = FetchStrategy.IN_PLACE if local else strategy
            savedir = None if local else default_cache_dir() / "models" / _slug(fetch_source.path)
        elif pathlib.Path(savedir).exists() and local and os.path.samefile(savedir, fetch_source.path):
            strategy = FetchStrategy.IN_PLACE
        return cls(fetch_source, savedir, strategy, limits=limits or DEFAULT_LIMITS, allow=tuple(allow),
                   **settings)

    @property
    def local(self) -> bool:
        """Whether the folder is on this machine (the user's own files: not vetted, not bounded)."""
        return self.source.kind is FetchFrom.LOCAL

    @property
    def trusted(self) -> bool:
        """Whether the folder's YAML may build anything: a local folder, or ``trust_remote_code``."""
        return self.local or self.trust_remote_code

    @property
    def folder(self) -> pathlib.Path:
        """A local source's folder (``~`` expanded)."""
        return pathlib.Path(os.path.expanduser(self.source.path))

    def describe(self, filename: str) -> str:
        """``filename`` and where it comes from, for messages."""
        return f"{filename} from {describe(self.source, self.revision)}"

    def fetch_options(self, max_bytes: Optional[int] = None) -> dict:
        """Keyword arguments of :func:`~speechkit.pretrained.sources.fetching.fetch` for a file of this
        folder: the strategy, revision, network, cache and download settings, and for a bounded non-local
        folder the time bounds and ``max_bytes``."""
        options = dict(strategy=self.strategy, revision=self.revision, allow_network=self.allow_network,
                       cache_dir=self.cache_dir, force_download=self.force_download)
        if not self.local and self.limits is not None:  # docs/pretrained.md, "Limits"
            options.update(max_bytes=max_bytes, stall_timeout_s=self.limits.stall_timeout_s,
                           download_timeout_s=self.limits.download_timeout_s)
        return options

    def file_options(self) -> dict:
        """:meth:`fetch_options` for a weights or graph file (bounded by ``limits.max_file_bytes``)."""
        return self.fetch_options(self.limits.max_file_bytes if self.limits is not None else None)

    def fetch(self, filename: str, max_bytes: Optional[int] = None) -> pathlib.Path:
        """Fetch one file of the folder into ``savedir`` (see :meth:`fetch_options`); returns its path."""
        return fetch(filename, self.source, self.savedir, **self.fetch_options(max_bytes))

    def fetch_file(self, filename: str) -> pathlib.Path:
        """Fetch a weights or graph file of the folder (bounded by ``limits.max_file_bytes``)."""
        return fetch(filename, self.source, self.savedir, **self.file_options())


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "--", text).strip("-") or "model"
