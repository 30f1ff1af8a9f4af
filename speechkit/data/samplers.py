"""Batch samplers: which dataset indices form each batch, on which rank, in which order; resumable.

* :class:`FixedBatchSampler`: training, a fixed batch size, shuffled per (seed, epoch) or sorted by length.
* :class:`DynamicBatchSampler`: training with batches capped by padded length, drawn from length buckets.
* :class:`EvalBatchSampler`: validation/test; each rank gets a disjoint shard, nothing repeated or dropped.

Samplers take ``rank`` and ``world_size`` as plain arguments. Training samplers plan the epoch globally
(every rank computes the same plan) and deal it in *steps* of one batch per rank, so every rank yields the
same number of batches (see :mod:`speechkit.data.sharding` for how the tail is handled).

Resuming: ``state_dict()`` records the epoch and the set of items the whole job has consumed so far (a
bitmap, independent of the world size), plus how the running plan was made. ``load_state_dict`` continues the
very same plan when the world size and options are unchanged (the remaining batches are exactly those an
uninterrupted run would have yielded); otherwise it plans the items not yet consumed for the new world size,
so a job stopped on 4 ranks and resumed on 2 or 8 still sees every item of the epoch exactly once.

Example:
    >>> sampler = DynamicBatchSampler([1.5, 3.0, 2.2, 9.1, 4.4], max_batch_length=10.0, seed=3)
    >>> sampler.set_epoch(1)
    >>> batches = list(sampler)
    >>> sorted(i for batch in batches for i in batch)
    [0, 1, 2, 3, 4]
"""
from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Optional

import numpy as np

from speechkit.data import buckets
from speechkit.data.buckets import SORTS, check_lengths, check_max_batch_size, padding_stats, sorted_order
from speechkit.data.eval_sampler import EvalBatchSampler
from speechkit.data.length_steps import deal_length_ordered
from speechkit.data.sampler_state import STATE_VERSION, check_state, decode_mask, encode_mask
from speechkit.data.sharding import Step, check_rank, deal_fixed
from speechkit.errors import DataError

logger = logging.getLogger(__name__)

BATCH_ORDERINGS = ("random", "ascending", "descending")


class _Iteration:
    """One pass over a plan: the items consumed before it (``origin``), its steps, and the steps done."""

    def __init__(self, origin: Optional[np.ndarray], steps: list, position: int):
        self.origin, self.steps, self.position = origin, steps, position
        self.start = position
        self.finished = False


