"""``speechkit prepare-librispeech DIR --dest FOLDER``: write manifests for a LibriSpeech-layout tree.

The manifests are :func:`speechkit.data.librispeech.prepare_librispeech`'s.

Example::

    speechkit prepare-librispeech /corpora/LibriSpeech --dest manifests --splits train-clean-100 dev-clean
"""
from __future__ import annotations

import argparse
import os

from speechkit.data.librispeech import prepare_librispeech
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("data_folder", metavar="DIR",
                        help="the LibriSpeech folder (holding train-clean-100, ...)")
    parser.add_argument("--dest", required=True, help="folder for the <split>.json manifests")
    parser.add_argument("--splits", nargs="+", default=None, help="splits to prepare (default: all found)")
    parser.add_argument("--placeholder", default=None, metavar="NAME",
                        help="write paths as $NAME/... instead of absolute paths")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes reading durations (default: up to 8)")
    parser.add_argument("--ext", default="flac", help="audio extension (default: flac)")
    parser.add_argument("--force", action="store_true", help="rewrite manifests that already exist")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    with Progress("prepare-librispeech", unit="file", enabled=not args.no_progress) as bar:
        written = prepare_librispeech(args.data_folder, args.dest, args.splits, placeholder=args.placeholder,
                                      num_workers=args.workers, ext=args.ext, skip_if_exists=not args.force,
                                      progress=bar.report)
    for split, path in written.items():
        print(f"{split}: {path}")
    return 0
