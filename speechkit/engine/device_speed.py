"""What makes a training step fast on a GPU without changing what it computes: fused optimizers, pinned
host memory with non-blocking copies, and the ``torch.compile`` mode (CUDA graphs).

On CPU every choice here is a no-op, so a recipe behaves the same on a laptop and on a GPU server.

Example:
    >>> import functools, torch
    >>> fused_optimizer_options(functools.partial(torch.optim.AdamW, lr=1e-3), "cuda:0")
    {'fused': True}
    >>> fused_optimizer_options(functools.partial(torch.optim.AdamW, lr=1e-3), "cpu")
    {}
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Optional

import torch

from speechkit.errors import RunOptionsError
from speechkit.experiment.run_options import COMPILE_MODES


def is_cuda(device: Any) -> bool:
    return torch.device(device).type == "cuda"


def fused_optimizer_options(opt_class: Any, device: Any) -> dict:
    """``{"fused": True}`` when ``opt_class`` builds a torch optimizer with a fused CUDA kernel and the run is
    on CUDA; ``{}`` otherwise, or when the recipe chose ``fused``/``foreach`` itself.

    The fused kernels (Adam, AdamW, SGD, Adagrad) update every parameter in one launch instead of several per
    parameter, and compute the same update.
    """
    if not is_cuda(device):
        return {}
    target, keywords = opt_class, {}
    while isinstance(target, functools.partial):
        keywords = {**target.keywords, **keywords}
        target = target.func
    if not (inspect.isclass(target) and issubclass(target, torch.optim.Optimizer)):
        return {}
    if "fused" not in inspect.signature(target).parameters or {"fused", "foreach"} & set(keywords):
        return {}
    return {"fused": True}


def build_optimizer(opt_class: Any, params: list, device: Any) -> Any:
    """``opt_class(params)``, fused on CUDA where the optimizer has a fused kernel for these parameters."""
    options = fused_optimizer_options(opt_class, device)
    if options and not all(p.is_floating_point() and is_cuda(p.device) for p in params):
        options = {}  # fused kernels need floating-point CUDA parameters (a frozen CPU copy has none)
    return opt_class(params, **options)


def host_to_device_options(device: Any) -> dict:
    """Keyword arguments of ``tensor.to`` for batches: non-blocking from pinned memory on CUDA."""
    return {"non_blocking": True} if is_cuda(device) else {}


def loader_options_for(device: Any, loader_kwargs: Optional[dict]) -> dict:
    """The recipe's loader options, with ``pin_memory=True`` on CUDA unless the recipe set it."""
    kwargs = dict(loader_kwargs or {})
    if is_cuda(device):
        kwargs.setdefault("pin_memory", True)
    return kwargs


def compile_options(mode: Optional[str]) -> dict:
    """Keyword arguments of ``torch.compile`` for ``--compile_mode``; refuses an unknown mode."""
    if mode in (None, "default"):
        return {}
    if mode not in COMPILE_MODES:
        raise RunOptionsError(f"--compile_mode {mode!r} is not one of {', '.join(COMPILE_MODES)}")
    return {"mode": mode}
