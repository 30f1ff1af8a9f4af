"""Wrap a module for the run: DistributedDataParallel, DataParallel, or unchanged; and undo it.

Example:
    >>> import torch
    >>> from speechkit.experiment.run_options import RunOptions
    >>> from speechkit.distributed.env import DistributedContext
    >>> layer = torch.nn.Linear(4, 2)
    >>> wrap_module(layer, DistributedContext(), RunOptions()) is layer   # one process: unchanged
    True
    >>> unwrap(layer) is layer
    True
"""
from __future__ import annotations

import contextlib
import logging
import warnings

import torch
from torch import nn

from speechkit.errors import DistributedError

logger = logging.getLogger(__name__)

_WRAPPERS = (nn.parallel.DistributedDataParallel, nn.DataParallel)


def wrap_module(module: nn.Module, ctx, run_opts) -> nn.Module:
    """Return ``module`` ready for this run (it must already be on ``ctx.device``).

    - several processes: ``DistributedDataParallel`` (BatchNorm -> SyncBatchNorm with ``--sync_batchnorm``);
    - ``--data_parallel_backend`` in one process: ``DataParallel`` over the visible GPUs, which splits each
      batch along dimension 0 (each GPU gets batch / number of GPUs); without GPUs the module is left
      unchanged on its one device, with a warning;
    - otherwise, or for a module without trainable parameters: unchanged.
    """
    trainable = any(p.requires_grad for p in module.parameters())
    if ctx.is_distributed and run_opts.data_parallel_backend:
        raise DistributedError("--data_parallel_backend cannot be combined with several processes "
                               f"({ctx.world_size} via {ctx.launcher}); use one or the other")
    if ctx.is_distributed:
        if not trainable:
            return module
        if run_opts.sync_batchnorm:
            module = nn.SyncBatchNorm.convert_sync_batchnorm(module)
        device_ids = [torch.device(ctx.device).index] if ctx.device.startswith("cuda") else None
        return nn.parallel.DistributedDataParallel(module, device_ids=device_ids,
                                                   find_unused_parameters=run_opts.find_unused_parameters)
    if run_opts.sync_batchnorm:
        warnings.warn("--sync_batchnorm has no effect in one process", stacklevel=2)
    if run_opts.data_parallel_backend:
        return _data_parallel(module, ctx)
    return module


def _data_parallel(module: nn.Module, ctx) -> nn.Module:
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0 or not ctx.device.startswith("cuda"):
        warnings.warn(f"--data_parallel_backend: no GPU in use; running on one device ({ctx.device})",
                      stacklevel=3)
        return module
    if not any(p.requires_grad for p in module.parameters()):
        return module
    first = torch.device(ctx.device).index
    device_ids = [first] + [i for i in range(gpus) if i != first]
    if gpus == 1:
        warnings.warn("--data_parallel_backend: only one GPU is visible; DataParallel gains nothing",
                      stacklevel=3)
    logger.info("DataParallel over GPUs %s: each gets batch / %d items", device_ids, len(device_ids))
    return nn.DataParallel(module, device_ids=device_ids, output_device=first)


def unwrap(module: nn.Module) -> nn.Module:
    """The module inside any DDP/DataParallel wrappers (for evaluation, checkpoints, export)."""
    while isinstance(module, _WRAPPERS):
        module = module.module
    return module


def no_sync(module: nn.Module):
    """Context manager: skip DDP's gradient all-reduce (gradient accumulation); a no-op for other modules.

    Example:
        >>> with no_sync(torch.nn.Linear(2, 2)):
        ...     pass
    """
    if isinstance(module, nn.parallel.DistributedDataParallel):
        return module.no_sync()
    return contextlib.nullcontext()