class _PlannedSampler:
    """Epochs, iteration and resumable state shared by the training samplers.

    A subclass defines ``_plan(remaining)`` (the steps over the items not yet consumed, a bool mask or None
    for all) and ``_plan_options()`` (what besides world size and seed makes a plan).
    """

    def __init__(self, num_items: int, seed: int, rank: int, world_size: int,
                 lengths: Optional[np.ndarray] = None):
        check_rank(rank, world_size)
        self.num_items = int(num_items)
        self.seed = int(seed)
        self.rank = rank
        self.world_size = world_size
        self.lengths = lengths
        self.epoch = 0
        # (origin mask or None, steps already done), set by load_state_dict for the next pass
        self._pending: Optional[tuple] = None
        self._active: Optional[_Iteration] = None
        self._plans: dict = {}

    # -- to define ------------------------------------------------------------------------------------------

    def _plan(self, remaining: Optional[np.ndarray]) -> list:
        raise NotImplementedError

    def _plan_options(self) -> dict:
        raise NotImplementedError

    # -- epochs and iteration -------------------------------------------------------------------------------

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch (its shuffling); a resume position loaded for another epoch is dropped."""
        epoch = int(epoch)
        if epoch != self.epoch:
            self.epoch, self._pending, self._active = epoch, None, None

    def __iter__(self) -> Iterator[list]:
        # The pass (and a loaded resume position) starts at the first next(), not at iter(): a DataLoader
        # may call iter() on its batch sampler more than once before it reads from it.
        iteration = self._active = self._begin()
        for index in range(iteration.position, len(iteration.steps)):
            iteration.position = index + 1  # counted as consumed once handed out
            yield list(iteration.steps[index].batches[self.rank])
        iteration.finished = True

    def begin_pass(self) -> list:
        """Start a pass and return all of this rank's batches for it (what ``iter`` would yield).

        For a loader that hands the batches out itself and reports progress with :meth:`mark_consumed`.
        """
        iteration = self._active = self._begin()
        return [list(step.batches[self.rank]) for step in iteration.steps[iteration.position:]]

    def mark_consumed(self, position: int) -> None:
        """Record that ``position`` steps of the running pass (from :meth:`begin_pass`) are consumed."""
        if self._active is not None:
            self._active.position = int(position)

    def end_pass(self) -> None:
        """Record that the running pass (from :meth:`begin_pass`) has handed out all its batches."""
        if self._active is not None:
            self._active.finished = True

    @property
    def pass_start(self) -> int:
        """Steps already consumed when the running pass began (non-zero after a mid-epoch resume)."""
        return self._active.start if self._active is not None else 0

    def _begin(self) -> _Iteration:
        origin, done = self._pending if self._pending is not None else (None, 0)
        self._pending = None
        return _Iteration(origin, self.plan(origin), done)

    def __len__(self) -> int:
        """Batches this rank yields in the running pass (constant while it runs), or in the next one.

        After ``load_state_dict`` that is the number of batches left in the epoch.
        """
        iteration = self._current()
        return len(iteration.steps) - iteration.start

    def _current(self) -> _Iteration:
        """The running pass, else the one the next ``iter`` starts (from a loaded position or afresh)."""
        if self._pending is not None:
            origin, done = self._pending
            return _Iteration(origin, self.plan(origin), done)
        if self._active is not None and not self._active.finished:
            return self._active
        return _Iteration(None, self.plan(None), 0)

    def plan(self, origin: Optional[np.ndarray] = None) -> list:
        """The steps of the current epoch over the items not in ``origin`` (all items when None)."""
        key = (self.epoch, None if origin is None else encode_mask(origin))
        if key not in self._plans:
            self._plans = {key: self._plan(None if origin is None else ~origin)}  # keep one epoch's plan
        return self._plans[key]

    # -- state ----------------------------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """The resume position: after loading it, iteration yields exactly the batches not yet consumed."""
        if self._pending is not None:
            origin, done = self._pending
            return self._state(origin, self.plan(origin), done)
        if self._active is not None:
            return self.state_at(self._active.position)
        return self._state(None, self.plan(None), 0)

    def state_at(self, position: int) -> dict:
        """The state once ``position`` steps of the running pass are consumed (for prefetching loaders)."""
        iteration = self._active if self._active is not None else self._current()
        return self._state(iteration.origin, iteration.steps, position)

    def _state(self, origin: Optional[np.ndarray], steps: list, position: int) -> dict:
        consumed = np.zeros(self.num_items, dtype=bool) if origin is None else origin.copy()
        for step in steps[:position]:
            for batch in step.batches:
                consumed[list(batch)] = True
        return {
            "version": STATE_VERSION,
            "sampler": type(self).__name__,
            "epoch": self.epoch,
            "num_items": self.num_items,
            "num_consumed": int(consumed.sum()),
            "consumed": encode_mask(consumed),
            "plan": {"world_size": self.world_size, "seed": self.seed, "options": self._plan_options(),
                     "origin": None if origin is None else encode_mask(origin), "steps": int(position)},
        }

    def load_state_dict(self, state: dict) -> None:
        """Resume from :meth:`state_dict` output, on this world size (which may differ from the saved one)."""
        check_state(state, type(self).__name__, self.num_items)
        self.epoch = int(state["epoch"])
        self._active = None
        consumed = decode_mask(state["consumed"], self.num_items)
        plan = state.get("plan") or {}
        same_plan = (plan.get("world_size") == self.world_size and plan.get("seed") == self.seed
                     and plan.get("options") == self._plan_options())
        if same_plan:
            origin = plan.get("origin")
            origin_mask = None if origin is None else decode_mask(origin, self.num_items)
            self._pending = (origin_mask, int(plan["steps"]))
            # The same plan must consume the same items; if not (lengths edited in place), trust `consumed`.
            replayed = self._state(origin_mask, self.plan(origin_mask), int(plan["steps"]))["consumed"]
            same_plan = replayed == state["consumed"]
        if not same_plan:
            self._pending = (consumed, 0)
            logger.info("%s: resuming epoch %d on %d rank(s) with %d of %d items left (plan rebuilt)",
                        type(self).__name__, self.epoch, self.world_size, int((~consumed).sum()),
                        self.num_items)

    # -- statistics -----------------------------------------------------------------------------------------

    def stats(self) -> dict:
        """Batches, items and padding efficiency (real / padded length) of this rank's current epoch plan."""
        steps = self._current().steps
        mine = [step.batches[self.rank] for step in steps]
        every = [batch for step in steps for batch in step.batches]
        return {"epoch": self.epoch, **padding_stats(mine, self.lengths),
                "global_padding_efficiency": padding_stats(every, self.lengths)["padding_efficiency"]}


