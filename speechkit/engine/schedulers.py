"""Learning-rate schedules, declared in YAML and stepped by :class:`speechkit.Brain`.

Each scheduler has an ``interval``: ``"batch"`` schedules are stepped after every optimizer step, ``"epoch"``
schedules after the validation stage (with the validation loss as the metric). They are recoverable
(``state_dict``/``load_state_dict``), so a resumed run continues the same schedule. Give one to a recipe
as the top-level key ``lr_scheduler``::

    lr_scheduler: !new:speechkit.schedulers.NoamScheduler
        lr_initial: 0.001
        n_warmup_steps: 2500

A schedule that needs the length of the run (``WarmupCosineScheduler`` or ``TriStageScheduler`` without
``total_steps``) gets it from :class:`speechkit.Brain` when ``fit`` starts, through
:meth:`Scheduler.set_total_steps`: the number of optimizer steps of the whole run (epochs x optimizer steps
per epoch, with the world size and the gradient accumulation of this run, ``--grad_accumulation_factor
auto`` included). The count is the same when a run
resumes, so a resumed schedule continues where it stopped.

Example:
    >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    >>> sched = WarmupCosineScheduler(lr_peak=1.0, warmup_steps=2, total_steps=4)
    >>> [round(sched.step(opt)[1], 3) for _ in range(4)]
    [1.0, 0.5, 0.0, 0.0]
"""

from __future__ import annotations

import logging
import math
from typing import Optional

import torch

logger = logging.getLogger(__name__)


def set_learning_rate(optimizer: torch.optim.Optimizer, lr: float) -> None:
    for group in optimizer.param_groups:
        group["lr"] = lr


class Scheduler:
    """Base class: ``lr_for(steps)`` gives the rate after ``steps`` calls of :meth:`step`."""

    interval = "batch"

    def __init__(self):
        self.steps = 0

    def lr_for(self, steps: int) -> float:
        raise NotImplementedError

    def current_lr(self) -> float:
        return self.lr_for(self.steps)

    def set_total_steps(self, total_steps: int) -> None:
        """Told by Brain at fit start: the run makes ``total_steps`` optimizer steps. Schedules that do not
        depend on the run's length ignore it."""

    def apply(self, optimizer: torch.optim.Optimizer) -> None:
        """Set the optimizer's rate to the schedule's current value (at fit start and after recovery)."""
        set_learning_rate(optimizer, self.current_lr())

    def step(self, optimizer: torch.optim.Optimizer, metric: Optional[float] = None) -> tuple:
        """Advance one step (batch or epoch) and set the new rate; returns ``(old_lr, new_lr)``."""
        old = optimizer.param_groups[0]["lr"]
        self.steps += 1
        new = self.current_lr()
        set_learning_rate(optimizer, new)
        return old, new

    def state_dict(self) -> dict:
        return {"steps": self.steps}

    def load_state_dict(self, state: dict) -> None:
        self.steps = int(state["steps"])


def _warn_fixed_length(schedule: Scheduler, run_steps: int) -> None:
    """Say that a ``total_steps`` written in the YAML does not fit the run (another world size, batch size,
    accumulation or number of epochs than it was computed for), and what the last update's rate will be."""
    last = schedule.lr_for(max(0, run_steps - 1))
    logger.warning(
        "%s was given total_steps %d but this run makes %d optimizer steps: its last update uses lr %.4g "
        "(%.0f%% of lr_peak). Leave total_steps out of the YAML to fit the schedule to the run.",
        type(schedule).__name__, schedule.total_steps, run_steps, last, 100.0 * last / schedule.lr_peak)


class NoamScheduler(Scheduler):
    """Linear warmup then inverse square root decay (the Transformer schedule); peaks at ``lr_initial``.

    ``lr(s) = lr_initial * min(s / warmup, sqrt(warmup / s))`` for step ``s >= 1`` (``s`` counts from 1,
    so the first update already uses a small non-zero rate).
    """

    interval = "batch"

    def __init__(self, lr_initial: float, n_warmup_steps: int):
        super().__init__()
        if n_warmup_steps < 1:
            raise ValueError("n_warmup_steps must be >= 1")
        self.lr_initial, self.n_warmup_steps = float(lr_initial), int(n_warmup_steps)

    def lr_for(self, steps: int) -> float:
        s = steps + 1  # the rate used by the next update
        return self.lr_initial * min(s / self.n_warmup_steps, math.sqrt(self.n_warmup_steps / s))


