"""Collective helpers that also work, as no-ops, in one process.

Each helper names its collectives in its docstring; none hides another one, so every rank can be seen to
call the same collectives in the same order (contract 3 of the design).

Example:
    >>> run_on_main(print, args=("only the main process prints this",))
    only the main process prints this
    >>> all_gather_object({"id": "utt1"})
    [{'id': 'utt1'}]
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from speechkit.distributed.runtime import context, refuse_unknown_place
from speechkit.errors import DistributedError

_REDUCE_OPS = ("sum", "mean", "max", "min")


def _group_ready() -> bool:
    import torch.distributed as torch_dist

    return context().is_distributed and torch_dist.is_available() and torch_dist.is_initialized()


def is_main() -> bool:
    """True on global rank 0 (and in one process)."""
    return context().is_main


def rank() -> int:
    return context().rank


def world_size() -> int:
    return context().world_size


def barrier() -> None:
    """Wait until every rank reaches this point. Collective: one barrier (none in one process)."""
    if not _group_ready():
        return
    import torch.distributed as torch_dist

    ctx = context()
    if ctx.backend == "nccl":
        torch_dist.barrier(device_ids=[int(ctx.device.split(":")[1])])
    else:
        torch_dist.barrier()


def run_on_main(fn: Callable, args: tuple = (), kwargs: Optional[dict] = None,
                post_fn: Optional[Callable] = None, post_args: tuple = (),
                post_kwargs: Optional[dict] = None) -> Any:
    """Run ``fn`` on the main process, then a barrier, then ``post_fn`` on every process.

    Typical use: download or write a shared file once, then let every rank read it.
    Collective: exactly one barrier. If ``fn`` raises on the main process the exception propagates there and
    the fail-fast watchdog stops the ranks waiting at the barrier.

    Returns:
        ``fn``'s result on the main process, ``None`` elsewhere.

    Example:
        >>> run_on_main(lambda: 42)
        42
    """
    refuse_unknown_place("run_on_main")
    result = fn(*args, **(kwargs or {})) if is_main() else None
    barrier()
    if post_fn is not None:
        post_fn(*post_args, **(post_kwargs or {}))
    return result


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Every rank receives ``src``'s picklable ``obj``. Collective: one broadcast.

    Example:
        >>> broadcast_object({"vocab": 31})
        {'vocab': 31}
    """
    if not _group_ready():
        return obj
    import torch.distributed as torch_dist

    holder = [obj if rank() == src else None]
    torch_dist.broadcast_object_list(holder, src=src, device=_comm_device())
    return holder[0]


def all_gather_object(obj: Any) -> list:
    """Every rank's picklable ``obj``, in rank order (``[obj]`` in one process).

    Collective: one all-gather.
    """
    if not _group_ready():
        return [obj]
    import torch.distributed as torch_dist

    gathered = [None] * world_size()
    torch_dist.all_gather_object(gathered, obj)
    return gathered


def all_reduce(value, op: str = "sum"):
    """Reduce a number or tensor over all ranks (``sum``, ``mean``, ``max``, ``min``).

    Collective: one all-reduce. A Python number comes back as a float (an int for sum/max/min of ints); a
    tensor comes back as a new tensor on its original device and dtype, the input untouched.

    Example:
        >>> all_reduce(3, op="max")
        3
    """
    if op not in _REDUCE_OPS:
        raise DistributedError(f"all_reduce: unknown op {op!r}; use one of {', '.join(_REDUCE_OPS)}")
    import torch

    is_tensor = isinstance(value, torch.Tensor)
    if not _group_ready():
        return value.clone() if is_tensor else value
    import torch.distributed as torch_dist

    if is_tensor:
        work = value.detach().to(_comm_device(), dtype=torch.float64 if not value.is_floating_point()
                                 and op == "mean" else value.dtype, copy=True)
    else:
        dtype = torch.int64 if isinstance(value, int) and not isinstance(value, bool) and op != "mean" \
            else torch.float64
        work = torch.tensor(value, dtype=dtype, device=_comm_device())
    reduce_op = {"sum": torch_dist.ReduceOp.SUM, "mean": torch_dist.ReduceOp.SUM,
                 "max": torch_dist.ReduceOp.MAX, "min": torch_dist.ReduceOp.MIN}[op]
    torch_dist.all_reduce(work, op=reduce_op)
    if op == "mean":
        work = work / world_size()
    if is_tensor:
        return work.to(value.device)
    return work.item()


def all_reduce_sum(value):
    """``all_reduce(value, "sum")``."""
    return all_reduce(value, "sum")


def all_reduce_max(value):
    """``all_reduce(value, "max")``: e.g. agree that any rank asked to stop."""
    return all_reduce(value, "max")


def all_reduce_mean(value):
    """``all_reduce(value, "mean")``."""
    return all_reduce(value, "mean")


def _comm_device():
    """Tensors for collectives live on the GPU with nccl, on the CPU with gloo."""
    import torch

    ctx = context()
    return torch.device(ctx.device) if ctx.backend == "nccl" else torch.device("cpu")
