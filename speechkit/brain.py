"""Brain: the fit and evaluate loops, delegating everything else to small collaborators.

A recipe subclasses :class:`Brain` and writes ``compute_forward(batch, stage)`` and
``compute_objectives(predictions, batch, stage)`` (a loss averaged over the batch's items). Brain holds the
hooks and the loops; devices and processes (:mod:`speechkit.distributed`) and the rest live in
:mod:`speechkit.engine`: the run's plan (``run_plan``), precision, the optimization step, loaders, progress,
the LR schedule's steps (``schedule_steps``), the loop's counters (``counters``) and when to save and load
checkpoints (``checkpointing``; :mod:`speechkit.checkpoints` writes and reads them).

Example:
    >>> from speechkit.checkpoints import EpochCounter
    >>> class Regression(Brain):
    ...     def compute_forward(self, batch, stage):
    ...         return self.modules.model(batch[0].data.to(self.device))
    ...     def compute_objectives(self, predictions, batch, stage):
    ...         return torch.nn.functional.mse_loss(predictions, batch[1].data.to(self.device))
    >>> brain = Regression({"model": torch.nn.Linear(3, 1)}, lambda params: torch.optim.SGD(params, lr=0.1))
    >>> x = torch.randn(16, 3); train_set = torch.utils.data.TensorDataset(x, x.sum(dim=1, keepdim=True))
    >>> brain.fit(EpochCounter(20), train_set, train_set, {"batch_size": 4})
    >>> brain.evaluate(train_set, test_loader_kwargs={"batch_size": 4}) < 1e-3   # the sum is learnt
    True
"""

from __future__ import annotations

import logging
import os
from types import SimpleNamespace
from typing import Any, Optional

import torch

from speechkit import distributed
from speechkit.augment.core import item_seeds
from speechkit.distributed.signals import TRAINING_SIGNALS, PreemptionHandler
from speechkit.engine.checkpointing import CheckpointPolicy, exit_after_signal
from speechkit.engine.counters import LoopCounters, counter_attribute
from speechkit.engine.device_speed import build_optimizer, is_cuda, loader_options_for
from speechkit.engine.early_stopping import EarlyStopping
from speechkit.engine.loaders import batch_items, build_loader, describe_data, move_to
from speechkit.engine.modules import (
    freeze_modules,
    gradient_sync,
    note_weight_origins,
    set_training_modes,
    trainable_parameters,
    training_modules,
)
from speechkit.engine.optimization import OptimizationStep
from speechkit.engine.precision import Precision
from speechkit.engine.progress import ProgressBar, StageStats, TrainLog, summary_line, train_log_path
from speechkit.engine.rng import RandomStates
from speechkit.engine.run_plan import loader_length, plan_run
from speechkit.engine.schedule_steps import current_lr, start_schedule, step_after_batch, step_after_epoch
from speechkit.engine.tensorboard import TensorBoardLog
from speechkit.errors import DataError
from speechkit.experiment.hparams_keys import check_keys_read
from speechkit.experiment.run_options import RunOptions
from speechkit.stage import Stage
from speechkit.threads import ThreadPlan, configure_threads, local_processes

logger = logging.getLogger(__name__)


