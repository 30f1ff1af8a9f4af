"""Gradient accumulation: a fixed factor, or one derived from a target global batch and the world size.

A global batch given without a factor derives it (as ``auto`` does); a global batch given with a fixed factor
is refused, since the two would disagree as soon as the world size changes.

Example:
    >>> resolve_accumulation("auto", world_size=2, loader_kwargs={"batch_size": 8}, global_batch_size=64)
    4
    >>> resolve_accumulation(None, world_size=4, loader_kwargs={"batch_size": 8}, global_batch_size=64)
    2
"""

from __future__ import annotations

from typing import Optional, Union

from speechkit.errors import RunOptionsError


def resolve_accumulation(
    factor: Union[int, str, None],
    world_size: int,
    loader_kwargs: Optional[dict],
    global_batch_size: Optional[int] = None,
    global_batch_seconds: Optional[float] = None,
) -> int:
    """The number of micro-batches per optimizer step.

    With ``factor="auto"``, or ``None`` (unset) and a target global batch, the target (items or seconds of
    audio) must be a whole multiple of what one step of all processes holds (``world_size x`` the
    per-process batch), else RunOptionsError. ``None`` without a target is 1. A fixed factor together with a
    target global batch is a RunOptionsError.
    """
    target = _global_target(global_batch_size, global_batch_seconds)
    if factor is None:
        factor = "auto" if target else 1
    if factor != "auto" and target:
        raise RunOptionsError(
            f"grad_accumulation_factor {factor} and {target} both set the accumulation: give the global "
            "batch alone (or with --grad_accumulation_factor auto) to derive the factor from the world size, "
            "or the factor alone"
        )
    if factor != "auto":
        factor = int(factor)
        if factor < 1:
            raise RunOptionsError(f"option 'grad_accumulation_factor' must be >= 1 or 'auto', got {factor}")
        return factor
    kwargs = loader_kwargs or {}
    if global_batch_size:
        per_process = kwargs.get("batch_size")
        if not per_process:
            raise RunOptionsError(
                "grad_accumulation_factor auto with global_batch_size needs the train loader's "
                "batch_size (train_loader_kwargs / YAML)"
            )
        per_step = world_size * int(per_process)
        if int(global_batch_size) % per_step:
            raise RunOptionsError(
                f"global_batch_size {global_batch_size} is not a multiple of world size "
                f"{world_size} x batch_size {per_process} = {per_step}"
            )
        return int(global_batch_size) // per_step
    if global_batch_seconds:
        dynamic = kwargs.get("dynamic_batching") or {}
        seconds = dynamic.get("max_batch_length") or dynamic.get("max_batch_seconds")
        if not seconds:
            raise RunOptionsError(
                "grad_accumulation_factor auto with global_batch_seconds needs dynamic_batching "
                "with max_batch_length (seconds per batch)"
            )
        ratio = float(global_batch_seconds) / (world_size * float(seconds))
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-6:
            raise RunOptionsError(
                f"global_batch_seconds {global_batch_seconds} is not a multiple of world size "
                f"{world_size} x max_batch_length {seconds}"
            )
        return int(round(ratio))
    raise RunOptionsError("grad_accumulation_factor auto needs global_batch_size or global_batch_seconds")


def _global_target(global_batch_size, global_batch_seconds) -> str:
    """``"global_batch_size 32"``, ``"global_batch_seconds 600"`` or ``""`` when neither is set."""
    if global_batch_size:
        return f"global_batch_size {global_batch_size}"
    if global_batch_seconds:
        return f"global_batch_seconds {global_batch_seconds:g}"
    return ""


def describe_effective_batch(world_size: int, loader_kwargs: Optional[dict], accumulation: int) -> str:
    """``"2 processes x 8 items x 4 accumulation = 64 items per optimizer step"``"""
    kwargs = loader_kwargs or {}
    if kwargs.get("batch_size"):
        per = int(kwargs["batch_size"])
        return (
            f"{world_size} process(es) x {per} items x {accumulation} accumulation = "
            f"{world_size * per * accumulation} items per optimizer step"
        )
    dynamic = kwargs.get("dynamic_batching") or {}
    if dynamic.get("max_batch_length"):
        seconds = float(dynamic["max_batch_length"])
        return (
            f"{world_size} process(es) x {seconds:g}s dynamic batches x {accumulation} accumulation = "
            f"{world_size * seconds * accumulation:g}s of audio per optimizer step"
        )
    return f"{world_size} process(es) x loader batches x {accumulation} accumulation"


def optimizer_steps_per_epoch(batches_per_epoch: int, accumulation: int) -> int:
    """Optimizer steps in an epoch of ``batches_per_epoch`` micro-batches (per process): an epoch ending in
    the middle of a cycle still steps on what it accumulated.

    Example:
        >>> optimizer_steps_per_epoch(10, 4)
        3
    """
    return max(1, -(-int(batches_per_epoch) // int(accumulation)))


def total_optimizer_steps(
    epochs: int, batches_per_epoch: int, accumulation: int, step_limit: Optional[int] = None
) -> int:
    """The optimizer steps of a whole run (every epoch of the counter, from the first), capped by
    ``step_limit`` (``--optimizer_step_limit``).

    Example:
        >>> total_optimizer_steps(epochs=6, batches_per_epoch=40, accumulation=4)
        60
    """
    total = int(epochs) * optimizer_steps_per_epoch(batches_per_epoch, accumulation)
    return min(total, int(step_limit)) if step_limit else total
