"""Mixed precision: the autocast context and the gradient scaler for one precision name.

fp32 runs as is; bf16 autocasts on CPU and CUDA (no scaler: bf16 has fp32's range); fp16 autocasts on CUDA
with a :class:`torch.amp.GradScaler` that skips steps whose gradients overflowed.

Example:
    >>> precision = Precision("bf16", "cpu")
    >>> with precision.autocast():
    ...     y = torch.nn.Linear(4, 2)(torch.randn(3, 4))
    >>> y.dtype
    torch.bfloat16
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from speechkit.errors import RunOptionsError

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


class Precision:
    """Autocast and scaler for ``name`` in ``{"fp32", "fp16", "bf16"}`` on ``device`` ("cpu", "cuda:0")."""

    def __init__(self, name: str, device: str):
        self.name = name
        self.device_type = torch.device(device).type
        if name not in ("fp32", "fp16", "bf16"):
            raise RunOptionsError(f"precision must be fp32, fp16 or bf16, got {name!r}")
        if name == "fp16" and self.device_type != "cuda":
            raise RunOptionsError(
                "precision fp16 needs a CUDA device (it relies on a gradient scaler); "
                "use --precision bf16 on CPU"
            )
        self.scaler = torch.amp.GradScaler("cuda") if name == "fp16" else None

    def autocast(self) -> Any:
        """A context manager running the forward pass in this precision."""
        if self.name == "fp32":
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device_type, dtype=_DTYPES[self.name])

    def __repr__(self) -> str:
        return f"Precision({self.name!r}, {self.device_type!r})"
