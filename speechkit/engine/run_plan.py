"""The plan of a training run, made once when ``fit`` starts, before anything is recovered: the gradient
accumulation factor, the optimizer steps the whole run will make (given to the LR schedule, so that a
warmup-then-decay ends where the run ends), the effective batch, and the optimization step built from them.

Example:
    >>> from speechkit.checkpoints import EpochCounter
    >>> plan = plan_run(RunOptions(grad_accumulation_factor=2), world_size=1, loader_kwargs={"batch_size": 4},
    ...                 train_loader=range(10), epoch_counter=EpochCounter(3))
    >>> plan.accumulation, plan.total_optimizer_steps
    (2, 15)
    >>> plan.effective_batch
    '1 process(es) x 4 items x 2 accumulation = 8 items per optimizer step'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from speechkit.engine.accumulation import (
    describe_effective_batch,
    resolve_accumulation,
    total_optimizer_steps,
)
from speechkit.engine.optimization import OptimizationStep
from speechkit.engine.precision import Precision
from speechkit.errors import RunOptionsError
from speechkit.experiment.run_options import RunOptions


@dataclass(frozen=True)
class RunPlan:
    """What ``fit`` decided before its first batch.

    Attributes:
        accumulation: micro-batches per optimizer step.
        total_optimizer_steps: of the whole run (``None`` with an iterable loader or a custom epoch counter:
            the LR schedule must then be given its length).
        effective_batch: the log's line, world size x per-process batch x accumulation.
        world_size: the number of processes.
    """

    accumulation: int
    total_optimizer_steps: Optional[int]
    effective_batch: str
    world_size: int

    def optimization_step(self, optimizers: dict, precision: Precision,
                          run_opts: RunOptions) -> OptimizationStep:
        """The optimization step of this run (accumulation, clipping, the non-finite guard)."""
        return OptimizationStep(
            optimizers,
            precision,
            self.accumulation,
            run_opts.max_grad_norm,
            run_opts.nonfinite_patience,
            run_opts.skip_nonfinite_grads,
            self.world_size > 1,
        )


def plan_run(run_opts: RunOptions, world_size: int, loader_kwargs: Optional[dict], train_loader: Any,
             epoch_counter: Any, lr_scheduler: Any = None, early_stopping: Any = None,
             has_validation: bool = True) -> RunPlan:
    """Resolve the accumulation, count the run's optimizer steps and give the count to ``lr_scheduler``
    (when it has ``set_total_steps``). Counted before recovery: the loader's length is then a whole epoch's.

    Raises:
        RunOptionsError: early stopping without a validation set, or an accumulation factor and a global
            batch that disagree.
    """
    if early_stopping is not None and not has_validation:
        raise RunOptionsError("option 'early_stopping_patience' watches a validation value: fit() needs "
                              "a valid_set")
    accumulation = resolve_accumulation(
        run_opts.grad_accumulation_factor,
        world_size,
        loader_kwargs,
        run_opts.global_batch_size,
        run_opts.global_batch_seconds,
    )
    total = _count_optimizer_steps(run_opts, train_loader, epoch_counter, accumulation)
    if total is not None and hasattr(lr_scheduler, "set_total_steps"):
        lr_scheduler.set_total_steps(total)
    effective = describe_effective_batch(world_size, loader_kwargs, accumulation)
    return RunPlan(accumulation, total, effective, world_size)


def _count_optimizer_steps(run_opts: RunOptions, train_loader: Any, epoch_counter: Any,
                           accumulation: int) -> Optional[int]:
    batches, epochs = loader_length(train_loader), getattr(epoch_counter, "limit", None)
    if batches is None or epochs is None:
        return None  # an iterable loader or a custom counter
    if run_opts.debug:
        batches = min(batches, run_opts.debug_batches)
        epochs = min(epochs, run_opts.debug_epochs)
    return total_optimizer_steps(epochs, batches, accumulation, run_opts.optimizer_step_limit)


def loader_length(loader: Any) -> Optional[int]:
    """``len(loader)``, or ``None`` for a loader without a length (an iterable dataset's)."""
    try:
        return len(loader)
    except TypeError:
        return None
