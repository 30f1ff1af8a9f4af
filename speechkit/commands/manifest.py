"""``speechkit manifest DIR``: walk a tree of audio files and write train/valid manifests with durations.

Example::

    speechkit manifest /corpora/LibriSpeech/train-clean-100 --ext flac --dest manifests \\
        --valid-percent 0.05 --seed 1 --placeholder data_root --group-depth 1 --workers 8

writes ``manifests/train.json`` and ``manifests/valid.json`` (``{id: {wav, duration, sample_rate}}``);
``--format tsv`` writes fairseq's ``train.tsv``/``valid.tsv`` (the root folder, then ``path<TAB>samples``);
with ``--labels corpus.json`` also their ``.wrd``/``.ltr`` label files, each row's transcript taken from the
row of ``corpus.json`` with the same audio file or id (``--label-field``, default ``text``)::

    speechkit manifest data/corpus/train --ext flac --dest manifests --format tsv \\
        --labels data/corpus/train.json --replacement data_root=data/corpus

Durations come from the file headers, read by ``--workers`` processes. ``--group-depth 1`` keeps every
top-level folder (a speaker, in LibriSpeech) on one side of the split.
"""
from __future__ import annotations

import argparse
import os
import sys

from speechkit.argtypes import name_value
from speechkit.data.fairseq_manifest import write_fairseq_manifest, write_labels
from speechkit.data.manifest import (
    build_manifest,
    load_manifest,
    split_manifest,
    write_csv_manifest,
    write_json_manifest,
)
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("root", metavar="DIR", help="folder to search (recursively) for audio files")
    parser.add_argument("--ext", default="flac", help="audio file extension to collect (default: flac)")
    parser.add_argument("--dest", required=True, help="folder for the manifests")
    parser.add_argument("--valid-percent", type=float, default=0.01,
                        help="fraction of the items for valid.json, between 0 and 1 "
                             "(0.05 = 5%%; default 0.01)")
    parser.add_argument("--seed", type=int, default=42, help="seed of the train/valid draw (default 42)")
    parser.add_argument("--placeholder", default=None, metavar="NAME",
                        help="write paths as $NAME/relative/path (load with replacements={NAME: DIR}) "
                             "instead of absolute paths")
    parser.add_argument("--group-depth", type=int, default=0, metavar="N",
                        help="keep files sharing their first N folders (e.g. 1: the speaker) in one split")
    parser.add_argument("--workers", type=int, default=min(8, os.cpu_count() or 1),
                        help="processes reading file headers (default: up to 8)")
    parser.add_argument("--format", choices=("json", "csv", "tsv"), default="json",
                        help="manifest format; tsv is fairseq's (first line DIR, then path<TAB>num_samples)")
    parser.add_argument("--skip-unreadable", action="store_true",
                        help="leave out files that cannot be read instead of stopping")
    parser.add_argument("--labels", default=None, metavar="MANIFEST",
                        help="with --format tsv: write <name>.wrd and <name>.ltr next to each .tsv from this "
                             "JSON/CSV manifest's transcripts, matched by audio path or id")
    parser.add_argument("--label-field", default="text",
                        help="the --labels manifest's transcript field (default: text)")
    parser.add_argument("--replacement", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="replace $NAME in the --labels manifest's paths (e.g. data_root=data/corpus)")
    add_progress_flags(parser)


def run(args: argparse.Namespace) -> int:
    root = os.path.abspath(args.root)
    if args.format == "tsv" and args.placeholder:
        print("speechkit manifest: --placeholder does not apply to --format tsv (its first line is the root)",
              file=sys.stderr)
        return 2
    if args.labels and args.format != "tsv":
        print("speechkit manifest: --labels writes fairseq .wrd/.ltr files, for --format tsv only",
              file=sys.stderr)
        return 2
    # Read before anything is written: a bad labels manifest leaves no manifest without its labels.
    labels = load_manifest(args.labels, dict(args.replacement), check_files=False) if args.labels else None
    with Progress("manifest", unit="file", enabled=not args.no_progress) as bar:
        data = build_manifest(root, args.ext, num_workers=args.workers, placeholder=args.placeholder,
                              skip_unreadable=args.skip_unreadable, progress=bar.report)
    if not data:
        print(f"speechkit manifest: no *.{args.ext.lstrip('.')} files under {root}", file=sys.stderr)
        return 1
    group_of = None
    if args.group_depth > 0:
        folder_of = {data_id: _relative_folder(row["wav"], root, args.placeholder, args.group_depth)
                     for data_id, row in data.items()}
        group_of = folder_of.__getitem__
    train, valid = split_manifest(data, args.valid_percent, args.seed, group_of=group_of)
    os.makedirs(args.dest, exist_ok=True)
    for name, rows in (("train", train), ("valid", valid)):
        path = os.path.join(args.dest, f"{name}.{args.format}")
        if args.format == "tsv":
            write_fairseq_manifest(root, _fairseq_entries(rows, root), path)
            if labels is not None:
                for written in write_labels(labels, path, args.label_field):
                    print(f"{written}: labels ({args.label_field!r} of {args.labels})")
        else:
            (write_json_manifest if args.format == "json" else write_csv_manifest)(rows, path)
        hours = sum(row["duration"] for row in rows.values()) / 3600
        print(f"{path}: {len(rows)} items, {hours:.3f} h")
    return 0


def _fairseq_entries(rows: dict, root: str) -> list:
    # Durations are rounded to microseconds, so duration x rate gives back the exact sample count.
    return [(os.path.relpath(row["wav"], root), round(row["duration"] * row["sample_rate"]))
            for row in rows.values()]


def _relative_folder(path: str, root: str, placeholder: str | None, depth: int) -> str:
    relative = path[len(placeholder) + 2:] if placeholder else os.path.relpath(path, root)
    parts = relative.replace(os.sep, "/").split("/")[:-1]
    return "/".join(parts[:depth])
