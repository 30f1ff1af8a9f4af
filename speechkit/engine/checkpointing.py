"""Brain's checkpoint policy: when a run saves, which checkpoints it keeps, what it recovers and what an
evaluation loads. The :class:`~speechkit.checkpoints.Checkpointer` writes and reads; this module decides.

- fit start: Brain's own objects join the recoverables, the folder is locked for this run, the newest
  checkpoint is recovered and the optimizers' hyperparameters follow ``--resume_optimizer_hparams``;
- within an epoch: a checkpoint every ``--ckpt_interval_steps`` optimizer steps or ``--ckpt_interval_minutes``
  (the clock agreed on by every rank), and one on preemption; only the newest intra-epoch one is kept;
- end of epoch: unless ``on_stage_end`` saved one itself, a checkpoint keeping the best ``--ckpt_keep`` by
  loss (and by the value early stopping watches);
- evaluation: the checkpoint ``--eval_checkpoint`` names, else the best by a key (the newest without one),
  then the average of the N best with ``--average_checkpoints N``.

The checkpointer and the run options are passed to each call, as the caller holds them then (a recipe
may set ``brain.checkpointer`` or ``brain.run_opts`` after building its Brain); a ``None`` checkpointer
means no checkpoints: nothing is saved or loaded, the collectives still run on every rank.

Example:
    >>> policy = CheckpointPolicy("cpu")
    >>> every_two_steps = RunOptions(ckpt_interval_steps=2)
    >>> policy.save_if_due(None, every_two_steps, epoch=1, optimizer_steps=4, preemption=None)
    False
"""

from __future__ import annotations

import logging
import time
from typing import Any, Optional

from speechkit.checkpoints.averaging import load_average
from speechkit.checkpoints.checkpointer import Checkpoint, Checkpointer, read_checkpoint
from speechkit.checkpoints.selection import load_module_weights
from speechkit.distributed.signals import any_rank
from speechkit.engine.resume import optimizer_hyperparameters, reconcile_optimizers
from speechkit.errors import EXIT_INTERRUPTED, EXIT_PREEMPTED, RunOptionsError
from speechkit.experiment.run_options import RunOptions

logger = logging.getLogger(__name__)


class CheckpointPolicy:
    """When to save and what to load, from the run options (a
    :class:`~speechkit.experiment.run_options.RunOptions`); holds the intra-epoch clock and the count of
    saves before ``on_stage_end`` (did the hook save a checkpoint itself?).

    Args:
        device: where the rank-agreement flags of the clock live (the run's device).
    """

    def __init__(self, device: Any):
        self.device = device
        self._last_save_clock = time.monotonic()
        self._saves_before_hook = 0

    def restart_clock(self) -> None:
        """The intra-epoch timer counts from now (fit start: compiling and wrapping took no training time)."""
        self._last_save_clock = time.monotonic()

    def recover(self, checkpointer: Optional[Checkpointer], run_opts: RunOptions, recoverables: dict,
                optimizers: dict, lr_scheduler: Any) -> Optional[Checkpoint]:
        """Add ``recoverables`` the checkpointer lacks, lock its folder, recover the newest checkpoint and
        reconcile the optimizers' hyperparameters with the YAML's; returns the checkpoint recovered."""
        if checkpointer is None:
            return None
        checkpointer.add_missing_recoverables(recoverables)
        from_hparams = optimizer_hyperparameters(optimizers)
        checkpointer.acquire_writer_lock()
        recovered = checkpointer.recover_if_possible()
        if recovered is not None:
            policy = run_opts.resume_optimizer_hparams
            scheduled = ("lr",) if lr_scheduler is not None else ()  # the scheduler sets lr anyway
            reconcile_optimizers(optimizers, from_hparams, policy, recovered.path, scheduled)
        return recovered

    def save_if_due(self, checkpointer: Optional[Checkpointer], run_opts: RunOptions, epoch: int,
                    optimizer_steps: int, preemption: Any) -> bool:
        """After an optimizer step: save an intra-epoch checkpoint when the interval (steps or minutes) is
        due or a preemption signal came (on any rank); returns whether one came (then the run must stop)."""
        every_steps, every_minutes = run_opts.ckpt_interval_steps, run_opts.ckpt_interval_minutes
        due_by_time = every_minutes > 0 and time.monotonic() - self._last_save_clock >= every_minutes * 60
        due_by_time = any_rank(due_by_time, self.device) if every_minutes > 0 else False
        preempted = preemption.requested() if preemption is not None else False
        due = due_by_time or (every_steps > 0 and optimizer_steps % every_steps == 0)
        if (due or preempted) and checkpointer is not None:
            checkpointer.save_and_keep_only(
                meta={"intra_epoch": True},
                end_of_epoch=False,
                num_to_keep=1,
                ckpt_predicate=lambda c: not c.end_of_epoch,
                epoch=epoch,
                step=optimizer_steps,
            )
            self._last_save_clock = time.monotonic()
        return preempted

    def before_stage_end_hook(self, checkpointer: Optional[Checkpointer]) -> None:
        """Called just before the epoch's last ``on_stage_end``: a save counted after it is the hook's own."""
        self._saves_before_hook = _saves(checkpointer)

    def save_end_of_epoch(self, checkpointer: Optional[Checkpointer], run_opts: RunOptions, epoch: int,
                          meta: dict, optimizer_steps: int, early_stopping: Any = None) -> None:
        """The end-of-epoch checkpoint with ``meta`` (loss and metrics), keeping the best ``--ckpt_keep`` by
        loss and by early stopping's value; skipped when ``on_stage_end`` saved one itself."""
        if checkpointer is None or _saves(checkpointer) != self._saves_before_hook:
            return
        min_keys, max_keys = ["loss"], []
        if early_stopping is not None:  # keep the best epoch by the watched value too
            extra_min, max_keys = early_stopping.keep_keys()
            min_keys += [key for key in extra_min if key not in min_keys]
        checkpointer.save_and_keep_only(
            meta=_numbers(meta),
            end_of_epoch=True,
            num_to_keep=run_opts.ckpt_keep,
            min_keys=min_keys,
            max_keys=max_keys,
            epoch=epoch,
            step=optimizer_steps,
        )

    def load_for_evaluation(self, checkpointer: Optional[Checkpointer], run_opts: RunOptions, modules: dict,
                            min_key: Optional[str] = None, max_key: Optional[str] = None) -> None:
        """Load the weights to evaluate into ``modules`` (or the checkpointer's recoverables): the checkpoint
        ``--eval_checkpoint`` names, else the best by ``min_key``/``max_key`` (averaged over the N best with
        ``--average_checkpoints N``); without a checkpoint the current weights stay, with a warning."""
        if run_opts.eval_checkpoint:
            _load_named(checkpointer, run_opts, modules, run_opts.eval_checkpoint)
        elif checkpointer is not None:
            found = checkpointer.recover_if_possible(min_key=min_key, max_key=max_key)
            if found is None:
                logger.warning("No checkpoint to evaluate in %s; evaluating the current weights",
                               checkpointer.checkpoints_dir)
            elif run_opts.average_checkpoints > 1:
                load_average(checkpointer, run_opts.average_checkpoints, min_key, max_key)


