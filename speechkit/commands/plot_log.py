"""``speechkit plot-log results/asr/1234/train_log.txt``: draw a run's loss and metric curves into a PNG.

The reading and drawing are :mod:`speechkit.plot_log`'s (needs matplotlib: ``pip install 'speechkit[plot]'``).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from speechkit.plot_log import parse_train_log, plot_curves


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("train_log", help="a run's train_log.txt")
    parser.add_argument("--output", help="the PNG to write (default: train_log.png next to the log)")


def run(args: argparse.Namespace) -> int:
    output = args.output or Path(args.train_log).with_suffix(".png")
    written = plot_curves(parse_train_log(args.train_log), output, title=str(args.train_log))
    print(f"Wrote {written}")
    return 0