class WarmupCosineScheduler(Scheduler):
    """Linear warmup from 0 to ``lr_peak`` over ``warmup_steps``, then cosine decay to ``lr_min`` at
    ``total_steps`` (held there after).

    Leave ``total_steps`` out in a recipe's YAML and Brain fills it in when ``fit`` starts
    (:meth:`set_total_steps`).
    """

    interval = "batch"

    def __init__(
        self, lr_peak: float, warmup_steps: int, total_steps: Optional[int] = None, lr_min: float = 0.0
    ):
        super().__init__()
        if total_steps is not None and total_steps <= warmup_steps:
            raise ValueError("total_steps must exceed warmup_steps")
        self.lr_peak, self.lr_min = float(lr_peak), float(lr_min)
        self.warmup_steps = self.requested_warmup_steps = int(warmup_steps)
        self.total_steps = None if total_steps is None else int(total_steps)
        self.length_from_run = total_steps is None

    def set_total_steps(self, total_steps: int) -> None:
        """Fit the schedule to a run of ``total_steps`` optimizer steps (unless ``total_steps`` was given).

        The cosine ends one step after the last update, so that the last update still learns (``lr_min``
        may be 0). A run shorter than four warmups (a smoke test, ``--number_of_epochs 1``) shortens the
        warmup to a quarter of the run, so that the peak is reached at all.
        """
        if not self.length_from_run:
            if self.total_steps not in (int(total_steps), int(total_steps) + 1):
                _warn_fixed_length(self, int(total_steps))
            return
        self.total_steps = int(total_steps) + 1
        self.warmup_steps = min(self.requested_warmup_steps, max(1, self.total_steps // 4))
        if self.warmup_steps != self.requested_warmup_steps:
            logger.info("warmup_steps %d -> %d for a run of %d optimizer steps",
                        self.requested_warmup_steps, self.warmup_steps, total_steps)

    def lr_for(self, steps: int) -> float:
        if self.total_steps is None:
            raise ValueError(
                "WarmupCosineScheduler has no total_steps: give it in the YAML, or let Brain.fit set it"
            )
        s = steps + 1
        if s <= self.warmup_steps:
            return self.lr_peak * s / self.warmup_steps
        progress = min(1.0, (s - self.warmup_steps) / (self.total_steps - self.warmup_steps))
        return self.lr_min + 0.5 * (self.lr_peak - self.lr_min) * (1 + math.cos(math.pi * progress))


class TriStageScheduler(Scheduler):
    """Warmup, hold, decay (wav2vec 2.0 fine-tuning): over ``total_steps`` split by ``phase_ratio``, the rate
    rises linearly from ``init_lr_scale * lr_peak`` to ``lr_peak``, holds, then decays exponentially to
    ``final_lr_scale * lr_peak`` (held after ``total_steps``).

    Leave ``total_steps`` out in a recipe's YAML and Brain fills it in when ``fit`` starts
    (:meth:`set_total_steps`: epochs x optimizer steps per epoch, world size and accumulation included).

    Example:
        >>> sched = TriStageScheduler(lr_peak=1.0, total_steps=10, phase_ratio=(0.2, 0.4, 0.4))
        >>> [round(sched.lr_for(s), 3) for s in (0, 1, 2, 5, 9, 20)]
        [0.01, 0.505, 1.0, 1.0, 0.05, 0.05]
    """

    interval = "batch"

    def __init__(self, lr_peak: float, total_steps: Optional[int] = None, phase_ratio=(0.1, 0.4, 0.5),
                 init_lr_scale: float = 0.01, final_lr_scale: float = 0.05):
        super().__init__()
        if len(phase_ratio) != 3 or abs(sum(phase_ratio) - 1.0) > 1e-6 or min(phase_ratio) < 0:
            raise ValueError(f"phase_ratio must be three fractions summing to 1, got {list(phase_ratio)}")
        if total_steps is not None and int(total_steps) < 1:
            raise ValueError(f"total_steps must be >= 1, got {total_steps}")
        self.lr_peak, self.phase_ratio = float(lr_peak), tuple(float(r) for r in phase_ratio)
        self.init_lr, self.final_lr = self.lr_peak * init_lr_scale, self.lr_peak * final_lr_scale
        self.total_steps: Optional[int] = None
        self.length_from_run = total_steps is None
        if total_steps is not None:
            self._split(int(total_steps))

    def _split(self, total_steps: int) -> None:
        self.total_steps = total_steps
        self.warmup = int(round(self.phase_ratio[0] * total_steps))
        self.hold = int(round(self.phase_ratio[1] * total_steps))
        self.decay = max(1, total_steps - self.warmup - self.hold)

    def set_total_steps(self, total_steps: int) -> None:
        """Split a run of ``total_steps`` optimizer steps into the three phases (unless ``total_steps`` was
        given)."""
        if self.length_from_run:
            self._split(max(1, int(total_steps)))
        elif self.total_steps != int(total_steps):
            _warn_fixed_length(self, int(total_steps))

    def lr_for(self, steps: int) -> float:
        if self.total_steps is None:
            raise ValueError(
                "TriStageScheduler has no total_steps: give it in the YAML, or let Brain.fit set it"
            )
        if steps < self.warmup:
            return self.init_lr + (self.lr_peak - self.init_lr) * steps / self.warmup
        steps -= self.warmup
        if steps < self.hold:
            return self.lr_peak
        progress = min(1.0, (steps - self.hold) / max(1, self.decay - 1))
        return self.lr_peak * (self.final_lr / self.lr_peak) ** progress


class NewBobScheduler(Scheduler):
    """Reduce on plateau: multiply the rate by ``annealing_factor`` when the metric (lower is better) improved
    by less than ``improvement_threshold`` (relative) for more than ``patience`` epochs.

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> sched = NewBobScheduler(initial_value=1.0)
        >>> sched.step(opt, 1.0), sched.step(opt, 1.0)
        ((1.0, 1.0), (1.0, 0.5))
    """

    interval = "epoch"

    def __init__(
        self,
        initial_value: float,
        annealing_factor: float = 0.5,
        improvement_threshold: float = 0.0025,
        patience: int = 0,
        min_value: float = 0.0,
    ):
        super().__init__()
        self.lr = float(initial_value)
        self.annealing_factor, self.improvement_threshold = (
            float(annealing_factor),
            float(improvement_threshold),
        )
        self.patience, self.min_value = int(patience), float(min_value)
        self.best: Optional[float] = None
        self.waited = 0

    def current_lr(self) -> float:
        return self.lr

    def step(self, optimizer: torch.optim.Optimizer, metric: Optional[float] = None) -> tuple:
        if metric is None:
            raise ValueError("NewBobScheduler.step needs the validation metric")
        old = self.lr
        self.steps += 1
        if self.best is not None:
            improvement = (self.best - metric) / abs(self.best) if self.best else self.best - metric
            if improvement < self.improvement_threshold:
                self.waited += 1
                if self.waited > self.patience:
                    self.lr, self.waited = max(self.min_value, self.lr * self.annealing_factor), 0
            else:
                self.waited = 0
        self.best = metric if self.best is None else min(self.best, metric)
        set_learning_rate(optimizer, self.lr)
        return old, self.lr

    def state_dict(self) -> dict:
        return {"steps": self.steps, "lr": self.lr, "best": self.best, "waited": self.waited}

    def load_state_dict(self, state: dict) -> None:
        self.steps, self.lr, self.best, self.waited = (
            int(state["steps"]),
            float(state["lr"]),
            state["best"],
            int(state["waited"]),
        )


#: The plateau schedule under its PyTorch-style name.
ReduceLROnPlateau = NewBobScheduler
