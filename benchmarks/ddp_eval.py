"""Evaluation under several processes: wall time for 1 vs N workers, and the balance of dynamic batches.

Prints two tables:

1. the batches, items and padding efficiency (real frames / padded frames) that each rank gets from
   ``make_dataloader`` with dynamic batching, for training and for evaluation, with 1 and N ranks;
2. the wall time of one evaluation pass over the same set (a small convolutional model, CPU, gloo, one thread
   per worker) with 1 worker and with N workers started as explicit workers, the slowest rank counting.

Usage:
    python benchmarks/ddp_eval.py [--items 600] [--workers 2] [--max_batch_length 80]

Nothing here is asserted in the tests; the numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

import torch

from speechkit.machine import machine_line


def build_dataset(items: int):
    from speechkit.data.dataset import DynamicItemDataset
    from speechkit.data.pipeline import provides, takes

    data = {f"utt{i:05d}": {"index": i, "duration": float(2 + (i * 37) % 29)} for i in range(items)}
    dataset = DynamicItemDataset(data)

    @takes("index", "duration")
    @provides("feats")
    def features(index, duration):
        generator = torch.Generator().manual_seed(index)
        return torch.randn(int(duration * 10), 40, generator=generator)  # 10 frames per second, 40 features

    dataset.add_dynamic_item(features)
    dataset.set_output_keys(["id", "duration"])
    return dataset


def balance_rows(items: int, workers: int, max_batch_length: float) -> list:
    from speechkit.data.loader import make_dataloader

    dataset = build_dataset(items)
    rows = []
    for stage in ("train", "test"):
        for world in sorted({1, workers}):
            for rank in range(world):
                dynamic = {"max_batch_length": max_batch_length, "num_buckets": 8}
                loader = make_dataloader(dataset, stage, rank=rank, world_size=world, seed=3, collate_fn=list,
                                         dynamic_batching=dynamic)
                loader.set_epoch(1)
                batches = real = padded = count = 0
                for batch in loader:
                    durations = [item["duration"] for item in batch]
                    batches, count = batches + 1, count + len(durations)
                    real, padded = real + sum(durations), padded + max(durations) * len(durations)
                rows.append((stage, world, rank, batches, count, real / padded if padded else 0.0))
    return rows


def run_workers(workers: int, items: int, max_batch_length: float) -> dict:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS="1",
               CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, __file__, "--worker", "--items", str(items), "--max_batch_length",
               str(max_batch_length)]
    if workers > 1:
        procs = [subprocess.Popen(command + ["--worker-id", str(r), "--num-workers", str(workers)], env=env,
                                  stdout=subprocess.PIPE, text=True) for r in range(workers)]
    else:
        procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)]
    outputs = [proc.communicate()[0] for proc in procs]
    if any(proc.returncode for proc in procs):
        raise SystemExit(f"a worker failed: {[proc.returncode for proc in procs]}")
    return json.loads(outputs[0].strip().splitlines()[-1])


def worker_main(argv: list) -> None:
    from speechkit import distributed as dist
    from speechkit.data.loader import make_dataloader
    from speechkit.run_options import parse_arguments

    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int)
    parser.add_argument("--max_batch_length", type=float)
    known, rest = parser.parse_known_args(argv)
    _, run_opts, _ = parse_arguments(["unused.yaml", *[a for a in rest if a != "--worker"]])
    torch.set_num_threads(1)
    ctx = dist.init(run_opts)
    dataset = build_dataset(known.items)
    dataset.set_output_keys(["id", "feats"])
    loader = make_dataloader(dataset, "test", rank=ctx.rank, world_size=ctx.world_size,
                             dynamic_batching={"max_batch_length": known.max_batch_length})
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(40, 256, 5, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(256, 256, 5, padding=2), torch.nn.ReLU(),
                                torch.nn.Conv1d(256, 32, 1)).eval()
    dist.barrier()
    started = time.perf_counter()
    batches = frames = 0
    with torch.no_grad():
        for batch in loader:
            model(batch.feats.data.transpose(1, 2))
            batches, frames = batches + 1, frames + int(batch.feats.lengths.sum())
    elapsed = time.perf_counter() - started
    per_rank = dist.all_gather_object({"seconds": elapsed, "batches": batches, "frames": frames})
    if dist.is_main():
        print(json.dumps({"workers": ctx.world_size, "per_rank": per_rank,
                          "wall_s": max(r["seconds"] for r in per_rank)}))


def main() -> None:
    print(machine_line(), flush=True)  # the figures below are true of this machine
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=600)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--max_batch_length", type=float, default=80.0,
                        help="seconds of audio per dynamic batch")
    args = parser.parse_args()
    print(f"Dynamic batching balance ({args.items} items, max_batch_length {args.max_batch_length} s)")
    print(f"{'stage':<6} {'world':>5} {'rank':>4} {'batches':>7} {'items':>6} {'padding eff.':>12}")
    for stage, world, rank, batches, count, efficiency in balance_rows(args.items, args.workers,
                                                                        args.max_batch_length):
        print(f"{stage:<6} {world:>5} {rank:>4} {batches:>7} {count:>6} {efficiency:>12.3f}")
    print(f"\nEvaluation wall time ({args.items} items, one thread per worker, CPU, gloo)")
    print(f"{'workers':>7} {'wall s':>8} {'speed-up':>8}  per-rank batches / frames")
    baseline = None
    for workers in sorted({1, args.workers}):
        result = run_workers(workers, args.items, args.max_batch_length)
        baseline = baseline or result["wall_s"]
        shares = ", ".join(f"{r['batches']}/{r['frames']}" for r in result["per_rank"])
        print(f"{workers:>7} {result['wall_s']:>8.2f} {baseline / result['wall_s']:>8.2f}  {shares}")


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        worker_main(sys.argv[1:])
    else:
        main()
