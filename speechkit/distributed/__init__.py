"""Distributed training and evaluation on torch.distributed: one resolved context, a few collectives.

Usage in a recipe (the Brain does this for you)::

    from speechkit import distributed as dist
    ctx = dist.init(run_opts)                 # torchrun, launch, explicit flags, SLURM or one process
    dist.run_on_main(prepare_data, kwargs={"folder": folder})   # main only, then one barrier
    model = dist.wrap_module(model.to(ctx.device), ctx, run_opts)

See docs/distributed.md for every launcher, SLURM, the effective batch, elastic resume and failures.
"""
from __future__ import annotations

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
from speechkit.lazy_exports import lazy_exports

# wrap.py imports torch.nn, and signals.py belongs to the engine: both load on first use.
_LAZY = {
    "wrap_module": "speechkit.distributed.wrap",
    "unwrap": "speechkit.distributed.wrap",
    "no_sync": "speechkit.distributed.wrap",
    "PreemptionHandler": "speechkit.distributed.signals",
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "DistributedContext", "EXIT_PEER_FAILED", "PreemptionHandler", "all_gather_object", "all_reduce",
    "all_reduce_max", "all_reduce_mean", "all_reduce_sum", "barrier", "broadcast_object", "context",
    "expand_nodelist", "init", "is_main", "no_sync", "rank", "resolve_context", "run_on_main", "shutdown",
    "unwrap", "world_size", "wrap_module",
]
