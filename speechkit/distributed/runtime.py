"""The process's distributed runtime: ``init`` once, then ``context()`` anywhere.

The resolved :class:`~speechkit.distributed.env.DistributedContext` is the only process-wide state of the
package (a process has exactly one place in the world); it is set by :func:`init` and read by the helpers in
``ops``. Nothing reads the environment after that.

A recipe need not call :func:`init` itself: ``parse_arguments`` hands the run options of the process's
command line to :func:`use_run_options`, and in a process started by a multi-process launcher the first call
that needs the context (``context()``, hence ``run_on_main``, ``is_main``, ``barrier``, ...) runs ``init``
with them.

Example:
    >>> from speechkit.experiment.run_options import RunOptions
    >>> ctx = init(RunOptions())          # one process here
    >>> ctx.world_size, context() is ctx
    (1, True)
"""
from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
from datetime import timedelta
from typing import Optional

from speechkit.distributed.env import (
    DistributedContext,
    is_spawn_request,
    resolve_context,
    started_by_multiprocess_launcher,
)
from speechkit.distributed.rendezvous import close_file_store, join_file_store
from speechkit.errors import DistributedError

logger = logging.getLogger(__name__)


class _Runtime:
    """Holder of the one context of this process and of its fail-fast watchdog."""

    context: Optional[DistributedContext] = None
    watchdog = None
    #: ``(init_method, FileStore)`` of a ``file://`` rendezvous (rank 0 removes the file at exit)
    file_store = None
    #: The run options parsed from this process's command line (for an implicit ``init``).
    run_opts = None


def use_run_options(run_opts) -> None:
    """Remember the run options of this process's command line; a later implicit :func:`init` uses them.

    Called by ``speechkit.parse_arguments`` when it parses the process's own command line.
    """
    _Runtime.run_opts = run_opts


def init(run_opts, environ=None) -> DistributedContext:
    """Find this process's place in the world and join the process group (idempotent).

    In self-spawning mode (``--num-workers N`` without ``--worker-id``) this starts N local workers running
    the same command, waits for them, and exits the process with their combined status.

    Args:
        run_opts: a :class:`speechkit.experiment.run_options.RunOptions`.
        environ: environment to read (default ``os.environ``).

    Returns:
        the :class:`DistributedContext` of this process.
    """
    if _Runtime.context is not None:
        _warn_if_different(_Runtime.context, run_opts, environ)
        return _Runtime.context
    import torch

    environ = os.environ if environ is None else environ
    if is_spawn_request(run_opts):
        from speechkit.distributed.launch import spawn_local_workers

        sys.exit(spawn_local_workers(run_opts))
    cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    ctx = resolve_context(run_opts, environ, cuda_count)
    if ctx.device.startswith("cuda"):
        torch.cuda.set_device(ctx.device)
    if ctx.is_distributed:
        _join_process_group(ctx)
    _Runtime.context = ctx
    logger.info("distributed: %s", ctx.describe())
    return ctx


def context() -> DistributedContext:
    """The context of this process.

    Before :func:`init`: in a process started by a multi-process launcher whose run options were parsed
    (``parse_arguments``), ``init`` runs now with them (joining the process group: every worker runs the same
    script, so each gets here); otherwise a one-process context on cuda:0 (if CUDA) or cpu.
    """
    if _Runtime.context is not None:
        return _Runtime.context
    if _Runtime.run_opts is not None and started_by_multiprocess_launcher(os.environ):
        return init(_Runtime.run_opts)
    try:
        import torch

        device = "cuda:0" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover - torch is a requirement
        device = "cpu"
    return DistributedContext(device=device)


def _warn_if_different(ctx: DistributedContext, run_opts, environ) -> None:
    """A second ``init`` with other options (the YAML's ``distributed_timeout_s``) cannot change the group."""
    if not ctx.is_distributed or run_opts is None or run_opts is _Runtime.run_opts:
        return
    if is_spawn_request(run_opts):
        return
    try:
        import torch

        cuda_count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        wanted = resolve_context(run_opts, os.environ if environ is None else environ, cuda_count)
    except DistributedError:
        return
    differ = [name for name in ("device", "backend", "timeout_s")
              if getattr(wanted, name) != getattr(ctx, name)]
    if differ:
        logger.warning("distributed: already initialised as %s; the run options given now ask for %s, which "
                       "take effect only when given on the command line", ctx.describe(),
                       ", ".join(f"{name}={getattr(wanted, name)}" for name in differ))


def initialized() -> bool:
    """Whether :func:`init` ran in this process (and :func:`shutdown` did not follow)."""
    return _Runtime.context is not None


