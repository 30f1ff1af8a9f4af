"""Distributed training and evaluation on torch.distributed: one resolved context, a few collectives.

Usage in a recipe (the Brain does this for you)::

    from speechkit import distributed as dist
    ctx = dist.init(run_opts)                 # torchrun, launch, explicit flags, SLURM or one process
    dist.run_on_main(prepare_data, kwargs={"folder": folder})   # main only, then one barrier
    model = dist.wrap_module(model.to(ctx.device), ctx, run_opts)

See docs/distributed.md for every launcher, SLURM, the effective batch, elastic resume and failures.
"""
from __future__ import annotations

import importlib

from speechkit.distributed.env import DistributedContext, expand_nodelist, resolve_context
from speechkit.distributed.failfast import EXIT_PEER_FAILED
from speechkit.distributed.ops import (
    all_gather_object,
    all_reduce,
    all_reduce_max,
    all_reduce_mean,
    all_reduce_sum,
    barrier,
    broadcast_object,
    is_main,
    rank,
    run_on_main,
    world_size,
)
from speechkit.distributed.runtime import context, init, shutdown

# wrap.py imports torch.nn, and signals.py belongs to the engine: both load on first use.
_LAZY = {
    "wrap_module": "speechkit.distributed.wrap",
    "unwrap": "speechkit.distributed.wrap",
    "no_sync": "speechkit.distributed.wrap",
    "PreemptionHandler": "speechkit.distributed.signals",
}


def __getattr__(name: str):
    if name in _LAZY:
        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as error:
            if error.name != _LAZY[name]:
                raise
            raise AttributeError(f"speechkit.distributed.{name} is not available: {error}") from None
        return getattr(module, name)
    raise AttributeError(f"module 'speechkit.distributed' has no attribute {name!r}")


__all__ = [
    "DistributedContext", "EXIT_PEER_FAILED", "PreemptionHandler", "all_gather_object", "all_reduce",
    "all_reduce_max", "all_reduce_mean", "all_reduce_sum", "barrier", "broadcast_object", "context",
    "expand_nodelist", "init", "is_main", "no_sync", "rank", "resolve_context", "run_on_main", "shutdown",
    "unwrap", "world_size", "wrap_module",
]
