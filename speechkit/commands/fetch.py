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
import pathlib

from speechkit.commands.model_source import add_model_source_arguments, limits_from, model_source
from speechkit.pretrained.sources.fetching import (
    FetchFrom,
    FetchStrategy,
    describe,
    fetch,
    resolve_source,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_source_arguments(parser, savedir="required", loads=False)
    parser.add_argument("files", nargs="*", help="File names in the source (default: the whole model).")
    parser.add_argument("--strategy", choices=[s.value for s in FetchStrategy], default="symlink",
                        help="How files appear in savedir (default: symlink, copy where links fail).")
    parser.add_argument("--sha256", default=None, help="Expected sha256 (with exactly one file).")
    parser.add_argument("--hparams-file", default="hyperparams.yaml",
                        help="The model's YAML (whole-model mode).")


def run(args: argparse.Namespace) -> int:
    from speechkit.errors import FetchError

    source = resolve_source(model_source(args))
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
