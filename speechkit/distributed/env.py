"""Who am I in the world: resolve rank, world size, local rank, device and backend from one place.

The place of a process is read once, in this order, and kept in a :class:`DistributedContext`:

1. explicit flags: ``--worker-id R --num-workers W [--device-id D] [--sync-protocol env://|file://PATH]``;
2. torchrun / ``torch.distributed.launch``: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR/PORT``
   (``--local-rank`` from the legacy launcher is accepted too);
3. SLURM (inside an ``srun`` step): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``,
   the master address from ``SLURM_JOB_NODELIST`` and a port derived from ``SLURM_JOB_ID``;
4. otherwise one process.

Everything here is a pure function of the run options, an environment mapping and the number of visible GPUs,
so each layout is tested without starting a process.

Example:
    >>> from speechkit.experiment.run_options import RunOptions
    >>> env = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}
    >>> ctx = resolve_context(RunOptions(), env, cuda_device_count=0)
    >>> ctx.rank, ctx.world_size, ctx.device, ctx.backend
    (1, 2, 'cpu', 'gloo')
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

from speechkit.errors import DistributedError

#: Ports derived from a SLURM job id fall in [SLURM_PORT_BASE, SLURM_PORT_BASE + SLURM_PORT_SPAN).
SLURM_PORT_BASE = 15000
SLURM_PORT_SPAN = 20000
#: Set by the self-spawning launcher in its workers' environment.
LAUNCHED_WORKER_ENV = "SPEECHKIT_SPAWNED_WORKER"


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the world, resolved once.

    Attributes:
        rank: global rank in ``[0, world_size)``.
        world_size: number of processes.
        local_rank: rank among the processes of this node (selects the GPU).
        node_rank: index of this node.
        device: ``"cpu"`` or ``"cuda:N"``.
        backend: ``"nccl"``, ``"gloo"``, or ``None`` for one process.
        launcher: ``"single"``, ``"explicit"``, ``"spawn"``, ``"torchrun"``, ``"torch.distributed.launch"``,
            ``"env"`` or ``"slurm"``.
        init_method: ``"env://"``, ``"file://..."`` or ``"tcp://..."`` (``None`` for one process).
        master_addr, master_port: the rendezvous address for ``env://`` (``None`` otherwise).
        timeout_s: seconds a collective may wait.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    node_rank: int = 0
    device: str = "cpu"
    backend: Optional[str] = None
    launcher: str = "single"
    init_method: Optional[str] = None
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    timeout_s: float = 300.0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    def describe(self) -> str:
        """One log line, e.g. ``rank 1/2 (local 1, node 0) on cpu, gloo via torchrun``."""
        where = f"rank {self.rank}/{self.world_size} (local {self.local_rank}, node {self.node_rank})"
        return f"{where} on {self.device}, {self.backend or 'no process group'} via {self.launcher}"


def requested_workers(run_opts) -> Optional[int]:
    """The process count asked for with ``--num-workers`` (``None`` if not asked).

    A top-level ``num_workers`` key of a YAML file usually means data-loading workers, so it counts only
    together with ``--worker-id``; otherwise the option must come from the command line.
    """
    if run_opts.worker_id is not None or "num_workers" in getattr(run_opts, "explicit", frozenset()):
        return run_opts.num_workers
    return None


def is_spawn_request(run_opts) -> bool:
    """True when the command asks this process to start local workers (``--num-workers N``, N > 1, no id)."""
    workers = requested_workers(run_opts)
    return run_opts.worker_id is None and workers is not None and workers > 1


def started_by_multiprocess_launcher(environ: Mapping[str, str]) -> bool:
    """Whether a launcher started this process as one of several (torchrun, an srun step, our own launcher).

    Such a process must not act before it knows its rank: every worker would believe it is the main one.

    Example:
        >>> started_by_multiprocess_launcher({"RANK": "1", "WORLD_SIZE": "2"})
        True
        >>> started_by_multiprocess_launcher({"SLURM_PROCID": "0", "SLURM_NTASKS": "4"})  # a batch script
        False
    """
    if environ.get("WORLD_SIZE", "1") not in ("", "0", "1") or LAUNCHED_WORKER_ENV in environ:
        return True
    return "SLURM_STEP_ID" in environ and environ.get(
        "SLURM_STEP_NUM_TASKS", environ.get("SLURM_NTASKS", "1")) != "1"


def resolve_context(run_opts, environ: Mapping[str, str], cuda_device_count: int) -> DistributedContext:
    """Resolve this process's :class:`DistributedContext` (pure: reads only its arguments).

    Args:
        run_opts: a :class:`speechkit.experiment.run_options.RunOptions`.
        environ: the environment (``os.environ`` or a dict in tests).
        cuda_device_count: GPUs this process can see.

    Raises:
        DistributedError: inconsistent flags or environment, naming the flag or variable.
    """
    workers = requested_workers(run_opts)
    if run_opts.worker_id is not None or (workers is not None and workers <= 1):
        place = _from_explicit_flags(run_opts, environ)
    elif _has_torchrun_env(environ):
        place = _from_torchrun_env(run_opts, environ)
    elif run_opts.distributed_launch or run_opts.local_rank is not None:
        raise DistributedError("--distributed_launch/--local-rank were given but RANK and WORLD_SIZE are not "
                               "set: start the script with torchrun or python -m torch.distributed.launch")
    elif _has_slurm_step_env(environ):
        place = _from_slurm_env(environ)
    else:
        place = {"rank": 0, "world_size": 1, "local_rank": 0, "launcher": "single"}
    place.setdefault("node_rank", 0)
    device = _resolve_device(run_opts, place["local_rank"], cuda_device_count)
    distributed = place["world_size"] > 1
    backend = _resolve_backend(run_opts, device) if distributed else None
    if not distributed:
        place.update(init_method=None, master_addr=None, master_port=None)
    return DistributedContext(device=device, backend=backend, timeout_s=float(run_opts.distributed_timeout_s),
                              **place)


# ---------------------------------------------------------------------------------------------- layouts


def _from_explicit_flags(run_opts, environ: Mapping[str, str]) -> dict:
    if run_opts.num_workers is None:
        raise DistributedError(f"--worker-id {run_opts.worker_id} needs --num-workers")
    world, rank = int(run_opts.num_workers), run_opts.worker_id
    if world < 1:
        raise DistributedError(f"--num-workers must be at least 1, got {world}")
    if rank is None:  # --num-workers 1 without an id: simply one process
        return {"rank": 0, "world_size": 1, "local_rank": 0, "launcher": "single"}
    if not 0 <= rank < world:
        raise DistributedError(f"--worker-id {rank} is outside [0, --num-workers {world})")
    if run_opts.device_id is not None:
        local_rank = run_opts.device_id
    else:
        local_rank = _int_env(environ, "LOCAL_RANK", default=rank)
    place = {"rank": rank, "world_size": world, "local_rank": local_rank, "launcher": "explicit",
             "node_rank": _int_env(environ, "NODE_RANK", default=0)}
    if world > 1:
        place.update(_rendezvous(run_opts.sync_protocol or "env://", environ, "--sync-protocol"))
    return place


def _has_torchrun_env(environ: Mapping[str, str]) -> bool:
    return "RANK" in environ and "WORLD_SIZE" in environ


def _from_torchrun_env(run_opts, environ: Mapping[str, str]) -> dict:
    rank, world = _int_env(environ, "RANK"), _int_env(environ, "WORLD_SIZE")
    if not 0 <= rank < world:
        raise DistributedError(f"RANK={rank} is outside [0, WORLD_SIZE={world})")
    fallback = run_opts.local_rank if run_opts.local_rank is not None else rank
    local_rank = _int_env(environ, "LOCAL_RANK", default=fallback)
    if run_opts.distributed_launch or run_opts.local_rank is not None:
        launcher = "torch.distributed.launch"
    elif "TORCHELASTIC_RUN_ID" in environ or "TORCHELASTIC_RESTART_COUNT" in environ:
        launcher = "torchrun"
    else:
        launcher = "env"
    node_rank = _int_env(environ, "GROUP_RANK", default=_int_env(environ, "NODE_RANK", default=0))
    place = {"rank": rank, "world_size": world, "local_rank": local_rank, "node_rank": node_rank,
             "launcher": launcher}
    if world > 1:
        place.update(_rendezvous("env://", environ, "the launcher's environment"))
    return place


def _has_slurm_step_env(environ: Mapping[str, str]) -> bool:
    # SLURM_STEP_ID marks a task of an srun step; a batch script or salloc shell also holds SLURM_NTASKS
    # but is a single process, and treating it as rank 0 of N would wait forever for the others.
    return "SLURM_PROCID" in environ and "SLURM_STEP_ID" in environ and (
        "SLURM_STEP_NUM_TASKS" in environ or "SLURM_NTASKS" in environ)


def _from_slurm_env(environ: Mapping[str, str]) -> dict:
    rank = _int_env(environ, "SLURM_PROCID")
    world_key = "SLURM_STEP_NUM_TASKS" if "SLURM_STEP_NUM_TASKS" in environ else "SLURM_NTASKS"
    world = _int_env(environ, world_key)
    if not 0 <= rank < world:
        raise DistributedError(f"SLURM_PROCID={rank} is outside [0, {world_key}={world})")
    place = {"rank": rank, "world_size": world, "local_rank": _int_env(environ, "SLURM_LOCALID", default=0),
             "node_rank": _int_env(environ, "SLURM_NODEID", default=0), "launcher": "slurm"}
    if world > 1:
        addr = environ.get("MASTER_ADDR") or _slurm_master_addr(environ)
        port = environ.get("MASTER_PORT") or str(slurm_master_port(environ.get("SLURM_JOB_ID", "0")))
        place.update(_rendezvous("env://", {"MASTER_ADDR": addr, "MASTER_PORT": port}, "SLURM"))
    return place


def _slurm_master_addr(environ: Mapping[str, str]) -> str:
    for key in ("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if environ.get(key):
            return expand_nodelist(environ[key])[0]
    raise DistributedError("SLURM: cannot find the master node: SLURM_JOB_NODELIST is not set "
                           "(set MASTER_ADDR)")


def slurm_master_port(job_id: str) -> int:
    """A port derived from the SLURM job id, so that jobs sharing a node do not collide.

    Example:
        >>> slurm_master_port("123")
        15123
    """
    digits = re.sub(r"\D", "", str(job_id)) or "0"
    return SLURM_PORT_BASE + int(digits) % SLURM_PORT_SPAN


def expand_nodelist(nodelist: str) -> list:
    """Expand a SLURM host list, as ``scontrol show hostnames`` does.

    Example:
        >>> expand_nodelist("gpu[01-02,5],cpu7")
        ['gpu01', 'gpu02', 'gpu5', 'cpu7']
    """
    hosts = []
    for item in _split_top_level(nodelist.strip()):
        match = re.fullmatch(r"([^\[\]]*)\[([^\[\]]+)\]([^\[\]]*)", item)
        if not match:
            if "[" in item or "]" in item or not item:
                raise DistributedError(f"SLURM node list {nodelist!r}: cannot parse {item!r}")
            hosts.append(item)
            continue
        prefix, ranges, suffix = match.groups()
        for part in ranges.split(","):
            low, dash, high = part.partition("-")
            if not low.isdigit() or (dash and not high.isdigit()):
                raise DistributedError(f"SLURM node list {nodelist!r}: bad range {part!r}")
            width = len(low)
            for number in range(int(low), int(high if dash else low) + 1):
                hosts.append(f"{prefix}{number:0{width}d}{suffix}")
    if not hosts:
        raise DistributedError(f"SLURM node list {nodelist!r} names no host")
    return hosts


def _split_top_level(text: str) -> list:
    """Split on commas that are outside brackets."""
    items, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


# ---------------------------------------------------------------------------------------------- pieces


def _rendezvous(protocol: str, environ: Mapping[str, str], source: str) -> dict:
    if protocol.startswith("file://"):
        if len(protocol) <= len("file://"):
            raise DistributedError(f"{source}: {protocol!r} names no file")
        return {"init_method": protocol, "master_addr": None, "master_port": None}
    if protocol.startswith("tcp://"):
        return {"init_method": protocol, "master_addr": None, "master_port": None}
    if protocol != "env://":
        raise DistributedError(f"{source}: unknown protocol {protocol!r}; use env://, file:///path or tcp://h:p")
    if not environ.get("MASTER_PORT"):
        raise DistributedError(f"{source}: env:// needs MASTER_PORT (and MASTER_ADDR) in the environment")
    port = _int_env(environ, "MASTER_PORT")
    return {"init_method": "env://", "master_addr": environ.get("MASTER_ADDR") or "127.0.0.1",
            "master_port": port}


def _resolve_device(run_opts, local_rank: int, cuda_device_count: int) -> str:
    requested = run_opts.device
    if requested:
        if requested == "cuda":
            return _cuda_for(run_opts.device_id if run_opts.device_id is not None else local_rank,
                             cuda_device_count, "--device cuda")
        if not re.fullmatch(r"cpu|cuda:\d+|mps|xpu(:\d+)?", requested):
            raise DistributedError(f"--device {requested!r}: expected cpu, cuda or cuda:N")
        return requested
    if cuda_device_count == 0:
        return "cpu"
    if run_opts.device_id is not None:
        return _cuda_for(run_opts.device_id, cuda_device_count, f"--device-id {run_opts.device_id}")
    if local_rank >= cuda_device_count and cuda_device_count == 1:
        return "cuda:0"  # each task sees its own GPU (e.g. SLURM --gpus-per-task=1)
    return _cuda_for(local_rank, cuda_device_count, f"local rank {local_rank}")


def _cuda_for(index: int, count: int, source: str) -> str:
    if count == 0:
        raise DistributedError(f"{source}: CUDA is not available; use --device cpu")
    if not 0 <= index < count:
        raise DistributedError(f"{source}: GPU {index} does not exist ({count} visible)")
    return f"cuda:{index}"


def _resolve_backend(run_opts, device: str) -> str:
    backend = run_opts.distributed_backend or ("nccl" if device.startswith("cuda") else "gloo")
    if backend == "nccl" and not device.startswith("cuda"):
        raise DistributedError(f"--distributed_backend nccl needs CUDA devices, but this worker runs on "
                               f"{device}; use gloo")
    return backend


def _int_env(environ: Mapping[str, str], key: str, default: Optional[int] = None) -> int:
    value = environ.get(key)
    if value is None or value == "":
        if default is None:
            raise DistributedError(f"environment variable {key} is not set")
        return default
    try:
        return int(value)
    except ValueError:
        raise DistributedError(f"environment variable {key}={value!r} is not an integer") from None
