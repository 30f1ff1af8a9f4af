"""``speechkit verify A B --model MODEL``: do two recordings share a speaker?

Prints the cosine score of the two recordings' speaker embeddings and the decision at the model folder's
``threshold`` (or ``--threshold``); the exit status is 0 either way (1 on an error, 2 on a usage error).

Example::

    speechkit verify a.flac b.wav --model results/speaker-model
    score 0.7312 >= 0.3500: same speaker
"""
from __future__ import annotations

import argparse
import os

from speechkit.commands.model_source import add_model_source_arguments, from_hparams_options, model_source


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("first", help="An audio file (any format soundfile reads, any rate).")
    parser.add_argument("second", help="Another audio file.")
    add_model_source_arguments(parser, model="option")
    parser.add_argument("--threshold", type=float, default=None,
                        help="Cosine score from which the speakers are called the same (default: the model "
                             "folder's threshold).")


def run(args: argparse.Namespace) -> int:
    from speechkit.errors import DataError
    from speechkit.pretrained.speaker import SpeakerRecognition

    for path in (args.first, args.second):
        if not os.path.isfile(path):
            raise DataError(f"no audio file {path!r}")
    if args.threshold is not None and not -1.0 <= args.threshold <= 1.0:
        raise DataError(f"--threshold must be a cosine score in [-1, 1], got {args.threshold}")
    model = SpeakerRecognition.from_hparams(model_source(args), run_opts={"device": args.device},
                                            **from_hparams_options(args))
    if args.threshold is not None:
        model.threshold = args.threshold
    score, same = model.verify_files(args.first, args.second)
    relation = ">=" if same else "<"
    verdict = "same speaker" if same else "different speakers"
    print(f"score {score:.4f} {relation} {model.threshold:.4f}: {verdict}", flush=True)
    return 0
