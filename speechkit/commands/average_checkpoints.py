"""``speechkit average-checkpoints SAVE_DIR --output FOLDER``: average the weights of the best checkpoints.

The choosing, averaging and writing are :mod:`speechkit.checkpoints.averaging`'s.

Example::

    speechkit average-checkpoints results/asr/1234/save --num 5 --min-key WER --output results/asr/avg5
"""
from __future__ import annotations

import argparse

from speechkit.checkpoints.averaging import average_checkpoint_files, best_checkpoints, write_average
from speechkit.errors import CheckpointError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoints_dir", help="a recipe's save folder (holding CKPT+... checkpoints)")
    parser.add_argument("--num", type=int, default=5, help="how many of the best checkpoints (default 5)")
    key = parser.add_mutually_exclusive_group()
    key.add_argument("--min-key", help="best = lowest value of this metric (e.g. WER)")
    key.add_argument("--max-key", help="best = highest value of this metric")
    parser.add_argument("--output", required=True, help="the averaged checkpoint's folder (<module>.ckpt, "
                        "meta.json): give it to `speechkit export --checkpoints` or `--eval_checkpoint`")
    parser.add_argument("--modules", nargs="*", help="only these modules (default: every weight file)")


def run(args: argparse.Namespace) -> int:
    chosen = best_checkpoints(args.checkpoints_dir, args.num, args.min_key, args.max_key)
    if len(chosen) < args.num:
        key = args.min_key or args.max_key
        with_key = f" with the key '{key}'" if key else ""
        raise CheckpointError(
            f"{args.checkpoints_dir} holds {len(chosen)} checkpoint(s){with_key}"
            f", not the {args.num} asked for (--num {args.num}): keep more while training (ckpt_keep) or "
            f"ask for --num {len(chosen)}")
    averaged = average_checkpoint_files(chosen, args.modules)
    if not averaged:
        raise CheckpointError(f"{chosen[0].path}: no weights file to average")
    output = write_average(chosen, averaged, args.output, args.min_key or args.max_key).path
    print(f"Averaged {len(chosen)} checkpoints ({', '.join(c.path.name for c in chosen)}) into {output}: "
          f"{', '.join(sorted(averaged))}")
    return 0
