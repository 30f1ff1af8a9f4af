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

from speechkit.checkpoints.weights_origin import has_weights, note_origin, note_untrained, weights_origin
from speechkit.engine.device_speed import compile_options
from speechkit.errors import HparamsError


def training_modules(
    modules: torch.nn.ModuleDict, dist: Any, context: Any, run_opts: Any, compile_names: Optional[list] = None
) -> torch.nn.ModuleDict:
    """Wrap every module with trainable parameters (``dist.wrap_module``); with ``--compile``, compile the
    modules named in ``compile_names`` (all when ``None``), in ``--compile_mode`` ("reduce-overhead": CUDA
    graphs)."""
    names = compile_names or list(modules)
    wrapped = {}
    for name, module in modules.items():
        if any(p.requires_grad for p in module.parameters()):
            module = dist.wrap_module(module, context, run_opts)
        if run_opts.compile and name in names:
            module = torch.compile(module, **compile_options(run_opts.compile_mode))
        wrapped[name] = module
    return torch.nn.ModuleDict(wrapped)


def set_training_modes(modules: torch.nn.ModuleDict, raw_modules: torch.nn.ModuleDict,
                       trainable: frozenset) -> None:
    """Training mode for ``modules`` (the training view), eval mode for the frozen ones among
    ``raw_modules``: no dropout, no running statistics updated, so their weights stay bit-identical."""
    modules.train()
    for name, module in raw_modules.items():
        if name not in trainable:
            module.eval()


def gradient_sync(modules: torch.nn.ModuleDict, dist: Any, final: bool) -> contextlib.ExitStack:
    """A context without gradient all-reduce (``dist.no_sync``) unless ``final`` (the cycle's last batch)."""
    stack = contextlib.ExitStack()
    if not final:
        for module in modules.values():
            stack.enter_context(dist.no_sync(module))
    return stack


def freeze_modules(modules: torch.nn.ModuleDict, trainable: Optional[Any]) -> frozenset:
    """Freeze every module not named in ``trainable``; returns the names of the modules that learn.

    ``None`` keeps every module as it is (all of them learn). A frozen module gets ``requires_grad=False``
    on all its parameters, so the optimizer never sees it (not even weight decay touches it) and it is never
    wrapped in DistributedDataParallel (no unused-parameter error for a module that gets no gradient). A
    trainable module keeps its parameters' own ``requires_grad``.

    Example:
        >>> modules = torch.nn.ModuleDict({"a": torch.nn.Linear(1, 1), "b": torch.nn.Linear(1, 1)})
        >>> freeze_modules(modules, ["a"]), modules["b"].weight.requires_grad
        (frozenset({'a'}), False)
    """
    if trainable is None:
        return frozenset(modules)
    if isinstance(trainable, str):
        trainable = [trainable]
    names = frozenset(trainable)
    unknown = names - set(modules)
    if unknown:
        raise HparamsError(
            f"trainable_modules names unknown modules {sorted(unknown)}; known: {sorted(modules)}"
        )
    for name, module in modules.items():
        if name not in names:
            module.requires_grad_(False)
    return names


def trainable_parameters(modules: torch.nn.ModuleDict, trainable: frozenset) -> list:
    """The parameters the optimizer updates: those of the trainable modules (sorted by name) that need a
    gradient."""
    return [p for name in sorted(trainable) for p in modules[name].parameters() if p.requires_grad]


def note_weight_origins(modules: torch.nn.ModuleDict, trainable: frozenset) -> list:
    """Note ``trained`` on the modules that learn, ``untrained`` on frozen modules whose weights come from
    nowhere (neither loaded nor recovered); returns the latter's names (see
    :mod:`speechkit.checkpoints.weights_origin`).

    Example:
        >>> modules = torch.nn.ModuleDict({"a": torch.nn.Linear(1, 1), "b": torch.nn.Linear(1, 1)})
        >>> note_weight_origins(modules, frozenset({"a"}))
        ['b']
    """
    untrained = []
    for name, module in modules.items():
        if name in trainable:
            note_origin(module, "trained")
        elif has_weights(module) and weights_origin(module) is None:
            note_untrained(module)
            untrained.append(name)
    return untrained