def refuse_unknown_place(name: str) -> None:
    """Raise if this process cannot know its rank yet although a multi-process launcher started it.

    That is: no :func:`init` and no parsed run options for an implicit one; every worker would take itself
    for the main process.
    """
    unknown = _Runtime.context is None and _Runtime.run_opts is None
    if unknown and started_by_multiprocess_launcher(os.environ):
        raise DistributedError(
            f"{name} was called before speechkit.distributed.init(run_opts) in a process started by a "
            "multi-process launcher, and no run options were parsed to initialise it: call "
            "speechkit.parse_arguments() (or init(run_opts)) first")


def shutdown() -> None:
    """Tear the distributed state down in order (also run at exit, on every path that runs ``atexit``).

    1. stop the fail-fast watchdog's thread (it must be out of every store call before the interpreter
       ends: a daemon thread inside C++ at that moment aborts the process), report this rank done, and on
       rank 0 wait for the others;
    2. destroy the process group;
    3. rank 0 of a ``file://`` rendezvous, once every rank is done, marks the file closed and removes it;
    4. drop the last references to the store, so that its C++ object goes while the interpreter is whole.
    """
    watchdog, _Runtime.watchdog = _Runtime.watchdog, None
    if watchdog is not None:
        watchdog.shutdown()
    import torch.distributed as torch_dist

    if torch_dist.is_available() and torch_dist.is_initialized():
        torch_dist.destroy_process_group()
    file_store, _Runtime.file_store = _Runtime.file_store, None
    if file_store is not None and watchdog is not None and watchdog.rank == 0 and watchdog.all_done:
        close_file_store(*file_store)
    if watchdog is not None:
        watchdog.store = None
    del file_store, watchdog
    gc.collect()
    _Runtime.context = None


def _join_process_group(ctx: DistributedContext) -> None:
    import torch
    import torch.distributed as torch_dist

    if not torch_dist.is_available():
        raise DistributedError("this torch build has no torch.distributed")
    if ctx.init_method == "env://":
        # SLURM gives no MASTER_ADDR/PORT: publish the resolved ones for torch's env:// rendezvous.
        os.environ["MASTER_ADDR"] = str(ctx.master_addr)
        os.environ["MASTER_PORT"] = str(ctx.master_port)
    if not torch_dist.is_initialized():
        kwargs = {}
        if ctx.backend == "nccl":
            kwargs["device_id"] = torch.device(ctx.device)
        if ctx.init_method.startswith("file://"):
            # checked, bounded by the timeout, and removed at exit (torch's FileStore alone waits silently)
            store = join_file_store(ctx.init_method, ctx.rank, ctx.world_size, ctx.timeout_s)
            _Runtime.file_store = (ctx.init_method, store)
            kwargs["store"] = store
        else:
            kwargs["init_method"] = ctx.init_method
        atexit.register(shutdown)
        try:
            torch_dist.init_process_group(ctx.backend, rank=ctx.rank, world_size=ctx.world_size,
                                          timeout=timedelta(seconds=ctx.timeout_s), **kwargs)
        except Exception as error:
            hint = (" (a file:// rendezvous file of an earlier run names processes that are gone: delete it)"
                    if "refused" in str(error).lower() and _Runtime.file_store else "")
            raise DistributedError(f"rank {ctx.rank}/{ctx.world_size}: cannot join the process group via "
                                   f"{ctx.init_method} ({ctx.launcher}): {error}{hint}") from error
    _start_watchdog(ctx)


def _start_watchdog(ctx: DistributedContext) -> None:
    import torch.distributed as torch_dist
    from torch.distributed import distributed_c10d

    from speechkit.distributed.failfast import FailFast

    try:
        store = distributed_c10d._get_default_store()
    except Exception as error:  # noqa: BLE001 - a torch without it still trains, only without fail-fast
        logger.warning("distributed: no access to the c10d store (%s); a failed rank may leave others "
                       "waiting for the collective timeout", error)
        return
    # A token fresh for this run keeps keys of an earlier attempt (torchrun restart, reused file://) apart.
    token = [os.urandom(6).hex() if ctx.is_main else None]
    torch_dist.broadcast_object_list(token, src=0)
    _Runtime.watchdog = FailFast(store, ctx.rank, ctx.world_size, token[0], ctx.timeout_s,
                                 store_host=_store_host(ctx))
    _Runtime.watchdog.start(register_atexit=False)


def _store_host(ctx: DistributedContext):
    """The rank whose process serves the c10d store: rank 0 unless torchrun's agent or a file serves it."""
    if ctx.init_method.startswith("file://") or ctx.launcher in ("torchrun", "torch.distributed.launch"):
        return None
    return 0