class Brain:
    """Trains and evaluates ``modules`` with the recipe's ``compute_forward`` and ``compute_objectives``.

    Args:
        modules: ``{name: nn.Module}``, available as ``self.modules`` (moved to ``self.device``).
        opt_class: called with the parameters to build the optimizer (``!name:torch.optim.Adam`` in YAML).
        hparams: the loaded hyperparameters, available as ``self.hparams.<key>``; top-level keys named like a
            run option (``precision: bf16``) set that option unless the command line did.
        run_opts: :class:`~speechkit.experiment.run_options.RunOptions` (or a dict of option values).
        checkpointer: a :class:`~speechkit.checkpoints.Checkpointer`; Brain adds the optimizer, scaler,
            scheduler, epoch counter, train loader, RNG states and its own counters to it.
        trainable_modules: names of the modules that learn (default: the hparams key ``trainable_modules``,
            else all). The others are frozen: out of the optimizer, never DDP-wrapped, and in eval mode
            while training (no dropout, no running statistics updated), so their weights stay bit-identical.
        lr_scheduler: a scheduler of :mod:`speechkit.schedulers` (default: the hparams key ``lr_scheduler``).
            A schedule needing the run's length gets its total optimizer steps when ``fit`` starts.

    Hooks a subclass may override: ``on_fit_start``, ``init_optimizers``, ``on_stage_start``,
    ``on_stage_end``, ``on_evaluate_start``, ``on_fit_batch_start(batch)`` and
    ``on_fit_batch_end(batch, outputs, loss, should_step)``.
    """

    def __init__(
        self,
        modules: Optional[dict] = None,
        opt_class: Any = None,
        hparams: Optional[dict] = None,
        run_opts: Any = None,
        checkpointer: Any = None,
        trainable_modules: Optional[list] = None,
        lr_scheduler: Any = None,
    ):
        source = getattr(hparams, "path", "")  # the YAML file, when loaded by speechkit.experiment.hparams
        hparams = dict(hparams or {})
        # A key the methods read but the YAML lacks fails now, not at the first validation.
        check_keys_read(type(self), hparams, stop=Brain, source=source)
        if run_opts is None:
            run_opts = RunOptions()
        elif isinstance(run_opts, dict):
            run_opts = RunOptions(**run_opts, explicit=frozenset(run_opts))
        self.run_opts = run_opts.merged_with(hparams)
        self.hparams = SimpleNamespace(**hparams)
        self.dist = distributed
        self.context = self.dist.init(self.run_opts)  # idempotent; the recipe may have called it already
        self.device = self.context.device
        self.modules = torch.nn.ModuleDict(modules or {}).to(self.device)
        self._raw_modules = self.modules  # evaluation always runs on these (never DDP-wrapped)
        self._wrapped = self.modules  # the training view (wrapped for several processes at fit start)
        if trainable_modules is None:
            trainable_modules = hparams.get("trainable_modules")
        self.trainable_modules = freeze_modules(self._raw_modules, trainable_modules)
        self._all_trainable = trainable_modules is None
        self.opt_class = opt_class
        self.checkpointer = checkpointer
        self.precision = Precision(self.run_opts.precision, self.device)
        self.eval_precision = Precision(self.run_opts.eval_precision, self.device)
        self.optimizer = None
        self.optimizers_dict: dict = {}
        self.optimization: Optional[OptimizationStep] = None
        self.lr_scheduler = lr_scheduler if lr_scheduler is not None else hparams.get("lr_scheduler")
        self.total_optimizer_steps: Optional[int] = None  # of the whole run; known when fit starts
        self.counters = LoopCounters()
        self.checkpointing = CheckpointPolicy(self.device)
        self.rng_states = RandomStates()
        self.preemption = PreemptionHandler(TRAINING_SIGNALS, device=self.device)
        self.thread_plan: Optional[ThreadPlan] = None  # chosen when fit or evaluate starts
        self.train_log = TrainLog(train_log_path(self.run_opts, hparams), self.context.is_main)
        self.tensorboard = TensorBoardLog(self.run_opts.tensorboard, self.context.is_main)
        self.train_loader: Any = None
        self.valid_loader: Any = None
        self.epoch_counter: Any = None
        self.lr_in_epoch: Optional[float] = None  # the rate at the start of the training epoch
        self.train_loss, self.train_metrics = None, None  # of the last training epoch
        self._last_in_epoch = False
        self._stop = False
        self.early_stopping = EarlyStopping.from_options(self.run_opts)

    # --- recipe interface ---------------------------------------------------------------------------------
    def compute_forward(self, batch: Any, stage: Stage) -> Any:
        raise NotImplementedError("a Brain subclass must define compute_forward(batch, stage)")

    def compute_objectives(self, predictions: Any, batch: Any, stage: Stage) -> torch.Tensor:
        raise NotImplementedError("a Brain subclass must define "
                                  "compute_objectives(predictions, batch, stage)")

    def on_fit_start(self) -> None:
        """Compile, wrap for several processes, build the optimizers, register recoverables, recover.

        The checkpoints folder is locked for this run first (a second run on it stops here). After recovery
        the optimizers' hyperparameters follow ``--resume_optimizer_hparams``.
        """
        self._compile_and_wrap()
        self.init_optimizers()
        recoverables = {**self.optimizers_dict, "scaler": self.precision.scaler,
                        "lr_scheduler": self.lr_scheduler, "epoch_counter": self.epoch_counter,
                        "train_loader": self.train_loader, "rng_states": self.rng_states, "brain": self}
        self.checkpointing.recover(self.checkpointer, self.run_opts, recoverables, self.optimizers_dict,
                                   self.lr_scheduler)
        if self.train_position == 0:
            self.rng_states.forget_pending()  # recovered between epochs: nothing to re-align later

    def init_optimizers(self) -> None:
        """Build ``self.optimizer`` from ``opt_class`` over the trainable modules' parameters; override to
        build several (in ``optimizers_dict``)."""
        if self.opt_class is not None:
            if self._all_trainable:
                params = list(self._raw_modules.parameters())
            else:
                params = trainable_parameters(self._raw_modules, self.trainable_modules)
            self.optimizer = build_optimizer(self.opt_class, params, self.device)  # fused on CUDA
            self.optimizers_dict = {"optimizer": self.optimizer}

    def on_stage_start(self, stage: Stage, epoch: Optional[int] = None) -> None:
        """Called at the start of every stage (reset metric trackers here)."""

    def on_stage_end(self, stage: Stage, stage_loss: float, epoch: Optional[int] = None) -> Optional[dict]:
        """Called at the end of every stage with the loss averaged over all items of all processes.

        Return a dict of metrics to put in the stage summary (and in the automatic checkpoint's meta). Saving
        a checkpoint here (``self.checkpointer.save_and_keep_only``) replaces the automatic end-of-epoch one.
        """
        return None

    def on_evaluate_start(self, max_key: Optional[str] = None, min_key: Optional[str] = None) -> None:
        """Load the best checkpoint (by ``min_key``/``max_key``; the newest without a key); with
        ``--average_checkpoints N``, then the average of the N best checkpoints' module weights; with
        ``--eval_checkpoint PATH``, that checkpoint (a run's, or an averaged one's module weights)."""
        self.checkpointing.load_for_evaluation(self.checkpointer, self.run_opts, self._raw_modules, min_key,
                                               max_key)

    def on_fit_batch_start(self, batch: Any) -> None:
        """Called before each training batch (on the device already)."""

    def on_fit_batch_end(self, batch: Any, outputs: Any, loss: torch.Tensor, should_step: bool) -> None:
        """Called after each training batch with ``compute_forward``'s outputs and the (detached) loss;
        ``should_step`` says whether this batch closed an accumulation cycle (the optimizer stepped)."""

    # --- batches ------------------------------------------------------------------------------------------
    def fit_batch(self, batch: Any) -> torch.Tensor:
        """Forward, backward and, closing an accumulation cycle, an optimizer step; returns the loss."""
        batch = move_to(batch, self.device, is_cuda(self.device))
        self.on_fit_batch_start(batch)
        final = self.optimization.is_final_micro_batch(self._last_in_epoch)
        with gradient_sync(self._wrapped, self.dist, final):
            with self.precision.autocast():
                predictions = self.compute_forward(batch, Stage.TRAIN)
                loss = self.compute_objectives(predictions, batch, Stage.TRAIN)
            self.optimization.backward(loss)
        loss = loss.detach()
        self.tensorboard.micro_batch_loss(loss)
        if final:
            self.optimizer_step()
        self.on_fit_batch_end(batch, predictions, loss, final)
        return loss

    def optimizer_step(self) -> None:
        lr = current_lr(self.optimizer)  # the rate this step used
        self.optimization.step()
        self.optimizer_steps += 1
        self.tensorboard.step_values(self.optimizer_steps, lr)
        step_after_batch(self.lr_scheduler, self.optimizer)

    @torch.no_grad()
    def evaluate_batch(self, batch: Any, stage: Stage) -> torch.Tensor:
        batch = move_to(batch, self.device, is_cuda(self.device))
        with self.eval_precision.autocast():
            predictions = self.compute_forward(batch, stage)
            loss = self.compute_objectives(predictions, batch, stage)
        return loss.detach()

    def item_seeds(self, ids: Any) -> torch.Tensor:
        """``(batch,)`` seeds of a batch's items for :mod:`speechkit.augment`, from the run's seed, the epoch
        and the ids: the same draws whatever the batching, the processes, or a resumption mid-epoch."""
        epoch = getattr(self.epoch_counter, "current", 0) if self.epoch_counter is not None else 0
        return item_seeds(ids, epoch, int(self.run_opts.seed or 0))

    # --- loops --------------------------------------------------------------------------------------------
    def make_dataloader(self, data: Any, stage: Stage, loader_kwargs: Optional[dict] = None) -> Any:
        seed = int(self.run_opts.seed or 0)
        loader_kwargs = loader_options_for(self.device, loader_kwargs)  # pinned memory on CUDA
        return build_loader(data, stage, loader_kwargs, self.context.rank, self.context.world_size, seed)

    def fit(
        self,
        epoch_counter: Any,
        train_set: Any,
        valid_set: Any = None,
        train_loader_kwargs: Optional[dict] = None,
        valid_loader_kwargs: Optional[dict] = None,
    ) -> None:
        """Train for the epochs of ``epoch_counter``, validating after each; resumes from the last checkpoint.

        On SIGTERM/SIGUSR1 a checkpoint is saved at the next optimizer-step boundary and the process exits
        with :data:`speechkit.errors.EXIT_PREEMPTED`; running the same command resumes.
        """
        if self.run_opts.test_only:
            logger.info("--test_only: skipping training")
            return
        self._configure_threads(train_loader_kwargs)
        self.train_loader = self.make_dataloader(train_set, Stage.TRAIN, train_loader_kwargs)
        self._train_set_name = describe_data(train_set)
        self.valid_loader = self.make_dataloader(valid_set, Stage.VALID, valid_loader_kwargs)
        self.epoch_counter = epoch_counter
        plan = plan_run(self.run_opts, self.context.world_size, train_loader_kwargs, self.train_loader,
                        epoch_counter, self.lr_scheduler, self.early_stopping, self.valid_loader is not None)
        self.total_optimizer_steps = plan.total_optimizer_steps
        self.on_fit_start()
        untrained = note_weight_origins(self._raw_modules, self.trainable_modules)
        if untrained:  # checkpoints list them: `speechkit export` refuses to ship their initial weights
            logger.info("Frozen and never loaded (initial weights): %s", ", ".join(untrained))
        self.optimization = plan.optimization_step(self.optimizers_dict, self.precision, self.run_opts)
        self.optimization.load_state_dict(self.counters.recovered_optimization)
        start_schedule(self.lr_scheduler, self.optimizer)
        logger.info("Effective batch: %s", plan.effective_batch)
        with self.preemption, self.tensorboard:
            for epoch in epoch_counter:
                self._train_stage(epoch)
                self._end_of_epoch(epoch)
                debug_done = self.run_opts.debug and epoch >= self.run_opts.debug_epochs
                if self._stop or debug_done:
                    break

    def _train_stage(self, epoch: int) -> None:
        self.modules = self._wrapped
        set_training_modes(self.modules, self._raw_modules, self.trainable_modules)
        resuming = self.train_position > 0
        if not resuming:
            self.train_stats = StageStats()
            if hasattr(self.train_loader, "set_epoch"):
                self.train_loader.set_epoch(epoch)
        self.on_stage_start(Stage.TRAIN, epoch)
        self.lr_in_epoch = current_lr(self.optimizer)
        # After a mid-epoch recovery a loader's length counts only the batches left in the epoch.
        remaining = loader_length(self.train_loader)
        total = None if remaining is None else self.train_position + remaining
        limit = self.run_opts.debug_batches if self.run_opts.debug else None
        bar = ProgressBar(f"epoch {epoch} train", total, self._show_progress(), initial=self.train_position)
        iterator = iter(self.train_loader)
        if resuming:
            self.rng_states.reapply()  # creating the iterator drew random numbers the first run drew earlier
        self.step = self.train_position
        try:
            for batch in iterator:
                self.step += 1
                self._last_in_epoch = total is not None and self.step == total or limit == self.step
                loss = self.fit_batch(batch)
                self.train_stats.update(loss, batch_items(batch))
                self.train_position = self.step
                bar.update(self.train_stats)
                if self.optimization.micro_batches == 0 and self._after_optimizer_step(epoch):
                    break
                if limit is not None and self.step >= limit:
                    break
        finally:
            bar.close()
        if self.step == 0:  # before anything is logged or saved: 0 steps would write a checkpoint of nothing
            raise DataError(f"the training set {self._train_set_name} yielded no batch in epoch {epoch} (an "
                            "empty manifest, or every item filtered out or dropped by the batching)")
        self.optimization.discard()  # an unfinished cycle (early stop) must not leak into the next epoch
        self.train_position = 0
        lr_range = (self.lr_in_epoch, current_lr(self.optimizer))  # a warmup moves it a lot within one epoch
        loss = self.train_stats.gathered_average(self.dist.all_gather_object)
        if self.valid_loader is None:
            # The last stage of the epoch: step the schedule first, so that a save in the hook includes it.
            self._epoch_lr(loss)
            self.checkpointing.before_stage_end_hook(self.checkpointer)
        metrics = self.on_stage_end(Stage.TRAIN, loss, epoch)
        self.train_log.write(summary_line("train", epoch, loss, self.train_stats.duration, lr_range, metrics))
        self.tensorboard.stage_values("train", epoch, loss, metrics)
        self.train_loss, self.train_metrics = loss, metrics

    def _after_optimizer_step(self, epoch: int) -> bool:
        """Intra-epoch checkpoints, preemption and the step limit; returns True to stop the epoch."""
        steps = self.optimizer_steps
        if self.checkpointing.save_if_due(self.checkpointer, self.run_opts, epoch, steps, self.preemption):
            exit_after_signal(self.preemption, self.checkpointer is not None, epoch, self.train_position)
        limit = self.run_opts.optimizer_step_limit
        if limit is not None and self.optimizer_steps >= limit:
            logger.info("Reached optimizer_step_limit %d; stopping training", limit)
            self._stop = True
        return self._stop

    def _configure_threads(self, loader_kwargs: Optional[dict]) -> None:
        """CPU threads per process, once per Brain: cores available, processes, loader workers, load."""
        if self.thread_plan is None:
            workers = int((loader_kwargs or {}).get("num_workers") or 0)
            processes = local_processes(self.context.world_size, os.environ)
            self.thread_plan = configure_threads(self.run_opts.num_threads, processes, workers)

    def _end_of_epoch(self, epoch: int) -> None:
        meta = {"loss": self.train_loss, **(self.train_metrics or {})}
        if self.valid_loader is not None:
            loss, metrics = self._evaluate_stage(self.valid_loader, Stage.VALID, epoch,
                                                 before_hook=self._epoch_lr)
            meta = {"loss": loss, **(metrics or {})}
        # Updated before the save, so that a resumed run counts the same epochs without improvement.
        stop_early = self.early_stopping is not None and self.early_stopping.update(epoch, meta)
        self.checkpointing.save_end_of_epoch(self.checkpointer, self.run_opts, epoch, meta,
                                             self.optimizer_steps, self.early_stopping)
        self._stop = self._stop or stop_early
        if self.preemption.requested():
            exit_after_signal(self.preemption, self.checkpointer is not None, epoch, self.train_position)

    def _epoch_lr(self, metric: float) -> None:
        step_after_epoch(self.lr_scheduler, self.optimizer, metric)

    def evaluate(
        self,
        test_set: Any,
        max_key: Optional[str] = None,
        min_key: Optional[str] = None,
        test_loader_kwargs: Optional[dict] = None,
    ) -> float:
        """Load the best checkpoint, then evaluate on ``test_set``; returns the test loss (all items)."""
        self._configure_threads(test_loader_kwargs)
        loader = self.make_dataloader(test_set, Stage.TEST, test_loader_kwargs)
        self.on_evaluate_start(max_key=max_key, min_key=min_key)
        loss, _ = self._evaluate_stage(loader, Stage.TEST, None)
        return loss

    def _evaluate_stage(self, loader: Any, stage: Stage, epoch: Optional[int], before_hook=None) -> tuple:
        self.modules = self._raw_modules  # no DDP wrapper: evaluation runs without collectives
        self.modules.eval()
        if hasattr(loader, "serve_epoch"):
            loader.serve_epoch(epoch)
        self.on_stage_start(stage, epoch)
        stats = StageStats()
        limit = self.run_opts.debug_batches if self.run_opts.debug else None
        bar = ProgressBar(f"{stage.value}", loader_length(loader), self._show_progress())
        self.step = 0
        try:
            for batch in loader:
                self.step += 1
                stats.update(self.evaluate_batch(batch, stage), batch_items(batch))
                bar.update(stats)
                if limit is not None and self.step >= limit:
                    break
        finally:
            bar.close()
        loss = stats.gathered_average(self.dist.all_gather_object)
        if before_hook is not None:
            before_hook(loss)
            self.checkpointing.before_stage_end_hook(self.checkpointer)
        metrics = self.on_stage_end(stage, loss, epoch)
        self.train_log.write(summary_line(stage.value, epoch, loss, stats.duration, None, metrics))
        self.tensorboard.stage_values(stage.value, epoch, loss, metrics)
        return loss, metrics

    @property
    def raw_modules(self) -> torch.nn.ModuleDict:
        """The modules themselves, never wrapped (DistributedDataParallel, ``torch.compile``): for reading a
        module's config (``brain.raw_modules.model.in_features``), calling its own methods or saving its
        weights, during ``fit`` too."""
        return self._raw_modules

    # --- plumbing -----------------------------------------------------------------------------------------
    def _compile_and_wrap(self) -> None:
        names = self.run_opts.compile_modules
        self._wrapped = training_modules(self._raw_modules, self.dist, self.context, self.run_opts, names)
        self.checkpointing.restart_clock()

    #: Each process has its own running training loss: the checkpoint keeps every process's state.
    checkpoint_per_process = True

    step = counter_attribute("step")  # batches done in the current stage
    optimizer_steps = counter_attribute("optimizer_steps")
    train_position = counter_attribute("train_position")  # of the current training epoch (0 between epochs)
    train_stats = counter_attribute("train_stats")

    def state_dict(self) -> dict:
        """The loop's own counters and this process's running loss (recoverable as ``brain``)."""
        return self.counters.state_dict(self.optimization, self.early_stopping)

    def load_state_dict(self, state: dict) -> None:
        self.counters.load_state_dict(state, self.optimization, self.early_stopping)

    def load_process_states(self, states: list, rank: int, world_size: int) -> None:
        """Load this rank's saved state; on another world size rank 0 takes every saved rank's loss sums."""
        self.load_state_dict(LoopCounters.process_state(states, rank, world_size))

    def _show_progress(self) -> bool:
        return self.context.is_main and not self.run_opts.noprogressbar


__all__ = ["Brain", "Stage"]
