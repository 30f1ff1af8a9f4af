"""How many CPU threads torch uses in a training process, chosen with care and said at start.

torch's default (one thread per core the machine has) oversubscribes the CPU as soon as anything else runs:
other processes of the same run, data-loader workers, other users' jobs. OpenMP threads that wait for a core
spin, so on a busy 2-core machine two threads can be ten times slower than one. The default here counts:

- the cores this process may use: its CPU affinity (``taskset``, SLURM's binding), capped by a cgroup CPU
  quota (a container's ``--cpus``, SLURM's ``cpus-per-task``);
- the training processes sharing the machine (the local world size) and each one's data-loader workers;
- the load already on the machine when the run starts (the 1-minute load average: work of others).

``--num_threads N`` (or ``OMP_NUM_THREADS=N``) sets the count instead.

Example:
    >>> plan = choose_threads(explicit=None, environment={}, cores=8, local_processes=2, loader_workers=1,
    ...                       load=0.0)
    >>> plan.threads, plan.reason
    (3, '8 cores available, 2 processes on this machine, 1 loader worker each')
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

logger = logging.getLogger(__name__)

#: Environment variables that set a thread count by hand (torch reads the first).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


@dataclass(frozen=True)
class ThreadPlan:
    """``threads`` to use, and the ``reason`` printed with it."""

    threads: int
    reason: str


def available_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by a cgroup CPU quota (at least 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    if quota is not None:
        cores = min(cores, max(1, math.floor(quota)))
    return max(1, cores)


def cgroup_cpu_quota(root: str = "/sys/fs/cgroup") -> Optional[float]:
    """The cgroup's CPU quota in cores (``cpu.max`` of cgroup v2, ``cpu.cfs_quota_us`` of v1); None when
    unlimited or unknown."""
    try:
        with open(os.path.join(root, "cpu.max"), encoding="utf-8") as handle:
            quota, period = handle.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(root, "cpu", "cpu.cfs_quota_us"), encoding="utf-8") as handle:
            quota_us = int(handle.read())
        with open(os.path.join(root, "cpu", "cpu.cfs_period_us"), encoding="utf-8") as handle:
            period_us = int(handle.read())
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    except (OSError, ValueError):
        return None


def choose_threads(explicit: Optional[int], environment: Mapping, cores: int, local_processes: int,
                   loader_workers: int, load: float) -> ThreadPlan:
    """The thread count of one training process.

    Args:
        explicit: ``--num_threads`` (wins when set).
        environment: the process's environment (``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` win next).
        cores: :func:`available_cores`.
        local_processes: training processes on this machine (each chooses the same way).
        loader_workers: data-loader worker processes of each training process (each takes a core).
        load: the 1-minute load average when the run starts (0 to ignore it).
    """
    if explicit is not None:
        return ThreadPlan(int(explicit), "from --num_threads")
    for name in THREAD_VARIABLES:
        value = str(environment.get(name, "")).strip()
        if value.isdigit() and int(value) > 0:
            return ThreadPlan(int(value), f"from {name}")
    processes = max(1, local_processes)
    share = cores // processes - max(0, loader_workers)
    reason = f"{cores} core{'s' * (cores != 1)} available"
    if processes > 1:
        reason += f", {processes} processes on this machine"
    if loader_workers > 0:
        reason += f", {loader_workers} loader worker{'s' * (loader_workers != 1)} each"
    idle = cores - math.floor(load + 0.5)
    if idle < cores and idle // processes < share:
        share = idle // processes
        reason += f", load {load:.1f} from other work"
    return ThreadPlan(max(1, share), reason)


def local_processes(world_size: int, environment: Mapping) -> int:
    """Training processes on this machine: torchrun's ``LOCAL_WORLD_SIZE``, SLURM's tasks per node, else
    the world size (self-spawned workers; a guess that errs towards fewer threads)."""
    for name in ("LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"):
        digits = str(environment.get(name, "")).split("(")[0].split(",")[0].strip()
        if digits.isdigit() and int(digits) > 0:
            return int(digits)
    return max(1, world_size)


def configure_threads(explicit: Optional[int], local_processes: int, loader_workers: int) -> ThreadPlan:
    """Choose the count (:func:`choose_threads` on this machine), give it to torch, log it, and return it."""
    import torch

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    plan = choose_threads(explicit, os.environ, available_cores(), local_processes, loader_workers, load)
    if plan.threads != torch.get_num_threads():
        torch.set_num_threads(plan.threads)
    logger.info("CPU threads per process: %d (%s); change with --num_threads N", plan.threads, plan.reason)
    return plan


__all__ = ["THREAD_VARIABLES", "ThreadPlan", "available_cores", "cgroup_cpu_quota", "choose_threads",
           "configure_threads", "local_processes"]
