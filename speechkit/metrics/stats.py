"""Per-utterance scores of any metric, summarized across processes; and a running loss average.

Example:
    >>> stats = MetricStats(metric=lambda est, ref: abs(est - ref))
    >>> stats.append(["a", "b"], [1.0, 2.0], [1.5, 2.0])
    >>> stats.summarize("average")
    0.25
"""
from __future__ import annotations

import math
from typing import Callable, Optional, Union

import torch

from speechkit.errors import DataError
from speechkit.metrics.gather import gather_by_id


class MetricStats:
    """Calls ``metric(*per_item_args)`` for each item (or ``batch_eval=True``: once per batch, returning one
    score per item) and keeps ``{id: score}``. ``summarize`` gathers every process's scores (collective)."""

    def __init__(self, metric: Callable, batch_eval: bool = False):
        self.metric, self.batch_eval = metric, batch_eval
        self.clear()

    def clear(self) -> None:
        self.scores: dict = {}
        self.summary: dict = {}

    def append(self, ids, *args, **kwargs) -> None:
        ids = list(ids)
        if self.batch_eval:
            values = self.metric(*args, **kwargs)
            values = values.detach().cpu().tolist() if isinstance(values, torch.Tensor) else list(values)
        else:
            values = [self.metric(*item, **kwargs) for item in zip(*args)]
        if len(values) != len(ids):
            raise DataError(f"the metric gave {len(values)} scores for {len(ids)} ids "
                            f"(first id: {ids[0] if ids else None!r})")
        for utt_id, value in zip(ids, values):
            self.scores[utt_id] = float(value.item() if isinstance(value, torch.Tensor) else value)

    def summarize(self, field: Optional[str] = None) -> Union[dict, float]:
        """average, min_score, max_score, min_id, max_id, count over every process's items."""
        merged = gather_by_id(self.scores, "score")
        if not merged:
            self.summary = {"average": math.nan, "min_score": math.nan, "max_score": math.nan,
                            "min_id": None, "max_id": None, "count": 0}
        else:
            min_id = min(merged, key=lambda k: merged[k])
            max_id = max(merged, key=lambda k: merged[k])
            self.summary = {"average": sum(merged.values()) / len(merged), "min_score": merged[min_id],
                            "max_score": merged[max_id], "min_id": min_id, "max_id": max_id,
                            "count": len(merged)}
        return dict(self.summary) if field is None else self.summary[field]


class RunningAverage:
    """Item-weighted running mean of a loss: ``update(value, count)``, ``.value``, state_dict round-trip."""

    def __init__(self):
        self.total, self.count = 0.0, 0

    def update(self, value, count: int = 1) -> float:
        value = float(value.detach().item() if isinstance(value, torch.Tensor) else value)
        self.total += value * count
        self.count += count
        return self.value

    @property
    def value(self) -> float:
        return self.total / self.count if self.count else math.nan

    def state_dict(self) -> dict:
        return {"total": self.total, "count": self.count}

    def load_state_dict(self, state: dict) -> None:
        self.total, self.count = float(state["total"]), int(state["count"])
