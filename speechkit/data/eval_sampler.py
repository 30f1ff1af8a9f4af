"""EvalBatchSampler: validation/test batches, a disjoint shard per rank, nothing repeated or dropped.

Example:
    >>> [list(EvalBatchSampler(5, batch_size=2, rank=r, world_size=2)) for r in (0, 1)]
    [[[0, 2], [4]], [[1, 3]]]
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Optional

import numpy as np

from speechkit.data import buckets
from speechkit.data.buckets import SORTS, check_lengths, check_max_batch_size, padding_stats, sorted_order
from speechkit.data.sampler_state import STATE_VERSION, check_state, encode_mask
from speechkit.data.sharding import check_rank, shard_round_robin
from speechkit.errors import DataError

logger = logging.getLogger(__name__)


class EvalBatchSampler:
    """Validation/test batches: rank ``r`` gets a disjoint shard; no item repeated or dropped.

    Shards are dealt round-robin from the evaluation order (sorted by length when ``sort`` is given, so every
    rank gets a similar mix of lengths), and may differ by one item; ranks may yield different numbers of
    batches (evaluation runs no collective until the stage ends).

    Arguments:
        num_items: dataset size.
        batch_size: items per batch (the last batch of a shard may be smaller).
        lengths: one length per item (needed for ``sort`` and dynamic batches; used for statistics).
        sort: ``"ascending"`` / ``"descending"`` by length, or None for dataset order.
        max_batch_length: if given, batches are packed by padded length instead (``batch_size`` is then
            ignored) from the shard in length order; ``max_batch_size`` and ``length_cost`` as in
            :class:`DynamicBatchSampler`.

    Resuming mid-epoch continues exactly on the same rank and world size; a state from another world size
    restarts the evaluation (its results were not saved either).

    Example:
        >>> [list(EvalBatchSampler(5, batch_size=2, rank=r, world_size=2)) for r in (0, 1)]
        [[[0, 2], [4]], [[1, 3]]]
    """

    def __init__(self, num_items: int, batch_size: int = 1, *, lengths: Optional[Sequence[float]] = None,
                 sort: Optional[str] = None, max_batch_length: Optional[float] = None,
                 max_batch_size: Optional[int] = None, length_cost: buckets.LengthCost = None, rank: int = 0,
                 world_size: int = 1):
        check_rank(rank, world_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise DataError(f"batch_size must be a positive int, got {batch_size!r}")
        if sort not in SORTS:
            raise DataError(f"sort must be one of {SORTS}, got {sort!r}")
        self.num_items, self.rank, self.world_size = int(num_items), rank, world_size
        self.lengths = None if lengths is None else check_lengths(lengths, num_items)
        if (sort is not None or max_batch_length is not None) and self.lengths is None:
            raise DataError("sorting or dynamic batches need the item lengths")
        if max_batch_length is not None:
            order = sorted_order(self.lengths, sort or "ascending")
            shard = shard_round_robin(order.tolist(), rank, world_size)
            cost = buckets.cost_function(length_cost)
            check_max_batch_size(max_batch_size)
            self.batches = buckets.pack_greedy(shard, self.lengths, cost, float(max_batch_length),
                                               max_batch_size)
        else:
            order = np.arange(self.num_items) if sort is None else sorted_order(self.lengths, sort)
            shard = shard_round_robin(order.tolist(), rank, world_size)
            self.batches = [shard[start:start + batch_size] for start in range(0, len(shard), batch_size)]
        self.epoch = 0
        self._start = 0  # batches to skip at the next pass (from load_state_dict)
        self._position = 0
        self.pass_start = 0  # batches already consumed when the running pass began
        self._running = False

    def set_epoch(self, epoch: int) -> None:
        """Evaluation order does not change with the epoch; a loaded position for another epoch is dropped."""
        if int(epoch) != self.epoch:
            self.epoch, self._start, self._position, self._running = int(epoch), 0, 0, False

    def __iter__(self) -> Iterator[list]:
        start = self._begin()  # at the first next(), like the training samplers
        for index in range(start, len(self.batches)):
            self._position = index + 1
            yield list(self.batches[index])
        self._running = False

    def begin_pass(self) -> list:
        """Start a pass and return this rank's batches for it (see ``_PlannedSampler.begin_pass``)."""
        return [list(batch) for batch in self.batches[self._begin():]]

    def mark_consumed(self, position: int) -> None:
        """Record that ``position`` batches of this rank's shard are consumed."""
        self._position = int(position)

    def end_pass(self) -> None:
        """Record that the running pass has handed out all its batches."""
        self._running = False

    def _begin(self) -> int:
        start, self._start = self._start, 0
        self._position = self.pass_start = start
        self._running = True
        return start

    def __len__(self) -> int:
        """Batches of the running pass (constant while it runs), or of the next one."""
        if self._start:
            return len(self.batches) - self._start
        if self._running:
            return len(self.batches) - self.pass_start
        return len(self.batches)

    def state_dict(self) -> dict:
        return self.state_at(self._start or self._position)

    def state_at(self, position: int) -> dict:
        """The state once ``position`` batches of this rank's shard are consumed."""
        consumed = np.zeros(self.num_items, dtype=bool)
        for batch in self.batches[:position]:
            consumed[batch] = True
        return {"version": STATE_VERSION, "sampler": type(self).__name__, "epoch": self.epoch,
                "num_items": self.num_items, "rank": self.rank, "world_size": self.world_size,
                "batches": int(position), "consumed": encode_mask(consumed)}

    def load_state_dict(self, state: dict) -> None:
        check_state(state, type(self).__name__, self.num_items)
        self.epoch = int(state["epoch"])
        if state.get("rank") == self.rank and state.get("world_size") == self.world_size:
            self._start = int(state["batches"])
        else:
            self._start = 0
            logger.warning("EvalBatchSampler: state saved by rank %s of %s; restarting the evaluation on "
                           "rank %d of %d", state.get("rank"), state.get("world_size"), self.rank,
                           self.world_size)
        self._position, self._running = self._start, False

    def stats(self) -> dict:
        return {"epoch": self.epoch, **padding_stats(self.batches, self.lengths)}
