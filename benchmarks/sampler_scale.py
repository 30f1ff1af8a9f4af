"""Dynamic batching from 1 to 1,024 ranks: how full the batches stay, and what planning an epoch costs.

Every world size is simulated in this one process: a ``DynamicBatchSampler`` is built as rank 0 and plans
the epoch (the plan is global: every rank computes the same steps, one batch each), and the last rank's
sampler is built too and checked to yield exactly its share of that plan. No process is started.

Durations are lognormal (median ``--median`` seconds, shape ``--sigma``), drawn once per run; items that
cost more than the budget alone are left out. For each world size the table gives:

* steps: batches per rank in the epoch (equal on every rank by construction);
* fill mean / min: padded cost of a batch (items x longest item) over ``max_batch_length``, over all ranks;
* real fill: the items' own total length over ``steps x world size x max_batch_length``, the share of the
  budget that holds audio rather than padding. It is the same for every plan that uses each item once in
  that many whole steps, so a ``fill mean`` below one process's with ``real fill`` as low comes from rounding
  the epoch up to whole steps, not from packing;
* spread: the largest ratio, over the steps, of the longest to the shortest padded cost among a step's
  batches (how long the fastest rank of a step waits for the slowest), the number of steps where it
  exceeds 1.2, and the largest ratio of the longest items (the padded time axis);
* plan: seconds to plan the epoch on one rank (sampler built beforehand), and the peak memory that planning
  allocates (``tracemalloc``, a second planning pass, so the timing is not slowed by the tracing).

``--baseline REF`` runs the same measurement on the sampler of git revision ``REF`` (extracted with
``git archive`` into a temporary folder and run in a subprocess) and prints its figures beside the current
ones, with the ratio of mean fills.

Usage:
    python benchmarks/sampler_scale.py [--items 1000000] [--max-batch-length 200] [--baseline REF]

Nothing here is asserted in the tests; timings depend on the machine and its load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from speechkit.machine import machine_line

REPO = Path(__file__).resolve().parents[1]


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1_000_000)
    parser.add_argument("--median", type=float, default=5.0, help="median duration (s)")
    parser.add_argument("--sigma", type=float, default=0.5, help="lognormal shape (log-space std)")
    parser.add_argument("--max-batch-length", type=float, default=200.0)
    parser.add_argument("--world-sizes", default="1,2,4,8,16,32,64,128,256,512,1024")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epoch", type=int, default=1)
    parser.add_argument("--baseline", default=None, help="git revision whose sampler to measure alongside")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON (used for --baseline)")
    return parser.parse_args(argv)


def durations(items: int, median: float, sigma: float, budget: float, seed: int) -> np.ndarray:
    values = np.random.default_rng(seed).lognormal(np.log(median), sigma, items)
    return values[values <= budget]


def step_figures(steps: list, lengths: np.ndarray, budget: float) -> dict:
    """Fill and within-step spread of a global plan (list of steps whose ``batches`` hold every rank's)."""
    batches = [batch for step in steps for batch in step.batches]
    sizes = np.array([len(batch) for batch in batches])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    flat = np.fromiter((index for batch in batches for index in batch), dtype=np.int64,
                       count=int(sizes.sum()))
    longest = np.maximum.reduceat(lengths[flat], starts)
    padded = (sizes * longest).reshape(len(steps), -1)
    longest = longest.reshape(len(steps), -1)
    content = float(lengths[flat].sum())
    return {"steps": len(steps), "fill_mean": float(padded.mean() / budget),
            "fill_real": content / (padded.size * budget),  # the same for any plan of these many steps
            "fill_min": float(padded.min() / budget),
            "spread": float((padded.max(axis=1) / padded.min(axis=1)).max()),
            "uneven_steps": int(np.count_nonzero(padded.max(axis=1) > 1.2 * padded.min(axis=1))),
            "length_spread": float((longest.max(axis=1) / longest.min(axis=1)).max()),
            "items": int(sizes.sum()), "distinct": int(np.unique(flat).size)}


def measure(lengths: np.ndarray, budget: float, world_size: int, seed: int, epoch: int) -> dict:
    from speechkit.data.samplers import DynamicBatchSampler

    def sampler(rank: int):
        built = DynamicBatchSampler(lengths, budget, seed=seed, rank=rank, world_size=world_size)
        built.set_epoch(epoch)
        return built

    first = sampler(0)
    start = time.perf_counter()
    steps = first.plan()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    sampler(0).plan()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    last = sampler(world_size - 1)
    if [list(step.batches[-1]) for step in steps] != list(last):
        raise RuntimeError(f"rank {world_size - 1} of {world_size} does not yield its share of the plan")
    return {"world_size": world_size, "plan_s": seconds, "peak_mb": peak / 2 ** 20,
            **step_figures(steps, lengths, budget)}


def baseline_rows(revision: str, args: argparse.Namespace) -> list:
    """The same measurement on the sampler of a git revision, in a subprocess that imports that code."""
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "speechkit"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        command = [sys.executable, __file__, "--json", "--items", str(args.items),
                   "--median", str(args.median), "--sigma", str(args.sigma),
                   "--max-batch-length", str(args.max_batch_length),
                   "--world-sizes", args.world_sizes, "--seed", str(args.seed), "--epoch", str(args.epoch)]
        env = dict(os.environ, PYTHONPATH=folder)
        output = subprocess.run(command, env=env, check=True, capture_output=True, text=True, cwd=folder)
        return [json.loads(line) for line in output.stdout.splitlines() if line.startswith("{")]


def main(argv=None) -> int:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    args = parse_args(argv)
    lengths = durations(args.items, args.median, args.sigma, args.max_batch_length, args.seed)
    world_sizes = [int(value) for value in args.world_sizes.split(",")]
    rows = [measure(lengths, args.max_batch_length, size, args.seed, args.epoch) for size in world_sizes]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return 0
    old = {row["world_size"]: row for row in baseline_rows(args.baseline, args)} if args.baseline else {}
    print(f"{len(lengths):,} items (lognormal, median {args.median:g} s, sigma {args.sigma:g}; "
          f"mean {lengths.mean():.2f} s, max {lengths.max():.1f} s), "
          f"max_batch_length {args.max_batch_length:g}, default buckets, seed {args.seed}, "
          f"epoch {args.epoch}")
    header = ["world size", "steps", "fill mean", "real fill", "fill min", "spread", "steps > 1.2",
              "length spread", "plan s", "peak MB"]
    if old:
        header += [f"{args.baseline}: steps", "fill mean", "fill min", "spread", "plan s", "peak MB",
                   "fill ratio"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        if row["items"] != row["distinct"] or row["items"] != len(lengths):
            raise RuntimeError(f"world size {row['world_size']}: {row['items']} items planned, "
                               f"{row['distinct']} distinct, {len(lengths)} in the epoch")
        cells = [f"{row['world_size']:,}", f"{row['steps']:,}", f"{row['fill_mean']:.3f}",
                 f"{row['fill_real']:.3f}", f"{row['fill_min']:.3f}", f"{row['spread']:.3f}",
                 f"{row['uneven_steps']:,}",
                 f"{row['length_spread']:.2f}",
                 f"{row['plan_s']:.2f}", f"{row['peak_mb']:.0f}"]
        if old:
            was = old[row["world_size"]]
            cells += [f"{was['steps']:,}", f"{was['fill_mean']:.3f}", f"{was['fill_min']:.3f}",
                      f"{was['spread']:.3f}", f"{was['plan_s']:.2f}", f"{was['peak_mb']:.0f}",
                      f"{row['fill_mean'] / was['fill_mean']:.2f}x"]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
