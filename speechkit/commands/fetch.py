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

from speechkit.commands.model_source import add_model_source_arguments, limits_from, model_source
from speechkit.pretrained.sources.fetching import FetchStrategy


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
    from speechkit.pretrained.prefetch import prefetch_model
    from speechkit.pretrained.sources.fetching import fetch
    from speechkit.pretrained.sources.model_source import ModelSource

    model = ModelSource(model_source(args), args.savedir, args.strategy, revision=args.revision,
                        allow_network=not args.offline, cache_dir=args.cache_dir, force_download=args.refresh,
                        limits=limits_from(args))
    if args.sha256 and len(args.files) != 1:
        raise FetchError("--sha256 needs exactly one file name")
    if args.files:
        for name in args.files:
            path = fetch(name, model.source, model.savedir, sha256=args.sha256, **model.fetch_options())
            print(f"{name}\t{path}")
        return 0
    for name, path in prefetch_model(model, args.hparams_file).items():
        print(f"{name}\t{path}")
    return 0
