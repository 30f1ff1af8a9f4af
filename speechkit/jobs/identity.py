"""Which shard this process runs: from flags, torchrun, an srun step and/or a SLURM array task.

Order: ``--shard K --num-shards N`` when given; otherwise the process's rank among the processes started
together (torchrun's ``RANK``/``WORLD_SIZE``, or ``SLURM_PROCID`` inside an ``srun`` step, read by
:func:`speechkit.distributed.resolve_context`), combined with the SLURM array index when the process belongs
to an array job: array task ``A`` with ``W`` processes each runs shard ``A * W + rank``. The number of
shards is ``--num-shards``, else the one recorded in the job folder (so resubmitting only some array indices
works), else ``(SLURM_ARRAY_TASK_MAX + 1) * W`` (array indices start at 0: ``--array=0-N``).

Shards never talk to each other (no process group is started): a failed shard cannot hang the others, and a
job can run as an array of independent single-GPU tasks.

Example:
    >>> resolve_shard(environ={"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_MAX": "9"})
    ShardIdentity(shard=3, num_shards=10, local_rank=0, source='slurm-array')
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple, Optional

from speechkit.errors import DistributedError, JobError


class ShardIdentity(NamedTuple):
    """This process's shard, the shard count, its rank on the node (its GPU) and where they came from."""

    shard: int
    num_shards: int
    local_rank: int
    source: str


def resolve_shard(shard: Optional[int] = None, num_shards: Optional[int] = None,
                  environ: Optional[Mapping[str, str]] = None,
                  recorded_num_shards: Optional[int] = None) -> ShardIdentity:
    """Resolve this process's shard (see the module docstring).

    Raises:
        JobError: ``--shard`` without a shard count, a shard outside ``[0, N)``, a count that disagrees with
            the job folder's, or an unreadable launcher variable (named).
    """
    environ = os.environ if environ is None else environ
    if num_shards is not None and recorded_num_shards is not None and num_shards != recorded_num_shards:
        raise JobError(f"--num-shards {num_shards}, but the job folder was started with "
                       f"{recorded_num_shards} shards; rerun with that count or choose a new --output folder")
    count = num_shards if num_shards is not None else recorded_num_shards
    if shard is not None:
        if count is None:
            raise JobError(f"--shard {shard} needs --num-shards")
        return _checked(ShardIdentity(shard, count, _int(environ, "LOCAL_RANK", 0), "flags"), "--shard")
    rank, world, local_rank, launcher = _process_rank(environ)
    if "SLURM_ARRAY_TASK_ID" in environ:
        array_index = _int(environ, "SLURM_ARRAY_TASK_ID")
        if count is None:
            count = (_int(environ, "SLURM_ARRAY_TASK_MAX", array_index) + 1) * world
        identity = ShardIdentity(array_index * world + rank, count, local_rank, "slurm-array")
        source = f"SLURM_ARRAY_TASK_ID={array_index}" + (f", rank {rank}" if world > 1 else "")
        return _checked(identity, source)
    if count is None:
        count = world
    elif world == 1 and count > 1:
        raise JobError(f"the job has {count} shards and this is one process: pass --shard K "
                       f"(0 <= K < {count}) to run one of them, or start {count} processes")
    elif world > 1 and count != world:
        raise JobError(f"{world} processes were started ({launcher}), but the job has {count} shards; start "
                       f"{count} processes, or pass --shard/--num-shards")
    return _checked(ShardIdentity(rank, count, local_rank, launcher), f"rank {rank}")


def _process_rank(environ: Mapping[str, str]) -> tuple:
    """``(rank, world size, local rank, launcher)`` among the processes started together."""
    from speechkit.distributed.env import resolve_context
    from speechkit.experiment.run_options import RunOptions

    try:
        ctx = resolve_context(RunOptions(device="cpu"), environ, cuda_device_count=0)
    except DistributedError as error:
        raise JobError(f"cannot tell which shard this process runs: {error}") from None
    launcher = {"single": "single process", "slurm": "srun"}.get(ctx.launcher, ctx.launcher)
    return ctx.rank, ctx.world_size, ctx.local_rank, launcher


def _checked(identity: ShardIdentity, source: str) -> ShardIdentity:
    if identity.num_shards < 1:
        raise JobError(f"the number of shards must be at least 1, got {identity.num_shards}")
    if not 0 <= identity.shard < identity.num_shards:
        raise JobError(f"{source} gives shard {identity.shard}, outside the job's {identity.num_shards} "
                       f"shards [0, {identity.num_shards})")
    return identity


def _int(environ: Mapping[str, str], key: str, default: Optional[int] = None) -> int:
    value = environ.get(key)
    if value in (None, ""):
        if default is None:
            raise JobError(f"environment variable {key} is not set")
        return default
    try:
        return int(value)
    except ValueError:
        raise JobError(f"environment variable {key}={value!r} is not an integer") from None
