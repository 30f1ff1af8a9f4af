"""``speechkit fetch``: download a model (or some of its files) ahead of time, e.g. on a cluster's login node.

Examples::

    speechkit fetch org/asr-ctc --savedir models/asr-ctc          # hyperparams.yaml and every file it names
    speechkit fetch https://example.org/models/asr model.ckpt --savedir models/asr
    HF_HUB_OFFLINE=1 speechkit fetch org/asr-ctc --savedir models/asr-ctc   # check that the cache is complete

With no file named, the command fetches ``hyperparams.yaml`` and the files its ``pretrainer`` lists (read as
data: nothing in the YAML is built). It prints one ``name<TAB>path`` line per file. ``--refresh`` downloads
every file anew; without it a cached URL file is revalidated with the server (a 304 answer costs nothing).
"""
from __future__ import annotations

import argparse
import dataclasses
import pathlib

from speechkit.pretrained.sources.fetching import (
    FetchFrom,
    FetchSource,
    FetchStrategy,
    describe,
    fetch,
    resolve_source,
)
from speechkit.pretrained.sources.limits import DEFAULT_LIMITS, SourceLimits


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="Local folder, Hub repo id (owner/name) or http(s) URL of a folder.")
    parser.add_argument("files", nargs="*", help="File names in the source (default: the whole model).")
    parser.add_argument("--savedir", required=True, help="Folder where the files appear.")
    parser.add_argument("--kind", choices=[k.value for k in FetchFrom], default=None,
                        help="Force the source kind (when a local folder has a repo id's name).")
    parser.add_argument("--revision", default=None, help="Hub branch, tag or commit.")
    parser.add_argument("--strategy", choices=[s.value for s in FetchStrategy], default="symlink",
                        help="How files appear in savedir (default: symlink, copy where links fail).")
    parser.add_argument("--sha256", default=None, help="Expected sha256 (with exactly one file).")
    parser.add_argument("--hparams-file", default="hyperparams.yaml",
                        help="The model's YAML (whole-model mode).")
    parser.add_argument("--offline", action="store_true",
                        help="Serve from the cache only (as HF_HUB_OFFLINE=1).")
    parser.add_argument("--cache-dir", default=None, help="Download cache (default: $SPEECHKIT_CACHE, "
                        "~/.cache/speechkit; Hub files: the Hugging Face cache).")
    parser.add_argument("--refresh", action="store_true",
                        help="Download every file anew instead of revalidating the cached copy.")
    add_limit_arguments(parser)


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of :class:`~speechkit.pretrained.sources.limits.SourceLimits` a command line may change."""
    parser.add_argument("--max-yaml-bytes", type=int, default=DEFAULT_LIMITS.max_yaml_bytes,
                        help="Largest hyperparams.yaml accepted from a remote source (default: %(default)s).")
    parser.add_argument("--max-file-bytes", type=int, default=DEFAULT_LIMITS.max_file_bytes,
                        help="Largest file of unannounced size accepted from a remote source "
                             "(default: %(default)s).")
    parser.add_argument("--stall-timeout", type=float, default=DEFAULT_LIMITS.stall_timeout_s,
                        help="Seconds a download may wait for the server's next bytes "
                             "(default: %(default)s).")
    parser.add_argument("--download-timeout", type=float, default=DEFAULT_LIMITS.download_timeout_s,
                        help="Seconds a whole download may take before it stops (it resumes next time; "
                             "default: %(default)s).")


def limits_from(args: argparse.Namespace) -> SourceLimits:
    """The limits the options of :func:`add_limit_arguments` ask for."""
    return dataclasses.replace(DEFAULT_LIMITS, max_yaml_bytes=args.max_yaml_bytes,
                               max_file_bytes=args.max_file_bytes, stall_timeout_s=args.stall_timeout,
                               download_timeout_s=args.download_timeout)


def run(args: argparse.Namespace) -> int:
    from speechkit.errors import FetchError

    source = FetchSource(args.kind, args.source) if args.kind else resolve_source(args.source)
    remote = source.kind is not FetchFrom.LOCAL
    limits = limits_from(args)
    common = dict(strategy=args.strategy, revision=args.revision, allow_network=not args.offline,
                  cache_dir=args.cache_dir, force_download=args.refresh)
    if remote:
        common["stall_timeout_s"] = limits.stall_timeout_s
        common["download_timeout_s"] = limits.download_timeout_s
    if args.sha256 and len(args.files) != 1:
        raise FetchError("--sha256 needs exactly one file name")
    if args.files:
        for name in args.files:
            print(f"{name}\t{fetch(name, source, args.savedir, sha256=args.sha256, **common)}")
        return 0
    from speechkit.pretrained.pretrainer import Pretrainer, declared_files
    from speechkit.pretrained.safety.guard import read_untrusted_yaml
    from speechkit.pretrained.sources.names import check_pretrainer_names

    where = f"{args.hparams_file} from {describe(source, args.revision)}"
    yaml_limit = limits.max_yaml_bytes if remote else None
    yaml_path = fetch(args.hparams_file, source, args.savedir, max_bytes=yaml_limit, **common)
    print(f"{args.hparams_file}\t{yaml_path}")
    if remote:
        text = read_untrusted_yaml(yaml_path, where, limits)
        check_pretrainer_names(text, where)
    else:
        try:
            text = pathlib.Path(yaml_path).read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise FetchError(f"{where}: byte {error.start} is not UTF-8; a hyperparams file must be UTF-8 "
                             "text") from None
    specs = declared_files(text, args.hparams_file)
    pretrainer = Pretrainer(args.savedir, {name: None for name in specs}, specs, strategy=args.strategy,
                            revision=args.revision)
    pretrainer.force_download = args.refresh
    if remote:
        pretrainer.refuse_unsafe_sources(source, where)
        pretrainer.fetch_limits = dict(max_bytes=limits.max_file_bytes,
                                       stall_timeout_s=limits.stall_timeout_s,
                                       download_timeout_s=limits.download_timeout_s)
    collected = pretrainer.collect_files(default_source=source, allow_network=not args.offline,
                                         cache_dir=args.cache_dir)
    for name, path in collected.items():
        print(f"{name}\t{path}")
    return 0
