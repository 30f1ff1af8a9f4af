"""``speechkit data import FORMAT SRC --dest DIR``: train/valid/test manifests from a corpus layout.

Example::

    speechkit data import commonvoice ~/cv-corpus/en --dest data/cv
    speechkit data import csv metadata.tsv --dest data/mine --path-column file --speaker-column reader
"""
from __future__ import annotations

import argparse

from speechkit.data.importers import IMPORTERS, import_corpus
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    layouts = "; ".join(f"{name}: {description}" for name, (_, _, description) in IMPORTERS.items())
    parser.add_argument("layout", metavar="FORMAT", choices=list(IMPORTERS), help=f"the layout ({layouts})")
    parser.add_argument("source", metavar="SRC", help="the corpus folder (or table, for csv)")
    parser.add_argument("--dest", required=True, help="folder for train.json, valid.json, test.json")
    split = parser.add_argument_group("split (when the layout has none: by speaker)")
    split.add_argument("--valid-fraction", type=float, default=0.1, help="share of utterances in valid")
    split.add_argument("--test-fraction", type=float, default=0.1, help="share of utterances in test")
    split.add_argument("--seed", type=int, default=1234, help="seed of the speaker split")
    table = parser.add_argument_group("csv (also .tsv, .jsonl) and kaldi")
    table.add_argument("--path-column", default="path", help="column of the audio path")
    table.add_argument("--text-column", default="text", help="column of the transcript")
    table.add_argument("--speaker-column", default="speaker", help="column of the speaker")
    table.add_argument("--id-column", default=None, help="column of the id (default: the file name)")
    table.add_argument("--audio-root", default=None,
                       help="folder the audio paths are relative to and may not leave (default: the table's "
                            "folder, the Kaldi data directory)")
    other = parser.add_argument_group("librispeech, folder, librimix")
    other.add_argument("--train", nargs="+", default=None, help="LibriSpeech folders of the train split")
    other.add_argument("--valid", nargs="+", default=None, help="LibriSpeech folders of the valid split")
    other.add_argument("--test", nargs="+", default=None, help="LibriSpeech folders of the test split")
    other.add_argument("--ext", default="flac", help="LibriSpeech audio extension")
    other.add_argument("--allow-missing-text", action="store_true",
                       help="folder: import audio without a .txt with an empty transcript")
    other.add_argument("--mixture", default="mix_clean", help="librimix: the mixture folder")
    add_progress_flags(parser)


OPTIONS = {
    "csv": ("audio_root", "path_column", "text_column", "speaker_column", "id_column"),
    "kaldi": ("audio_root",),
    "librispeech": ("train", "valid", "test", "ext"),
    "folder": ("allow_missing_text",),
    "librimix": ("mixture",),
}


def run(args: argparse.Namespace) -> int:
    options = {name: getattr(args, name) for name in OPTIONS.get(args.layout, ())}
    with Progress(f"import {args.layout}", unit="file", enabled=not args.no_progress) as bar:
        import_corpus(args.layout, args.source, args.dest, valid_fraction=args.valid_fraction,
                      test_fraction=args.test_fraction, seed=args.seed, log=bar.write, progress=bar.report,
                      **options)
    return 0