class FixedBatchSampler(_PlannedSampler):
    """Training batches of ``batch_size`` items per rank, every rank yielding the same number of batches.

    Arguments:
        num_items: dataset size.
        batch_size: items per batch on each rank (the tail rule of :mod:`speechkit.data.sharding` may make the
            last step's batches smaller).
        shuffle: a new random order per (seed, epoch); ignored when ``sort`` is given.
        sort: ``"ascending"`` / ``"descending"`` by ``lengths`` (ties keep dataset order), or None.
        lengths: one length per item (needed for ``sort``; used for the padding statistics).
        drop_last: drop the items that do not fill a whole step instead of making smaller batches.

    Example:
        >>> sampler = FixedBatchSampler(10, batch_size=2, seed=1, rank=1, world_size=2)
        >>> len(sampler), sum(len(batch) for batch in sampler)
        (3, 5)
    """

    def __init__(self, num_items: int, batch_size: int, *, shuffle: bool = True, sort: Optional[str] = None,
                 lengths: Optional[Sequence[float]] = None, seed: int = 0, drop_last: bool = False,
                 rank: int = 0, world_size: int = 1):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise DataError(f"batch_size must be a positive int, got {batch_size!r}")
        if sort not in SORTS:
            raise DataError(f"sort must be one of {SORTS}, got {sort!r}")
        array = None if lengths is None else check_lengths(lengths, num_items)
        if sort is not None and array is None:
            raise DataError(f"sort={sort!r} needs the item lengths")
        super().__init__(num_items, seed, rank, world_size, array)
        self.batch_size, self.shuffle, self.sort = batch_size, bool(shuffle), sort
        self.drop_last = bool(drop_last)

    def _plan_options(self) -> dict:
        return {"batch_size": self.batch_size, "shuffle": self.shuffle, "sort": self.sort,
                "drop_last": self.drop_last}

    def _order(self) -> np.ndarray:
        if self.sort is not None:
            return sorted_order(self.lengths, self.sort)
        if self.shuffle:
            return np.random.default_rng([self.seed, self.epoch]).permutation(self.num_items)
        return np.arange(self.num_items)

    def _plan(self, remaining: Optional[np.ndarray]) -> list:
        order = self._order()
        if remaining is not None:
            order = order[remaining[order]]
        return deal_fixed(order.tolist(), self.batch_size, self.world_size, self.drop_last)


