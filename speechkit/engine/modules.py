"""The training view of a recipe's modules: wrapped for several processes, optionally compiled.

Evaluation keeps using the plain modules (no DDP wrapper, no collectives); training uses these.

Example:
    >>> wrapped = training_modules(modules, dist, ctx, run_opts)          # doctest: +SKIP
    >>> with gradient_sync(wrapped, dist, final=False): loss.backward()  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
from typing import Any, Optional

import torch


def training_modules(
    modules: torch.nn.ModuleDict, dist: Any, context: Any, run_opts: Any, compile_names: Optional[list] = None
) -> torch.nn.ModuleDict:
    """Wrap every module with trainable parameters (``dist.wrap_module``); with ``--compile``, compile the
    modules named in ``compile_names`` (all when ``None``)."""
    names = compile_names or list(modules)
    wrapped = {}
    for name, module in modules.items():
        if any(p.requires_grad for p in module.parameters()):
            module = dist.wrap_module(module, context, run_opts)
        if run_opts.compile and name in names:
            module = torch.compile(module)
        wrapped[name] = module
    return torch.nn.ModuleDict(wrapped)


def gradient_sync(modules: torch.nn.ModuleDict, dist: Any, final: bool) -> contextlib.ExitStack:
    """A context without gradient all-reduce (``dist.no_sync``) unless ``final`` (the cycle's last batch)."""
    stack = contextlib.ExitStack()
    if not final:
        for module in modules.values():
            stack.enter_context(dist.no_sync(module))
    return stack
