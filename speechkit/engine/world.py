"""Access to the pinned ``speechkit.distributed`` API, with a single-process stand-in.

The engine only calls the pinned functions (``init``, ``context``, ``is_main``, ``barrier``, ``run_on_main``,
``all_gather_object``, ``broadcast_object``, ``wrap_module``, ``unwrap``, ``no_sync``). While
``speechkit.distributed`` does not provide them (the package can be installed without its launcher), a
one-process stand-in answers, so the engine always runs on one process.

Example:
    >>> dist = distributed_api()
    >>> dist.all_gather_object(3)
    [3]
"""

from __future__ import annotations

import contextlib
import importlib
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Callable, Optional

_PINNED = (
    "init",
    "context",
    "is_main",
    "barrier",
    "run_on_main",
    "all_gather_object",
    "broadcast_object",
    "wrap_module",
    "unwrap",
    "no_sync",
    "world_size",
    "rank",
)


@dataclass
class SingleProcessContext:
    """The place of a lone process: rank 0 of a world of one."""

    device: str = "cpu"
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    node_rank: int = 0
    backend: Optional[str] = None
    launcher: str = "single"

    @property
    def is_main(self) -> bool:
        return True

    @property
    def is_distributed(self) -> bool:
        return False


def _default_device(run_opts: Any = None) -> str:
    import torch

    requested = getattr(run_opts, "device", None)
    if requested:
        return "cuda:0" if requested == "cuda" else requested
    return "cuda:0" if torch.cuda.is_available() else "cpu"


def _single_process_api() -> SimpleNamespace:
    state = {"context": None}

    def init(run_opts: Any = None) -> SingleProcessContext:
        if state["context"] is None or getattr(run_opts, "device", None):
            state["context"] = SingleProcessContext(device=_default_device(run_opts))
        return state["context"]

    def context() -> SingleProcessContext:
        return state["context"] or SingleProcessContext(device=_default_device())

    def run_on_main(
        fn: Callable,
        args: tuple = (),
        kwargs: Optional[dict] = None,
        post_fn: Callable = None,
        post_args: tuple = (),
        post_kwargs: Optional[dict] = None,
    ) -> Any:
        result = fn(*args, **(kwargs or {}))
        if post_fn is not None:
            post_fn(*post_args, **(post_kwargs or {}))
        return result

    def unwrap(module: Any) -> Any:
        return (
            getattr(module, "module", module)
            if type(module).__name__ in ("DistributedDataParallel", "DataParallel")
            else module
        )

    return SimpleNamespace(
        init=init,
        context=context,
        is_main=lambda: True,
        rank=lambda: 0,
        world_size=lambda: 1,
        barrier=lambda: None,
        run_on_main=run_on_main,
        broadcast_object=lambda obj, src=0: obj,
        all_gather_object=lambda obj: [obj],
        wrap_module=lambda module, ctx=None, run_opts=None: module,
        unwrap=unwrap,
        no_sync=lambda module: contextlib.nullcontext(),
        is_fallback=True,
    )


_FALLBACK = None


def distributed_api() -> Any:
    """``speechkit.distributed`` when it provides the pinned API, else the single-process stand-in."""
    global _FALLBACK
    try:
        module = importlib.import_module("speechkit.distributed")
        if all(hasattr(module, name) for name in _PINNED):
            return module
    except ImportError:
        pass
    if _FALLBACK is None:  # one stand-in per interpreter, like the real module's process state
        _FALLBACK = _single_process_api()
    return _FALLBACK