class DynamicBatchSampler(_PlannedSampler):
    """Training batches capped by padded length, each step's batches of neighbouring lengths, full at any
    world size.

    Arguments:
        lengths: one length per item, in any unit (seconds, frames, tokens).
        max_batch_length: budget of a batch: ``items x cost(longest item)`` stays at or below it.
        num_buckets: buckets of about equal total length, estimated from ``lengths`` (default: about one
            bucket per four batches of the epoch, at most 100). Exclusive with ``bucket_boundaries``.
        bucket_boundaries: explicit ascending upper bounds; longer items go to one more, last bucket.
        shuffle: shuffle the items inside each bucket per (seed, epoch), otherwise shortest first; with
            several ranks, items within 1% of each other's length in random order per (seed, epoch).
        batch_ordering: order of the steps: ``"random"`` (per (seed, epoch)), ``"ascending"`` or
            ``"descending"`` by the longest item.
        max_batch_size: optional cap on items per batch.
        drop_last: drop the items of the ``N mod world_size`` least-filled batches of the epoch (``N``
            batches packed), instead of sharing them out over slightly smaller batches; with one rank
            nothing is dropped.
        length_cost: ``None`` (cost = length), a number ``q`` (cost = length + length^2/q, for attention), or
            a callable; long items then make smaller batches.
        pool_batches: with ``shuffle``, each bucket's shuffled items are sorted by length in pools of about
            this many batches before packing: batches stay random from epoch to epoch but hold items of
            nearly equal length (0 or 1 turns pooling off).

    The epoch is packed once, globally, bucket by bucket; with one rank those batches are the steps. With
    ``world_size`` ranks the epoch's items are re-cut in length order into a whole number of steps of
    ``world_size`` batches of about equal padded cost, each step holding neighbouring lengths; see
    :mod:`speechkit.data.length_steps`.

    Example:
        >>> lengths = [2.0, 2.5, 8.0, 7.5, 3.0, 9.0, 2.2, 8.8]
        >>> ranks = [DynamicBatchSampler(lengths, max_batch_length=16.0, num_buckets=2, world_size=2, rank=r)
        ...          for r in (0, 1)]
        >>> [list(sampler) for sampler in ranks]  # a step of 9 and 8.8 padded s, then one of 16 and 12
        [[[5], [2, 3]], [[7], [4, 1, 6, 0]]]
    """

    def __init__(self, lengths: Sequence[float], max_batch_length: float, num_buckets: Optional[int] = None,
                 bucket_boundaries: Optional[Sequence[float]] = None, shuffle: bool = True,
                 batch_ordering: str = "random", max_batch_size: Optional[int] = None, seed: int = 0,
                 drop_last: bool = False, rank: int = 0, world_size: int = 1,
                 length_cost: buckets.LengthCost = None, pool_batches: int = 4):
        array = check_lengths(lengths, len(lengths))
        if isinstance(pool_batches, bool) or not isinstance(pool_batches, int) or pool_batches < 0:
            raise DataError(f"pool_batches must be an int >= 0, got {pool_batches!r}")
        self.pool_batches = pool_batches
        if isinstance(max_batch_length, bool) or not isinstance(max_batch_length, (int, float)) \
                or not max_batch_length > 0:
            raise DataError(f"max_batch_length must be a positive number, got {max_batch_length!r}")
        if batch_ordering not in BATCH_ORDERINGS:
            raise DataError(f"batch_ordering must be one of {BATCH_ORDERINGS}, got {batch_ordering!r}")
        check_max_batch_size(max_batch_size)
        super().__init__(len(array), seed, rank, world_size, array)
        self.max_batch_length = float(max_batch_length)
        self.max_batch_size = max_batch_size
        self.shuffle, self.batch_ordering, self.drop_last = bool(shuffle), batch_ordering, bool(drop_last)
        self.cost = buckets.cost_function(length_cost)
        self._costs = buckets.item_costs(array, self.cost)
        self._check_items_fit()
        self.bucket_boundaries = self._boundaries(num_buckets, bucket_boundaries)
        bucket_of = buckets.assign_buckets(array, self.bucket_boundaries)
        by_bucket = np.argsort(bucket_of, kind="stable")
        splits = np.searchsorted(bucket_of[by_bucket], np.arange(1, len(self.bucket_boundaries) + 1))
        self._bucket_items = np.split(by_bucket, splits)  # one more than the boundaries: the overflow bucket

    def _check_items_fit(self) -> None:
        if self.num_items == 0:
            return
        longest = int(np.argmax(self._costs))
        cost = float(self._costs[longest])
        if cost > self.max_batch_length:
            too_long = int(np.count_nonzero(self._costs > self.max_batch_length))
            raise DataError(f"{too_long} item(s) cost more than max_batch_length={self.max_batch_length:g} "
                            f"alone (e.g. item {longest}: length {self.lengths[longest]:g}, cost {cost:g}); "
                            "filter them out (dataset.filtered_sorted(key_max_value=...)) or raise "
                            "max_batch_length")

    def _boundaries(self, num_buckets: Optional[int], bucket_boundaries: Optional[Sequence[float]]) -> list:
        if num_buckets is not None and bucket_boundaries is not None:
            raise DataError("give num_buckets or bucket_boundaries, not both")
        if bucket_boundaries is not None:
            bounds = [float(bound) for bound in bucket_boundaries]
            if not bounds or any(b <= a for a, b in zip(bounds, bounds[1:])) or bounds[0] <= 0:
                raise DataError(f"bucket_boundaries must be positive and strictly ascending, got {bounds}")
            return bounds
        if num_buckets is None:
            num_buckets = buckets.default_num_buckets(self._costs, self.max_batch_length)
        elif isinstance(num_buckets, bool) or not isinstance(num_buckets, int) or num_buckets < 1:
            raise DataError(f"num_buckets must be a positive int, got {num_buckets!r}")
        return buckets.equal_total_boundaries(self.lengths, num_buckets) or [self.max_batch_length]

    def _plan_options(self) -> dict:
        return {"max_batch_length": self.max_batch_length, "max_batch_size": self.max_batch_size,
                "pool_batches": self.pool_batches,
                "bucket_boundaries": list(self.bucket_boundaries), "shuffle": self.shuffle,
                "batch_ordering": self.batch_ordering, "drop_last": self.drop_last}

    def _plan(self, remaining: Optional[np.ndarray]) -> list:
        rng = np.random.default_rng([self.seed, self.epoch])
        if self.world_size > 1 and not self.drop_last:
            # several ranks cut the epoch in length order (speechkit.data.length_steps): no packing needed
            items = np.concatenate(self._bucket_items)
            if remaining is not None:
                items = items[remaining[items]]
            steps = deal_length_ordered(items, None, self._costs, self.world_size, self.max_batch_length,
                                        self.max_batch_size, rng=rng if self.shuffle else None)
            return self._ordered(steps, rng)
        sequences, cuts, offset = [], [np.zeros(1, dtype=np.int64)], 0
        for items in self._bucket_items:
            if self.shuffle:
                items = self._pool_sorted(rng.permutation(items))
            else:
                items = items[np.argsort(self.lengths[items], kind="stable")]
            if remaining is not None:
                items = items[remaining[items]]
            # each bucket packed on its own, so with one process no batch mixes two buckets
            bucket_cuts = buckets.greedy_cuts(self._costs[items], self.max_batch_length, self.max_batch_size)
            sequences.append(items)
            cuts.append(bucket_cuts[1:] + offset)
            offset += len(items)
        steps = deal_length_ordered(np.concatenate(sequences), np.concatenate(cuts), self._costs,
                                    self.world_size, self.max_batch_length, self.max_batch_size,
                                    self.drop_last, rng if self.shuffle else None)
        return self._ordered(steps, rng)

    def stats(self) -> dict:
        """As for every training sampler, plus ``budget_fill``: mean padded cost / ``max_batch_length``."""
        stats = super().stats()
        mine = [step.batches[self.rank] for step in self._current().steps]
        costs = [buckets.batch_cost(batch, self.lengths, self.cost) for batch in mine]
        stats["budget_fill"] = float(np.mean(costs)) / self.max_batch_length if costs else None
        return stats

    def _pool_sorted(self, items: np.ndarray) -> np.ndarray:
        """Sort shuffled items by length within pools of about ``pool_batches`` batches.

        Random pools keep the batches' composition random from epoch to epoch, while sorting inside a pool
        puts items of nearly equal length together, which narrow buckets alone would only buy with many
        buckets (and many part-filled batches).
        """
        if self.pool_batches <= 1 or items.size == 0:
            return items
        longest = float(self.lengths[items].max())
        per_batch = max(1, int(self.max_batch_length // max(self.cost(longest), 1e-12)))
        if self.max_batch_size is not None:
            per_batch = min(per_batch, self.max_batch_size)
        pool = per_batch * self.pool_batches
        whole = items.size - items.size % pool
        rows = items[:whole].reshape(-1, pool)  # whole pools as rows, sorted in one call
        rows = np.take_along_axis(rows, np.argsort(self.lengths[rows], axis=1, kind="stable"), axis=1)
        tail = items[whole:]
        return np.concatenate([rows.ravel(), tail[np.argsort(self.lengths[tail], kind="stable")]])

    def _ordered(self, steps: list, rng: np.random.Generator) -> list:
        if self.batch_ordering == "random":
            return [steps[index] for index in rng.permutation(len(steps))]
        longest = [max(float(self.lengths[list(batch)].max()) for batch in step.batches) for step in steps]
        order = np.argsort(longest, kind="stable")
        if self.batch_ordering == "descending":
            order = np.argsort([-value for value in longest], kind="stable")
        return [steps[index] for index in order]


__all__ = ["FixedBatchSampler", "DynamicBatchSampler", "EvalBatchSampler", "Step", "padding_stats"]
