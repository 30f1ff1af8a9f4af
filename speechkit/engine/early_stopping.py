"""Early stopping: end training when a validation value has not improved for ``patience`` epochs.

Brain calls :meth:`EarlyStopping.update` at the end of every epoch with the validation stage's values (its
loss as ``loss`` and whatever ``on_stage_end`` returned, e.g. ``WER``). The counter is part of Brain's
checkpointed state, so a resumed run stops where the uninterrupted one would have. The end-of-epoch
checkpoints keep the best epoch by the same key (:meth:`keep_keys`), so ``evaluate(min_key=...)`` finds it.

Example:
    >>> stopper = EarlyStopping(patience=2, key="WER", mode="min")
    >>> [stopper.update(epoch, {"WER": wer}) for epoch, wer in enumerate([30.0, 25.0, 26.0, 25.5], 1)]
    [False, False, False, True]
    >>> stopper.best_epoch, stopper.best
    (2, 25.0)
"""

from __future__ import annotations

import logging
import math
from typing import Any, Optional

from speechkit.errors import RunOptionsError

logger = logging.getLogger(__name__)

__all__ = ["EarlyStopping"]


class EarlyStopping:
    """Count the epochs since the best value of ``key``; say when ``patience`` of them have passed.

    Args:
        patience: epochs without an improvement tolerated; the next one stops training (>= 1).
        key: the validation value watched: ``loss`` or a metric the recipe's ``on_stage_end`` returns.
        mode: ``min`` (lower is better, as for a loss or an error rate) or ``max``.
        min_delta: an epoch improves only when it beats the best by more than this.
    """

    def __init__(self, patience: int, key: str = "loss", mode: str = "min", min_delta: float = 0.0):
        if patience < 1:
            raise RunOptionsError(f"option 'early_stopping_patience' must be at least 1, got {patience}")
        if mode not in ("min", "max"):
            raise RunOptionsError(f"option 'early_stopping_mode' must be min or max, got {mode!r}")
        self.patience, self.key, self.mode, self.min_delta = patience, key, mode, float(min_delta)
        self.best: Optional[float] = None
        self.best_epoch: Optional[int] = None
        self.epochs_without_improvement = 0

    @classmethod
    def from_options(cls, run_opts: Any) -> Optional[EarlyStopping]:
        """The stopper the run options ask for (``--early_stopping_patience N``), or None."""
        patience = getattr(run_opts, "early_stopping_patience", None)
        if patience is None:
            return None
        return cls(patience, run_opts.early_stopping_key, run_opts.early_stopping_mode,
                   run_opts.early_stopping_min_delta)

    def update(self, epoch: int, values: dict) -> bool:
        """Record this epoch's validation ``values``; return True when training should stop now."""
        if self.key not in values:
            known = ", ".join(sorted(str(k) for k in values)) or "none"
            raise RunOptionsError(
                f"option 'early_stopping_key': the validation stage gives no value '{self.key}' (it gives: "
                f"{known}; a recipe adds values by returning them from on_stage_end)"
            )
        value = float(values[self.key])
        if math.isnan(value):
            improved = False
        elif self.best is None:
            improved = True
        elif self.mode == "min":
            improved = value < self.best - self.min_delta
        else:
            improved = value > self.best + self.min_delta
        if improved:
            self.best, self.best_epoch, self.epochs_without_improvement = value, epoch, 0
            return False
        self.epochs_without_improvement += 1
        if self.epochs_without_improvement < self.patience:
            return False
        best = self.best if self.best is not None else math.nan  # every epoch so far gave NaN
        logger.info(
            "Early stopping after epoch %d: valid %s has not improved for %d epochs (best %.6g at epoch %s)",
            epoch, self.key, self.epochs_without_improvement, best, self.best_epoch,
        )
        return True

    def keep_keys(self) -> tuple:
        """``(min_keys, max_keys)`` that keep the best epoch's checkpoint by the watched key."""
        return ([self.key], []) if self.mode == "min" else ([], [self.key])

    def state_dict(self) -> dict:
        return {"best": self.best, "best_epoch": self.best_epoch,
                "epochs_without_improvement": self.epochs_without_improvement}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.best_epoch = state.get("best"), state.get("best_epoch")
        self.epochs_without_improvement = int(state.get("epochs_without_improvement", 0))