def _load_named(checkpointer: Optional[Checkpointer], run_opts: RunOptions, modules: dict, path: str) -> None:
    if run_opts.average_checkpoints > 1:
        raise RunOptionsError("--eval_checkpoint and --average_checkpoints both choose the weights to "
                              "evaluate: give one (an averaged checkpoint is written by speechkit "
                              "average-checkpoints)")
    checkpoint = read_checkpoint(path)
    if checkpointer is not None and "averaged" not in checkpoint.info:
        checkpointer.load_checkpoint(checkpoint)
    else:  # an averaged checkpoint holds the module weights only
        owner = checkpointer.recoverables if checkpointer is not None else modules
        load_module_weights(dict(owner), checkpoint)
    logger.info("Evaluating the checkpoint %s (--eval_checkpoint)", checkpoint.path)


def exit_after_signal(preemption: Any, saved: bool, epoch: int, train_position: int) -> None:
    """End the process after a preemption signal or a first Ctrl-C (on any rank), saying what was saved
    where; the exit status tells a scheduler which (:data:`~speechkit.errors.EXIT_PREEMPTED`,
    :data:`~speechkit.errors.EXIT_INTERRUPTED`)."""
    state = "checkpoint saved" if saved else "no checkpointer, nothing saved"
    position = f"epoch {epoch}, batch {train_position}" if train_position else f"end of epoch {epoch}"
    # A signal on another rank stops this one too: each rank says what it saw.
    interrupted = preemption.interrupted
    cause = "Interrupted (Ctrl-C)" if interrupted else "Preempted"
    logger.warning("%s: %s at %s; run the same command again to resume", cause, state, position)
    preemption.uninstall()
    raise SystemExit(EXIT_INTERRUPTED if interrupted else EXIT_PREEMPTED)


def _saves(checkpointer: Optional[Checkpointer]) -> int:
    return checkpointer.saves if checkpointer is not None else 0


def _numbers(meta: dict) -> dict:
    """The values of ``meta`` a checkpoint's JSON can hold: numbers (tensors read out) and strings."""
    return {
        k: float(v) if isinstance(v, (int, float)) or hasattr(v, "item") else v
        for k, v in meta.items()
        if isinstance(v, (int, float, str)) or hasattr(v, "item")
    }
