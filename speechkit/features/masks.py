"""Length helpers shared by the feature functions: which positions of a padded batch are real.

Example:
    >>> length_mask(torch.tensor([2, 3]), 4)
    tensor([[ True,  True, False, False],
            [ True,  True,  True, False]])
"""
from __future__ import annotations

from typing import Optional

import torch


def check_lengths(x: torch.Tensor, lengths: torch.Tensor, time_dim: int = 1) -> torch.Tensor:
    """Validate absolute lengths against a padded batch; returns them as int64 on ``x``'s device.

    Raises ValueError when the lengths are not one per item, negative, or longer than the padded time axis.
    """
    lengths = torch.as_tensor(lengths, device=x.device)
    if lengths.dtype.is_floating_point:
        raise ValueError("lengths must be absolute integer counts (int64), got a floating-point tensor; "
                         "relative lengths are not used in speechkit")
    lengths = lengths.to(torch.int64)
    if lengths.dim() != 1 or lengths.numel() != x.shape[0]:
        raise ValueError(f"expected one length per item ({x.shape[0]}), got shape {tuple(lengths.shape)}")
    if _capturing():
        return lengths  # reading values back would break a compiled graph or a CUDA graph capture
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > x.shape[time_dim]):
        raise ValueError(f"lengths must lie in [0, {x.shape[time_dim]}] (the padded time axis), "
                         f"got {lengths.tolist()}")
    return lengths


def _capturing() -> bool:
    """True while torch.compile traces or a CUDA graph is being captured."""
    compiler = getattr(torch, "compiler", None)
    if compiler is not None and getattr(compiler, "is_compiling", lambda: False)():
        return True
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def length_mask(lengths: torch.Tensor, max_len: Optional[int] = None) -> torch.Tensor:
    """(batch, max_len) bool mask, True on the first ``lengths[i]`` positions of row i."""
    max_len = int(lengths.max()) if max_len is None and lengths.numel() else (max_len or 0)
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def zero_padding(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """``x`` (batch, time, ...) with every position past its item's length set to zero."""
    mask = length_mask(lengths, x.shape[1])
    return x * mask.reshape(mask.shape + (1,) * (x.dim() - 2)).to(x.dtype)
