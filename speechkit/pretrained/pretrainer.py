"""Pretrainer: gather a model's files from any mix of sources and load them into the objects that use them.

Example (in a hyperparams YAML)::

    pretrainer: !new:speechkit.pretrained.Pretrainer
      collect_in: !ref <save_folder>/pretrained
      loadables:
        encoder: !ref <encoder>
        lm: !ref <lm>
      paths:
        encoder: org/asr-model/encoder.safetensors          # a Hub repo
        lm: https://example.org/lms/lm.ckpt                   # a URL

and in Python::

    pretrainer.collect_files()    # once per machine under DDP; other ranks wait
    reports = pretrainer.load_collected()

A ``paths`` value is ``"<source>/<filename>"`` (split at the last ``/``), a bare filename (looked up in the
``default_source`` given to :meth:`Pretrainer.collect_files`, which is how a model folder names its own
files), or a :class:`~speechkit.pretrained.sources.fetching.FetchSource` whose path ends with the filename.
A loadable without a path is looked up as ``<name>.ckpt`` in the default source.
"""
from __future__ import annotations

import logging
import os
import pathlib
from typing import Callable, Optional, Union

import torch

from speechkit.errors import CheckpointError, FetchError
from speechkit.pretrained.loading import LoadReport, describe_report, load_into, load_weights
from speechkit.pretrained.sources.fetching import (
    FetchFrom,
    FetchSource,
    FetchStrategy,
    as_strategy,
    fetch,
    is_repo_id,
    resolve_source,
)
from speechkit.pretrained.sources.model_source import ModelSource
from speechkit.pretrained.sources.names import check_file_name, yaml_child, yaml_items

logger = logging.getLogger(__name__)


