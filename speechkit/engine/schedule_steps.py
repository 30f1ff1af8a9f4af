"""When the training loop moves the learning rate: a schedule of :mod:`speechkit.schedulers` says its
``interval``, ``"batch"`` (after every optimizer step) or ``"epoch"`` (after validation, with the validation
loss: what a plateau schedule watches). A schedule with ``apply`` sets the optimizer's rate once when ``fit``
starts (after recovery: a resumed run continues the schedule where it stood).

Example:
    >>> import torch
    >>> model = torch.nn.Linear(2, 1)
    >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    >>> step_after_batch(None, optimizer)  # no schedule: the rate stays
    >>> current_lr(optimizer)
    0.5
"""

from __future__ import annotations

import logging
from typing import Any, Optional

logger = logging.getLogger(__name__)


def start_schedule(lr_scheduler: Any, optimizer: Any) -> None:
    """Give the optimizer the schedule's current rate (a schedule with ``apply``), before the first step."""
    if optimizer is not None and hasattr(lr_scheduler, "apply"):
        lr_scheduler.apply(optimizer)


def step_after_batch(lr_scheduler: Any, optimizer: Any) -> None:
    """After an optimizer step: a per-batch schedule moves the rate."""
    if getattr(lr_scheduler, "interval", None) == "batch":
        lr_scheduler.step(optimizer)


def step_after_epoch(lr_scheduler: Any, optimizer: Any, metric: float) -> None:
    """After the epoch's last stage, with its loss: a per-epoch schedule moves the rate (logged if so)."""
    if getattr(lr_scheduler, "interval", None) == "epoch":
        old, new = lr_scheduler.step(optimizer, metric)
        if old != new:
            logger.info("Learning rate %.4g -> %.4g", old, new)


def current_lr(optimizer: Any) -> Optional[float]:
    """The first parameter group's rate (``None`` without an optimizer)."""
    return optimizer.param_groups[0]["lr"] if optimizer is not None else None
