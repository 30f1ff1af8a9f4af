"""Length masks: the one place where absolute int64 lengths become boolean masks.

Every layer in :mod:`speechkit.nn` takes padded tensors ``(batch, time, ...)`` together with the absolute
number of valid frames of each item, and builds its masks here, so padding never enters a statistic, an
attention weight or a convolution (docs/design.md, contract 2). The feature functions of
:mod:`speechkit.features` use the same helpers.

Example:
    >>> import torch
    >>> length_mask(torch.tensor([2, 4]), 4)
    tensor([[ True,  True, False, False],
            [ True,  True,  True,  True]])
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from speechkit.errors import DataError


def values_checkable(lengths: torch.Tensor) -> bool:
    """Whether reading the values of ``lengths`` is free: on CPU, outside ``torch.compile`` and tracing.

    Reading a value of an accelerator tensor forces a device synchronization (and a graph break when
    compiled), so value checks only run on CPU tensors; the data loader's lengths are checked there. A
    traced graph (ONNX or TorchScript export) would keep the check's outcome as a constant, so the
    exported model's runtime checks its inputs instead (speechkit.export).
    """
    return (lengths.device.type == "cpu" and not torch.compiler.is_compiling()
            and not torch.jit.is_tracing())


def check_lengths(lengths: torch.Tensor, max_len: int, batch_size: int, name: str = "lengths") -> None:
    """Raise :class:`DataError` unless ``lengths`` are integer absolute lengths that fit ``max_len``.

    Args:
        lengths: ``(batch,)`` integer tensor of valid frames per item.
        max_len: padded size of the time axis.
        batch_size: number of items the lengths must describe.
        name: what the lengths belong to, used in the message.

    Dtype and shape are always checked; values only where :func:`values_checkable`.
    """
    if not isinstance(lengths, torch.Tensor):
        raise DataError(f"{name} must be a tensor of absolute int64 lengths, got {type(lengths).__name__}")
    if lengths.dtype.is_floating_point or lengths.dtype == torch.bool:
        raise DataError(
            f"{name} must hold absolute integer lengths (frames), got dtype {lengths.dtype}; "
            "relative lengths are not supported"
        )
    if lengths.dim() != 1 or lengths.shape[0] != batch_size:
        raise DataError(f"{name} must have shape ({batch_size},), got {tuple(lengths.shape)}")
    if not values_checkable(lengths):
        return
    if lengths.numel() and (int(lengths.min()) < 0 or int(lengths.max()) > max_len):
        raise DataError(f"{name} must lie in [0, {max_len}] (the padded time size), got {lengths.tolist()}")


def checked_lengths(x: torch.Tensor, lengths: Any, time_dim: int = 1) -> torch.Tensor:
    """``lengths`` of the padded batch ``x`` as int64 on ``x``'s device, after :func:`check_lengths`
    (one per item of ``x``, within its time axis ``time_dim``).

    Example:
        >>> checked_lengths(torch.zeros(2, 5), [5, 3])
        tensor([5, 3])
    """
    lengths = torch.as_tensor(lengths, device=x.device)
    if not (lengths.dtype.is_floating_point or lengths.dtype == torch.bool):
        lengths = lengths.to(torch.int64)
    check_lengths(lengths, x.shape[time_dim], x.shape[0])
    return lengths


def length_mask(lengths: torch.Tensor, max_len: Optional[int] = None) -> torch.Tensor:
    """Boolean mask ``(batch, max_len)``, True on the valid frames of each item.

    Args:
        lengths: ``(batch,)`` absolute int64 lengths.
        max_len: padded time size (default: the largest length).
    """
    if max_len is None:
        max_len = int(lengths.max()) if lengths.numel() else 0
    positions = torch.arange(max_len, device=lengths.device)
    return positions.unsqueeze(0) < lengths.unsqueeze(1)


def zero_padding(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Set the padded frames of ``x`` (``(batch, time, ...)``) to zero, whatever they held (even NaN).

    Example:
        >>> zero_padding(torch.ones(1, 3, 2), torch.tensor([1]))[0, :, 0]
        tensor([1., 0., 0.])
    """
    mask = length_mask(lengths, x.shape[1])
    mask = mask.view(mask.shape + (1,) * (x.dim() - 2))
    return x.masked_fill(~mask, 0.0)


def check_features(
    x: torch.Tensor, lengths: torch.Tensor, input_size: int, min_frames: int, owner: str
) -> None:
    """Raise :class:`DataError` unless ``x`` is ``(batch, time, input_size)`` features with valid ``lengths``
    of at least ``min_frames`` frames each (values checked where :func:`values_checkable`).

    ``owner`` names the layer in the messages, e.g. ``"RecurrentEncoder with stride 4"``.
    """
    if x.dim() != 3 or x.shape[-1] != input_size:
        raise DataError(f"{owner} expects (batch, time, {input_size}) features, got {tuple(x.shape)}")
    check_lengths(lengths, x.shape[1], x.shape[0])
    if values_checkable(lengths) and lengths.numel() and int(lengths.min()) < min_frames:
        raise DataError(
            f"an utterance has {int(lengths.min())} feature frames; {owner} needs at least {min_frames} "
            "(filter out shorter utterances)"
        )
