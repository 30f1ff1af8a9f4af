"""``speechkit fetch``: download a model (or some of its files) ahead of time, e.g. on a cluster's login node.

Examples::

    speechkit fetch org/asr-ctc --savedir models/asr-ctc          # hyperparams.yaml and every file it names
    speechkit fetch https://example.org/models/asr model.ckpt --savedir models/asr
    HF_HUB_OFFLINE=1 speechkit fetch org/asr-ctc --savedir models/asr-ctc   # check that the cache is complete

With no file named, the command fetches ``hyperparams.yaml`` and the files its ``pretrainer`` lists (read as
data: nothing in the YAML is built). It prints one ``name<TAB>path`` line per file.
"""
from __future__ import annotations

import argparse
import pathlib

from speechkit.pretrained.fetching import (
    FetchFrom,
    FetchSource,
    FetchStrategy,
    describe,
    fetch,
    resolve_source,
)


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


def run(args: argparse.Namespace) -> int:
    from speechkit.errors import FetchError

    source = FetchSource(args.kind, args.source) if args.kind else resolve_source(args.source)
    common = dict(strategy=args.strategy, revision=args.revision, allow_network=not args.offline,
                  cache_dir=args.cache_dir)
    if args.sha256 and len(args.files) != 1:
        raise FetchError("--sha256 needs exactly one file name")
    if args.files:
        for name in args.files:
            print(f"{name}\t{fetch(name, source, args.savedir, sha256=args.sha256, **common)}")
        return 0
    from speechkit.pretrained.pretrainer import Pretrainer, declared_files

    yaml_path = fetch(args.hparams_file, source, args.savedir, **common)
    print(f"{args.hparams_file}\t{yaml_path}")
    specs = declared_files(pathlib.Path(yaml_path).read_text(), args.hparams_file)
    pretrainer = Pretrainer(args.savedir, {name: None for name in specs}, specs, strategy=args.strategy,
                            revision=args.revision)
    if source.kind is not FetchFrom.LOCAL:
        pretrainer.refuse_local_paths(source, f"{args.hparams_file} from {describe(source, args.revision)}")
    collected = pretrainer.collect_files(default_source=source, allow_network=not args.offline,
                                         cache_dir=args.cache_dir)
    for name, path in collected.items():
        print(f"{name}\t{path}")
    return 0
