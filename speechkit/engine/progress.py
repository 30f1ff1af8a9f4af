"""Stage statistics, the progress bar and the one-line stage summaries.

The stage loss is item-weighted (each batch counts ``loss * items``) and, at the end of the stage, the sums
of every process are gathered once, so the reported loss is the mean over all items of the stage.

Example:
    >>> stats = StageStats()
    >>> stats.update(1.0, items=3); stats.update(2.0, items=1)
    >>> stats.average
    1.25
"""

from __future__ import annotations

import logging
import math
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional, Union

import torch

from speechkit.terminal import Progress

logger = logging.getLogger(__name__)


class StageStats:
    """Running item-weighted loss and throughput of one stage on this process.

    A loss on a GPU is summed on the GPU: reading it every batch would make the host wait for each step to
    finish before queueing the next. The sums are read (one synchronisation) only when a figure is asked
    for: the progress bar's refresh, the end of the stage, a checkpoint. ``defer_reads=True`` does the same
    with CPU tensors (the tests check the GPU path that way); ``None`` defers for non-CPU losses only.
    """

    def __init__(self, defer_reads: Optional[bool] = None):
        self.defer_reads = defer_reads
        self._loss_sum = 0.0
        self._items = 0  # items whose loss was finite
        self._device_sums: Optional[torch.Tensor] = None  # (loss sum, finite items) not yet read
        self.processed = 0  # every item seen, finite or not (throughput)
        self.batches = 0
        self.started = time.monotonic()
        self.elapsed_before = 0.0  # time spent before a resume, so durations survive preemption

    def update(self, loss: float | torch.Tensor, items: int) -> None:
        """Add one batch's mean ``loss`` (a float, or a 0-dim tensor) over ``items`` items.

        A non-finite loss (a skipped batch) is left out, so it cannot turn the whole stage NaN.
        """
        defer = self.defer_reads
        if isinstance(loss, torch.Tensor) and (loss.device.type != "cpu" if defer is None else defer):
            loss = loss.detach().float().reshape(())
            finite = torch.isfinite(loss)
            sums = torch.stack([torch.where(finite, loss * items, 0.0), finite.float() * items])
            self._device_sums = sums if self._device_sums is None else self._device_sums + sums
        else:
            loss = float(loss)
            if math.isfinite(loss):
                self._loss_sum += loss * items
                self._items += items
        self.processed += items
        self.batches += 1

    def _read_device_sums(self) -> None:
        if self._device_sums is not None:
            loss_sum, items = self._device_sums.double().tolist()
            self._loss_sum += loss_sum
            self._items += round(items)
            self._device_sums = None

    @property
    def loss_sum(self) -> float:
        self._read_device_sums()
        return self._loss_sum

    @property
    def items(self) -> int:
        self._read_device_sums()
        return self._items

    @property
    def average(self) -> float:
        return self.loss_sum / self.items if self.items else float("nan")

    @property
    def duration(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def items_per_second(self) -> float:
        return self.processed / max(self.duration, 1e-9)

    def gathered_average(self, all_gather_object: Callable) -> float:
        """Mean loss over every item of every process (one collective)."""
        parts = all_gather_object((self.loss_sum, self.items))
        total_items = sum(items for _, items in parts)
        return sum(loss for loss, _ in parts) / total_items if total_items else float("nan")

    def state_dict(self) -> dict:
        return {
            "loss_sum": self.loss_sum,
            "items": self.items,
            "processed": self.processed,
            "batches": self.batches,
            "elapsed": self.duration,
        }

    def load_state_dict(self, state: dict) -> None:
        self._loss_sum, self._items = float(state["loss_sum"]), int(state["items"])
        self._device_sums = None
        self.processed = int(state.get("processed", state["items"]))
        self.batches, self.elapsed_before = int(state["batches"]), float(state["elapsed"])
        self.started = time.monotonic()


class ProgressBar:
    """The stage's bar (:class:`speechkit.terminal.Progress`: on a terminal only, logging through it) showing
    the running loss and items/s; silent when ``enabled`` is False."""

    POSTFIX_INTERVAL_S = 1.0

    def __init__(self, description: str, total: Optional[int], enabled: bool, initial: int = 0):
        self._postfix_time = -math.inf
        self.progress = Progress(description, total, unit="batch", enabled=enabled, initial=initial,
                                 leave=False)

    def update(self, stats: StageStats) -> None:
        if not self.progress.shown:
            return
        now = time.monotonic()
        if now - self._postfix_time >= self.POSTFIX_INTERVAL_S:
            # At most once a second: the running loss may live on a GPU, and reading it waits for the step.
            self._postfix_time = now
            self.progress.set_postfix(loss=f"{stats.average:.4g}", items_s=f"{stats.items_per_second():.1f}")
        self.progress.update()

    def close(self) -> None:
        self.progress.close()


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_line(
    stage: str,
    epoch: Optional[int],
    loss: float,
    duration: float,
    lr: Union[float, tuple, None] = None,
    metrics: Optional[dict] = None,
) -> str:
    """``epoch: 3 | stage: train | lr: 0.001 | loss: 0.52 | WER: 12.3 | duration: 4.1s``

    ``lr`` is one value, or the epoch's ``(first, last)``: ``lr: 0.001 (from 1.5e-05)`` when they differ
    (the value the schedule reached first, as later epochs start from it).
    """
    parts = []
    if epoch is not None:
        parts.append(f"epoch: {epoch}")
    parts.append(f"stage: {stage}")
    first, last = lr if isinstance(lr, tuple) else (lr, lr)
    if last is None:
        last, first = first, None
    if last is not None:
        changed = first is not None and f"{first:.4g}" != f"{last:.4g}"
        parts.append(f"lr: {last:.4g}" + (f" (from {first:.4g})" if changed else ""))
    parts.append(f"loss: {format_value(loss)}")
    for key, value in (metrics or {}).items():
        parts.append(f"{key}: {format_value(value)}")
    parts.append(f"duration: {duration:.1f}s")
    return " | ".join(parts)


def train_log_path(run_opts: Any, hparams: dict) -> Optional[Path]:
    """Where the stage summaries go: ``--train_log``, else ``<output_folder>/train_log.txt``, else nowhere."""
    if run_opts.train_log:
        return Path(run_opts.train_log)
    if isinstance(hparams.get("output_folder"), (str, os.PathLike)):
        return Path(hparams["output_folder"]) / "train_log.txt"
    return None


class TrainLog:
    """Appends stage summary lines to ``train_log.txt`` (main process) and to the ``speechkit`` log."""

    def __init__(self, path: Optional[Path], is_main: bool):
        self.path = Path(path) if path else None
        self.is_main = is_main

    def write(self, line: str) -> None:
        logger.info(line)
        if self.path is not None and self.is_main:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line + "\n")
