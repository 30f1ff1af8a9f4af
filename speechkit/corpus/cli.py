"""``speechkit corpus OUTPUT_DIR``: build the built-in synthetic speech corpus.

Example::

    speechkit corpus data/corpus --size demo            # about 1,050 utterances, well under a minute
    speechkit corpus data/big --size medium --num-workers 8 --noise-prob 0.3
"""
from __future__ import annotations

import argparse
import os

from speechkit.corpus.generator import SIZES, CorpusConfig, build_corpus
from speechkit.terminal import Progress, add_progress_flags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = CorpusConfig("")
    parser.add_argument("output_dir", help="folder to write FLAC files and train/valid/test.json into")
    parser.add_argument("--size", choices=sorted(SIZES), default="demo",
                        help="named size: " + ", ".join(f"{k}={v[0]}/{v[1]}/{v[2]}" for k, v in SIZES.items())
                        + " train/valid/test utterances (default: demo)")
    parser.add_argument("--num-train", type=int, help="train utterances (overrides --size)")
    parser.add_argument("--num-valid", type=int, help="valid utterances (overrides --size)")
    parser.add_argument("--num-test", type=int, help="test utterances (overrides --size)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--num-sentences", type=int, help="distinct sentences (default: max(4000, total/3))")
    parser.add_argument("--voices", help="comma-separated voices to use (default: the 15 default voices); "
                        "more: the -lower/-higher warps and the espeak-<accent>-<variant> voices, see "
                        "speechkit/corpus/README.md")
    parser.add_argument("--test-voices", default=",".join(defaults.test_voices),
                        help="comma-separated voices held out for test (default: %(default)s)")
    parser.add_argument("--valid-voices", default=",".join(defaults.valid_voices),
                        help="comma-separated voices held out for valid; empty: valid uses training voices "
                        "(default: %(default)s)")
    parser.add_argument("--speed-range", type=float, nargs=2, default=defaults.speed_range,
                        metavar=("MIN", "MAX"), help="speaking-rate range (default: %(default)s)")
    parser.add_argument("--loudness-range", type=float, nargs=2, default=defaults.loudness_range,
                        metavar=("MIN", "MAX"), help="speech level range in dBFS (default: %(default)s)")
    parser.add_argument("--noise-prob", type=float, default=defaults.noise_prob,
                        help="share of utterances with added noise (default: %(default)s)")
    parser.add_argument("--snr-range", type=float, nargs=2, default=defaults.snr_range,
                        metavar=("MIN", "MAX"),
                        help="signal-to-noise ratio range in dB (default: %(default)s)")
    parser.add_argument("--held-out-engine", choices=["espeak", "festival", "flite"], default=None,
                        help="train and validate on no voice of this speech engine; its voices speak "
                             "test_engine.json (the test sentences): a kind of voice never heard")
    parser.add_argument("--num-workers", type=int, default=os.cpu_count() or 1,
                        help="synthesis processes (default: number of cores)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if the folder holds a corpus")
    add_progress_flags(parser)


def _names(text):
    return [name for name in (text or "").split(",") if name]


def config_from_args(args: argparse.Namespace) -> CorpusConfig:
    train, valid, test = SIZES[args.size]
    return CorpusConfig(
        output_dir=args.output_dir,
        num_train=train if args.num_train is None else args.num_train,
        num_valid=valid if args.num_valid is None else args.num_valid,
        num_test=test if args.num_test is None else args.num_test,
        seed=args.seed,
        num_sentences=args.num_sentences,
        voices=_names(args.voices) or None,
        test_voices=_names(args.test_voices),
        valid_voices=_names(args.valid_voices),
        speed_range=tuple(args.speed_range),
        loudness_range=tuple(args.loudness_range),
        noise_prob=args.noise_prob,
        snr_range=tuple(args.snr_range),
        held_out_engine=args.held_out_engine,
        num_workers=args.num_workers,
    )


def run(args: argparse.Namespace) -> int:
    with Progress("corpus", unit="utt", enabled=not args.no_progress) as bar:
        build_corpus(config_from_args(args), overwrite=args.overwrite, log=bar.write, progress=bar.report)
    return 0
