"""``speechkit data check MANIFEST... [--json]``: what would go wrong in training on these manifests.

Prints the summary per split and one row per kind of finding (``speechkit.data.check``); exits 1 when
there are errors. ``--json`` prints the whole report as JSON instead (every finding).

Example::

    speechkit data check data/cv/train.json data/cv/valid.json data/cv/test.json --sample-rate 16000
"""
from __future__ import annotations

import argparse
import json
import sys

from speechkit.data.check import CheckOptions, check_manifests, read_alphabet
from speechkit.errors import DataError
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifests", metavar="MANIFEST", nargs="+", help="JSON, JSON Lines or CSV manifests")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--sample-rate", type=int, default=None,
                        help="the recipe's rate: files at other rates are reported as resampled")
    parser.add_argument("--min-duration", type=float, default=0.1, help="shorter items are warned about (s)")
    parser.add_argument("--max-duration", type=float, default=None,
                        help="longer items are errors: the longest item a batch takes (s)")
    parser.add_argument("--frame-rate", type=float, default=None,
                        help="model output frames per second (25 for 10 ms hops subsampled 4 times)")
    text = parser.add_mutually_exclusive_group()
    text.add_argument("--alphabet", default=None,
                      help="the characters transcripts may use (a string, or a file of them)")
    text.add_argument("--tokenizer", default=None, help="a SentencePiece model: its characters")
    parser.add_argument("--outlier-factor", type=float, default=3.0,
                        help="speaking rates this many times off the median are warned about")
    parser.add_argument("--headers-only", action="store_true",
                        help="read headers only (no silence, clipping, NaN or duplicate-audio checks)")
    parser.add_argument("--replace", nargs="*", default=[], metavar="NAME=VALUE",
                        help="placeholder values for paths (default: $data_root = the manifest's folder)")
    add_progress_flags(parser)


def tokenizer_alphabet(path: str) -> frozenset:
    """Every character of a SentencePiece model's pieces (its word-start mark read as a space)."""
    from speechkit.tokenizers import SentencePieceTokenizer

    tokenizer = SentencePieceTokenizer.load(path)
    special = {tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id}
    pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size) if i not in special]
    return frozenset("".join(pieces).replace("\u2581", " "))


def run(args: argparse.Namespace) -> int:
    replacements = {}
    for pair in args.replace:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise DataError(f"--replace takes NAME=VALUE, got {pair!r}")
        replacements[name] = value
    alphabet = read_alphabet(args.alphabet) if args.alphabet else None
    if args.tokenizer:
        alphabet = tokenizer_alphabet(args.tokenizer)
    options = CheckOptions(sample_rate=args.sample_rate, min_duration=args.min_duration,
                           max_duration=args.max_duration, frame_rate=args.frame_rate, alphabet=alphabet,
                           outlier_factor=args.outlier_factor, decode=not args.headers_only)
    with Progress("check", unit="item", enabled=not args.no_progress and not args.json) as bar:
        report = check_manifests(args.manifests, options, replacements=replacements, progress=bar.report)
    if args.json:
        json.dump(report.to_dict(), sys.stdout, indent=1, ensure_ascii=False)
        print()
    else:
        print(report.format_table())
    return 1 if report.errors else 0
