"""``speechkit trim-silence MANIFEST OUTPUT``: point a manifest's audio at the speech, without edge silence.

The detection and the manifest rewriting are :mod:`speechkit.data.trim`'s.

Example::

    speechkit trim-silence data/train.json data/train.trimmed.json --replace data_root=data --margin 0.1
"""
from __future__ import annotations

import argparse
import os

from speechkit.argtypes import name_value
from speechkit.data.manifest import load_manifest, write_json_manifest
from speechkit.data.trim import trim_manifest
from speechkit.errors import ManifestError
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", help="input manifest (.json, .jsonl, .csv)")
    parser.add_argument("output", help="output JSON manifest (audio fields become segments)")
    parser.add_argument("--replace", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="value of a $NAME placeholder in the paths (repeatable); the output keeps $NAME")
    parser.add_argument("--field", default="wav", help="the audio field (default: wav)")
    parser.add_argument("--margin", type=float, default=0.1,
                        help="seconds of silence kept before and after the speech (default 0.1)")
    parser.add_argument("--threshold-db", type=float, default=-40.0,
                        help="frames this far below the loudest frame are silence (default -40)")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes reading audio (default: up to 8)")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    if not args.output.endswith(".json"):
        raise ManifestError(f"{args.output}: the output must be a .json manifest (segments are objects)")
    rows = load_manifest(args.manifest, file_fields=())
    with Progress("trim-silence", len(rows), unit="file", enabled=not args.no_progress) as bar:
        trimmed = trim_manifest(rows, dict(args.replace), field=args.field, margin=args.margin,
                                threshold_db=args.threshold_db, num_workers=args.workers, name=args.manifest,
                                progress=bar.report)
    write_json_manifest(trimmed, args.output)
    before = sum(float(row["duration"]) for row in rows.values())
    after = sum(row["duration"] for row in trimmed.values())
    print(f"{args.output}: {len(trimmed)} items, {after / 3600:.3f} h of {before / 3600:.3f} h "
          f"({100 * (1 - after / max(before, 1e-9)):.1f}% trimmed)")
    return 0