class Pretrainer:
    """Collects files into ``collect_in`` and loads them into ``loadables``.

    Args:
        collect_in: folder where the files appear (links or copies, see ``strategy``).
        loadables: name -> object: an ``nn.Module`` or anything with ``load_state_dict`` (weights files),
            anything with ``load_checkpoint(path)`` (e.g. a tokenizer), or an object whose class has a
            ``load(path)`` constructor (e.g. a label encoder; the instance takes the loaded state), or such a
            speechkit class itself (``!name:``, e.g. a SentencePiece tokenizer, which cannot exist without its
            file): the instance built from the file replaces the class in ``loadables``.
        paths: name -> where its file comes from (see the module docstring).
        custom_hooks: name -> ``hook(obj, path)`` replacing the default loading for that name.
        strategy: how files appear in ``collect_in`` (``symlink``, ``copy``, ``in_place``).
        sha256: name -> expected hex digest of its file.
        revision: Hub revision used for files of a Hub source given without one.
        sizes: name -> exact size of its file in bytes: another size is refused, and a download stops there.
    """

    def __init__(self, collect_in: Union[str, os.PathLike] = "model_checkpoints",
                 loadables: Optional[dict] = None, paths: Optional[dict] = None,
                 custom_hooks: Optional[dict] = None,
                 strategy: Union[FetchStrategy, str] = FetchStrategy.SYMLINK, sha256: Optional[dict] = None,
                 revision: Optional[str] = None, sizes: Optional[dict] = None):
        self.collect_in = pathlib.Path(collect_in)
        self.loadables = dict(loadables or {})
        self.paths = dict(paths or {})
        self.custom_hooks = dict(custom_hooks or {})
        self.strategy = as_strategy(strategy)
        self.sha256 = dict(sha256 or {})
        self.revision = revision
        self.sizes = dict(sizes or {})
        self.collected: dict = {}
        unknown = set(self.paths) - set(self.loadables)
        if unknown:
            raise FetchError(f"Pretrainer: paths {sorted(unknown)} name no loadable "
                             f"(loadables: {sorted(self.loadables)})")

    def set_collect_in(self, path) -> None:
        self.collect_in = pathlib.Path(path)

    def add_loadables(self, loadables: dict) -> None:
        self.loadables.update(loadables)

    def add_paths(self, paths: dict) -> None:
        self.paths.update(paths)

    def add_custom_hooks(self, hooks: dict) -> None:
        self.custom_hooks.update(hooks)

    # ----------------------------------------------------------------------------------------- collect
    def locate(self, name: str, default_source=None) -> tuple:
        """``(source, filename)`` of loadable ``name``."""
        spec = self.paths.get(name)
        if spec is None:
            if default_source is None:
                raise FetchError(f"Pretrainer: no path for '{name}' and no default source")
            return default_source, f"{name}.ckpt"
        if isinstance(spec, FetchSource):
            if spec.kind is FetchFrom.HUGGING_FACE:
                return FetchSource(spec.kind, _hub_split(spec.path)[0]), _hub_split(spec.path)[1]
            head, _, filename = spec.path.rstrip("/").rpartition("/")
            return FetchSource(spec.kind, head), filename
        text = os.fspath(spec)
        if "/" not in text:
            return (default_source if default_source is not None else "."), text
        head, _, filename = text.rstrip("/").rpartition("/")
        if resolve_source(head).kind is FetchFrom.LOCAL and not os.path.exists(head) and text.count("/") >= 3:
            # "owner/repo/sub/file": a file in a subfolder of a Hub repo.
            repo, inner = _hub_split(text)
            if resolve_source(repo).kind is FetchFrom.HUGGING_FACE:
                return repo, inner
        return head, filename

    def refuse_unsafe_sources(self, default_source, where: str) -> None:
        """Raise UnsafeSourceError unless every path names a remote file: an http(s) URL or a Hub repo.

        For YAMLs from remote sources: a local path, a ``file://`` URL or any other scheme would make the
        model read this machine's files.
        """
        from speechkit.errors import UnsafeSourceError
        from speechkit.pretrained.sources.fetching import check_url_scheme

        for name in self.loadables:
            source, filename = self.locate(name, default_source)
            try:
                resolved = resolve_source(source)
            except FetchError as error:
                raise UnsafeSourceError(f"{where}: the pretrainer path of '{name}': {error}") from None
            if resolved.kind is FetchFrom.LOCAL:
                raise UnsafeSourceError(f"{where}: the pretrainer path of '{name}' names a file of this "
                                        f"machine ({source}/{filename}); a YAML from a non-local source may "
                                        "only name remote files (pass trust_remote_code=True if you trust "
                                        "this source)")
            if resolved.kind is FetchFrom.URL:
                try:
                    check_url_scheme(resolved.path, f"the pretrainer path of '{name}'")
                except FetchError as error:
                    raise UnsafeSourceError(f"{where}: {error}") from None
            elif not is_repo_id(resolved.path):
                raise UnsafeSourceError(f"{where}: the pretrainer path of '{name}' names the Hub repo "
                                        f"{resolved.path!r}, which is not a repo id (owner/name)")

    def collect_files(self, default_source=None, allow_network: bool = True,
                      cache_dir=None) -> dict:
        """Fetch every loadable's file; return name -> path.

        Under DDP, the first process of each machine (local rank 0) fetches while the others wait; then the
        others take the files from the cache without asking the network, so every rank of a machine loads the
        very same files (even if a Hub branch moves meanwhile). The outcome is agreed across ranks: a failure
        on one process raises on all of them instead of leaving the others waiting. The wait is a collective,
        bounded by the process group's timeout: pre-fetch models too large for it (``speechkit fetch``).
        Every rank must call it (it holds collectives).
        """
        options = dict(strategy=self.strategy, revision=self.revision, allow_network=allow_network,
                       cache_dir=cache_dir)
        return self._collect_on_every_rank(default_source, options)

    def collect_model_files(self, model: ModelSource, collect_in, where: str) -> dict:
        """Fetch every loadable's file of the model folder ``model`` (what ``from_hparams`` does) into
        ``collect_in``: with ``model``'s strategy, network, cache and download settings and, for a non-local
        folder, its bounds; a file of the folder itself is looked up in ``model.source``, and the YAML's own
        ``revision`` wins over ``model``'s. A non-local folder whose YAML is not trusted may name remote files
        only (see :meth:`refuse_unsafe_sources`; ``where`` names the YAML in errors). Returns name -> path, as
        :meth:`collect_files` (every rank must call it too)."""
        if not model.trusted:
            self.refuse_unsafe_sources(model.source, where)
        self.collect_in = pathlib.Path(collect_in)
        options = model.file_options()
        if self.revision is not None:
            options["revision"] = self.revision
        return self._collect_on_every_rank(model.source, options)

    def _collect_on_every_rank(self, default_source, options: dict) -> dict:
        """:meth:`_collect` once per machine first, then on the other ranks from the cache (see
        :meth:`collect_files`)."""
        dist = _distributed()
        ctx = dist.context() if dist is not None else None
        if ctx is None or not ctx.is_distributed:
            self.collected = self._collect(default_source, options)
            return self.collected
        first = ctx.local_rank == 0
        for turn in ("first", "others"):
            error = None
            if first == (turn == "first"):
                try:
                    online = options["allow_network"] and turn == "first"
                    self.collected = self._collect(default_source, {**options, "allow_network": online})
                except Exception as exc:  # reported to every rank below
                    error = f"rank {ctx.rank}: {exc}"
            errors = [e for e in dist.all_gather_object(error) if e]
            if errors:
                raise FetchError("Pretrainer.collect_files failed: " + "; ".join(errors))
        return self.collected

    def _collect(self, default_source, options: dict) -> dict:
        """Fetch each loadable's file into ``collect_in``; ``options``: :func:`fetch`'s settings."""
        collected, used = {}, set()
        for name in self.loadables:
            source, filename = self.locate(name, default_source)
            saved = pathlib.Path(filename).name
            if saved in used:  # two loadables with files of one name (from different sources)
                saved = f"{check_file_name(name, 'Pretrainer: loadable name')}.{saved}"
            used.add(saved)
            collected[name] = fetch(filename, resolve_source(source), self.collect_in,
                                    sha256=self.sha256.get(name), save_filename=saved,
                                    size=self.sizes.get(name), **options)
        return collected

    # -------------------------------------------------------------------------------------------- load
    def load_collected(self, partial: Union[bool, list, set] = False) -> dict:
        """Load each collected file into its loadable; return name -> :class:`LoadReport`.

        Args:
            partial: True (every loadable) or a collection of names whose files may fit only in part; their
                missing, unexpected and shape-mismatched keys are logged instead of raising.
        """
        if not self.collected:
            raise FetchError("Pretrainer.load_collected: call collect_files() first")
        reports = {}
        for name, path in self.collected.items():
            obj = self.loadables[name]
            is_partial = partial is True or (not isinstance(partial, bool) and name in partial)
            reports[name] = self._load_one(name, obj, path, is_partial)
            if not reports[name].complete:
                logger.warning("pretrained '%s' from %s loaded partially: %s", name, path,
                               describe_report(reports[name]))
        return reports

    def _load_one(self, name: str, obj, path, partial: bool) -> LoadReport:
        hook: Optional[Callable] = self.custom_hooks.get(name)
        if hook is not None:
            hook(obj, path)
            return LoadReport(str(path))
        if isinstance(obj, type):
            # A class named with !name: whose instances can only be made from their file (a SentencePiece
            # tokenizer): build it now. Limited to speechkit classes, whose load() reads data only.
            if not obj.__module__.startswith("speechkit.") or not callable(getattr(obj, "load", None)):
                raise CheckpointError(f"{path}: loadable '{name}' is the class {obj.__module__}."
                                      f"{obj.__name__}; only speechkit classes with a load(path) constructor "
                                      "can be built from a file")
            self.loadables[name] = obj.load(path)
            return LoadReport(str(path))
        if not isinstance(obj, torch.nn.Module) and hasattr(obj, "load_checkpoint"):
            obj.load_checkpoint(path)
            return LoadReport(str(path))
        if not hasattr(obj, "load_state_dict") and callable(getattr(type(obj), "load", None)):
            # A class with a `load(path)` constructor (e.g. LabelEncoder): other objects hold references to
            # this instance, so it takes the loaded instance's state rather than being replaced.
            loaded = type(obj).load(path)
            if type(loaded) is not type(obj):
                raise CheckpointError(f"{path}: {type(obj).__name__}.load gave a {type(loaded).__name__}")
            vars(obj).update(vars(loaded))
            return LoadReport(str(path))
        return load_into(obj, load_weights(path), path, partial=partial)


