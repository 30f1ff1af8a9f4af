"""A worker built on torch alone plus speechkit.distributed, started by every launcher under test.

Usage: ``python plain_worker.py [run options] -- config.yaml --out_dir D [--steps 6] [--fail_rank R]
[--fail_step S] [--fail_mode raise|kill|exit|os_exit]`` (``exit``: ``sys.exit(3)``; ``os_exit``:
``os._exit(4)``). Each rank trains a DDP-wrapped linear layer for a few steps and writes ``D/rank<R>.json``
with its context, the gathered ranks, reduced values and its final weights.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path

import torch

from speechkit import distributed as dist
from speechkit.experiment.run_options import parse_arguments


def main(argv: list) -> None:
    _, run_opts, config = parse_arguments(argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = dist.init(run_opts)
        torch.manual_seed(1234)
        model = torch.nn.Linear(3, 1).to(ctx.device)
        wrapped = dist.wrap_module(model, ctx, run_opts)
    out_dir = Path(config["out_dir"])
    marker = dist.run_on_main(lambda: (out_dir / "main_ran").write_text(str(ctx.rank)) and "written")
    assert (out_dir / "main_ran").exists(), "run_on_main's barrier let a rank pass before main wrote"
    optimizer = torch.optim.SGD(wrapped.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(ctx.rank)  # different data per rank: DDP must average
    for step in range(int(config.get("steps", 6))):
        if ctx.rank == config.get("fail_rank", -1) and step == config.get("fail_step", 2):
            fail(config.get("fail_mode", "raise"))
        inputs = torch.randn(4, 3, generator=generator)
        loss = wrapped(inputs.to(ctx.device)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        time.sleep(float(config.get("step_sleep", 0.0)))
    weights = dist.unwrap(wrapped).weight.detach().cpu().flatten().tolist()
    record = {
        "rank": ctx.rank, "world_size": ctx.world_size, "local_rank": ctx.local_rank,
        "node_rank": ctx.node_rank, "device": ctx.device, "backend": ctx.backend, "launcher": ctx.launcher,
        "init_method": ctx.init_method, "is_main": dist.is_main(), "marker": marker,
        "gathered": dist.all_gather_object({"rank": ctx.rank}),
        "broadcast": dist.broadcast_object(f"from {ctx.rank}"),
        "sum": dist.all_reduce_sum(ctx.rank + 1), "max": dist.all_reduce_max(ctx.rank),
        "wrapper": type(wrapped).__name__, "weights": weights,
        "warnings": [str(w.message) for w in caught], "pid": os.getpid(),
    }
    (out_dir / f"rank{ctx.rank}.json").write_text(json.dumps(record))


def fail(mode: str) -> None:
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "exit":
        sys.exit(3)
    if mode == "os_exit":
        os._exit(4)
    raise RuntimeError("injected failure for the test")


if __name__ == "__main__":
    main(sys.argv[1:])
