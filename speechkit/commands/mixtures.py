"""``speechkit mixtures MANIFEST OUTPUT_DIR``: write a wsj0-2mix-style mixture set from a manifest.

Example::

    speechkit mixtures data/sep-corpus/test.json data/mix2 --split test --num-mixtures 3000 \\
        --replace data_root=data/sep-corpus --num-speakers 2 --sample-rate 8000 --mode min

The speaker field (``--speaker-key``, default ``spk``) is the person: the built-in corpus writes the person
behind each voice there, so two warps of one voice are never mixed together.
"""
from __future__ import annotations

import argparse

from speechkit.argtypes import name_value
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", help="JSON/CSV manifest with an audio and a speaker field per item.")
    parser.add_argument("output_dir", help="Folder for {split}/mix, {split}/s1, ... and {split}.json.")
    parser.add_argument("--split", default="test", help="Name of the set (default: %(default)s).")
    parser.add_argument("--num-mixtures", type=_at_least(1), required=True)
    parser.add_argument("--num-speakers", type=_at_least(2), default=2)
    parser.add_argument("--sample-rate", type=_at_least(1), default=8000)
    parser.add_argument("--mode", choices=["min", "max"], default="min",
                        help="min: cut to the shortest source; max: pad to the longest.")
    parser.add_argument("--level-range-db", type=float, default=5.0,
                        help="largest level difference between two sources (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--speaker-key", default="spk",
                        help="the manifest's speaker field (default: spk): a mixture never holds two "
                             "utterances of one speaker")
    parser.add_argument("--wav-key", default="wav")
    parser.add_argument("--replace", action="append", default=[], type=name_value, metavar="NAME=VALUE",
                        help="Replace $NAME in the manifest's paths (e.g. data_root=/corpora/x).")
    add_progress_flags(parser)


def _at_least(least: int):
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    convert.__name__ = f"whole number >= {least}"
    return convert


def run(args: argparse.Namespace) -> int:
    from speechkit.data.mixtures import write_mixtures

    with Progress("mixtures", args.num_mixtures, unit="mix", enabled=not args.no_progress) as bar:
        write_mixtures(args.manifest, args.output_dir, args.split, args.num_mixtures, args.num_speakers,
                       args.sample_rate, args.mode, args.level_range_db, args.seed, dict(args.replace),
                       args.speaker_key, args.wav_key, log=bar.write, progress=bar.report)
    return 0