def _hub_split(path: str) -> tuple:
    """``owner/repo/sub/file`` -> ``("owner/repo", "sub/file")``."""
    parts = path.strip("/").split("/")
    return "/".join(parts[:2]), "/".join(parts[2:])


def _distributed():
    """speechkit.distributed when it is available (imported lazily: it sits in a lower layer)."""
    try:
        from speechkit import distributed as dist

        dist.context  # noqa: B018 (probe the pinned interface)
        return dist
    except (ImportError, AttributeError):
        return None


def declared_files(yaml_text: str, where: str = "hyperparams.yaml") -> dict:
    """Read, without building anything, the files a YAML's ``pretrainer`` names: loadable name -> path spec.

    Values are path strings or :class:`FetchSource`; a loadable without a path gets ``<name>.ckpt``. Used to
    pre-fetch a whole model (``speechkit fetch``) and to export one, where nothing may be constructed yet.

    Example:
        >>> declared_files("pretrainer: !new:speechkit.pretrained.Pretrainer\\n"
        ...                "  loadables: {enc: !ref <enc>}\\n  paths: {enc: enc.safetensors}\\n")
        {'enc': 'enc.safetensors'}
    """
    import yaml

    try:
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as error:
        raise FetchError(f"{where}: not valid YAML ({error})") from None
    node = yaml_child(root, "pretrainer")
    if node is None:
        return {}
    names = [key.value for key, _ in yaml_items(yaml_child(node, "loadables"))]
    specs = {}
    for key, value in yaml_items(yaml_child(node, "paths")):
        if isinstance(value, yaml.ScalarNode) and not value.tag.startswith("!"):
            specs[key.value] = value.value
        elif value.tag.endswith("FetchSource"):
            if isinstance(value, yaml.SequenceNode):
                specs[key.value] = FetchSource(*[v.value for v in value.value])
            else:
                specs[key.value] = FetchSource(**{k.value: v.value for k, v in value.value})
        else:
            raise FetchError(f"{where}, line {value.start_mark.line + 1}: pretrainer path of '{key.value}' "
                             "must be a plain string or a FetchSource to be listed without building the YAML")
    return {name: specs.get(name, f"{name}.ckpt") for name in dict.fromkeys(names + list(specs))}

