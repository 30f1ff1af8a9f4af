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
import time
from pathlib import Path
from typing import Any, Callable, Optional

from tqdm import tqdm

logger = logging.getLogger(__name__)


class StageStats:
    """Running item-weighted loss and throughput of one stage on this process."""

    def __init__(self):
        self.loss_sum = 0.0
        self.items = 0
        self.batches = 0
        self.started = time.monotonic()
        self.elapsed_before = 0.0  # time spent before a resume, so durations survive preemption

    def update(self, loss: float, items: int) -> None:
        if math.isfinite(loss):  # a skipped non-finite batch must not turn the whole stage NaN
            self.loss_sum += loss * items
            self.items += items
        self.batches += 1

    @property
    def average(self) -> float:
        return self.loss_sum / self.items if self.items else float("nan")

    @property
    def duration(self) -> float:
        return self.elapsed_before + time.monotonic() - self.started

    def items_per_second(self) -> float:
        return self.items / max(self.duration, 1e-9)

    def gathered_average(self, all_gather_object: Callable) -> float:
        """Mean loss over every item of every process (one collective)."""
        parts = all_gather_object((self.loss_sum, self.items))
        total_items = sum(items for _, items in parts)
        return sum(loss for loss, _ in parts) / total_items if total_items else float("nan")

    def state_dict(self) -> dict:
        return {
            "loss_sum": self.loss_sum,
            "items": self.items,
            "batches": self.batches,
            "elapsed": self.duration,
        }

    def load_state_dict(self, state: dict) -> None:
        self.loss_sum, self.items = float(state["loss_sum"]), int(state["items"])
        self.batches, self.elapsed_before = int(state["batches"]), float(state["elapsed"])
        self.started = time.monotonic()


class ProgressBar:
    """A tqdm bar showing the running loss and items/s; silent when ``enabled`` is False."""

    def __init__(self, description: str, total: Optional[int], enabled: bool, initial: int = 0):
        self.bar = tqdm(
            total=total,
            desc=description,
            initial=initial,
            dynamic_ncols=True,
            leave=False,
            disable=not enabled,
        )

    def update(self, stats: StageStats) -> None:
        if not self.bar.disable:
            self.bar.set_postfix(
                loss=f"{stats.average:.4g}", items_s=f"{stats.items_per_second():.1f}", refresh=False
            )
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def format_value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary_line(
    stage: str,
    epoch: Optional[int],
    loss: float,
    duration: float,
    lr: Optional[float] = None,
    metrics: Optional[dict] = None,
) -> str:
    """``epoch: 3 | stage: valid | lr: 0.001 | loss: 0.52 | WER: 12.3 | duration: 4.1s``"""
    parts = []
    if epoch is not None:
        parts.append(f"epoch: {epoch}")
    parts.append(f"stage: {stage}")
    if lr is not None:
        parts.append(f"lr: {lr:.4g}")
    parts.append(f"loss: {format_value(loss)}")
    for key, value in (metrics or {}).items():
        parts.append(f"{key}: {format_value(value)}")
    parts.append(f"duration: {duration:.1f}s")
    return " | ".join(parts)


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
