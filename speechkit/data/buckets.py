"""Length buckets and batch packing: the arithmetic under dynamic batching.

Items of similar length go to the same bucket; inside a bucket they are packed into batches whose *padded
cost* (number of items x cost of the longest item) stays within a budget. With the identity cost the budget is
the padded length of a batch (e.g. seconds of audio once padded), which is what a model's memory grows with.
A quadratic term (``length + length**2 / q``) charges long items for self-attention, so they make smaller
batches.

Everything here is pure: lists of dataset indices in, lists of index lists out; no randomness, ranks or files.

Example:
    >>> lengths = np.array([1.0, 1.2, 5.0, 5.5, 9.0])
    >>> bounds = equal_total_boundaries(lengths, num_buckets=2)
    >>> bounds
    [5.5, 9.0]
    >>> assign_buckets(lengths, bounds).tolist()
    [0, 0, 0, 0, 1]
    >>> pack_greedy([0, 1, 2], lengths, cost_function(None), max_cost=10.0)
    [[0, 1], [2]]
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Callable, Optional, Union

import numpy as np

from speechkit.errors import DataError

CostFunction = Callable[[float], float]
GROUP_MARGIN = 1.25  # balanced_cuts evens a group out to its coarse first batch only this far below its share
BALANCE_PASSES = 3  # most passes of balanced_cuts (each re-weighs the items by the last one's padding)
SORTS = (None, "ascending", "descending")
LengthCost = Union[None, float, int, CostFunction]


def cost_function(length_cost: LengthCost) -> CostFunction:
    """The cost of one item of a given length.

    Arguments:
        length_cost: ``None`` for the length itself; a number ``q`` for ``length + length**2 / q`` (attention:
            an item ``q`` long costs twice its length); or any callable ``length -> cost`` that grows with
            the length.

    Example:
        >>> cost_function(10.0)(20.0)
        60.0
    """
    if length_cost is None:
        return float
    if callable(length_cost):
        return length_cost
    if isinstance(length_cost, bool) or not isinstance(length_cost, (int, float)) or not length_cost > 0:
        raise DataError(f"length_cost must be None, a positive number q (cost = length + length^2/q) or a "
                        f"callable, got {length_cost!r}")
    scale = float(length_cost)

    def quadratic(length: float) -> float:
        return float(length) + float(length) ** 2 / scale

    quadratic.quadratic_scale = scale  # lets item_costs compute it on arrays
    return quadratic


def equal_total_boundaries(lengths: np.ndarray, num_buckets: int) -> list:
    """Upper bucket boundaries that split the items into buckets of (about) equal total length.

    Short items are many and long items few, so equal-count buckets would make the long buckets very wide;
    equal total length gives narrow buckets where the audio is. The last boundary is the longest item.

    Returns:
        Ascending list of at most ``num_buckets`` distinct upper bounds (a bucket holds lengths in
        ``(previous bound, bound]``).
    """
    if num_buckets < 1:
        raise DataError(f"num_buckets must be at least 1, got {num_buckets}")
    ordered = np.sort(np.asarray(lengths, dtype=np.float64))
    if ordered.size == 0:
        return []
    cumulative = np.cumsum(ordered)
    total = cumulative[-1]
    bounds = []
    for bucket in range(1, num_buckets):
        position = int(np.searchsorted(cumulative, total * bucket / num_buckets, side="left"))
        bounds.append(float(ordered[min(position, ordered.size - 1)]))
    bounds.append(float(ordered[-1]))
    return sorted(set(bounds))


def default_num_buckets(costs: np.ndarray, max_batch_length: float) -> int:
    """A bucket count that keeps buckets narrow yet several batches deep.

    About one bucket per four batches of the epoch, between 1 and 100: fewer buckets pad more, more buckets
    make the batch composition less random and leave more part-filled batches.
    """
    if len(costs) == 0:
        return 1
    padded_total = float(np.sum(costs))
    estimated_batches = padded_total / max_batch_length
    return int(min(100, max(1, round(estimated_batches / 4))))


def assign_buckets(lengths: np.ndarray, boundaries: Sequence[float]) -> np.ndarray:
    """Bucket index of each item: the first boundary >= its length; longer items go to an extra last bucket.

    Example:
        >>> assign_buckets(np.array([0.5, 2.0, 7.0]), [1.0, 5.0]).tolist()
        [0, 1, 2]
    """
    return np.searchsorted(np.asarray(boundaries, dtype=np.float64), np.asarray(lengths, dtype=np.float64),
                           side="left")


def batch_cost(batch: Sequence[int], lengths: np.ndarray, cost: CostFunction) -> float:
    """Padded cost of a batch: its size times the cost of its longest item."""
    return len(batch) * cost(max(lengths[index] for index in batch)) if batch else 0.0


def fits(batch: Sequence[int], lengths: np.ndarray, cost: CostFunction, max_cost: float,
         max_size: Optional[int]) -> bool:
    """Whether a batch respects both the padded-cost budget and the item cap."""
    if max_size is not None and len(batch) > max_size:
        return False
    return batch_cost(batch, lengths, cost) <= max_cost


def pack_greedy(items: Sequence[int], lengths: np.ndarray, cost: CostFunction, max_cost: float,
                max_size: Optional[int] = None) -> list:
    """Cut ``items`` (in their order) into consecutive batches, each as large as the budget allows.

    Raises:
        DataError: an item alone already exceeds ``max_cost`` (its index and length are named).
    """
    batches: list = []
    current: list = []
    current_max = -math.inf
    for index in items:
        length = lengths[index]
        longest = max(current_max, length)
        size = len(current) + 1
        if current and (size * cost(longest) > max_cost or (max_size is not None and size > max_size)):
            batches.append(current)
            current, longest = [], length
        if not current and cost(length) > max_cost:
            raise DataError(f"item {index} has length {length:g} (cost {cost(length):g}), more than "
                            f"max_batch_length={max_cost:g}: it fits in no batch (filter long items out, "
                            "e.g. dataset.filtered_sorted(key_max_value=...), or raise max_batch_length)")
        current.append(index)
        current_max = longest
    if current:
        batches.append(current)
    return batches


def item_costs(lengths: np.ndarray, cost: CostFunction) -> np.ndarray:
    """The cost of every item as a float64 array (vectorised for the built-in costs).

    Example:
        >>> item_costs(np.array([1.0, 4.0]), cost_function(2.0)).tolist()
        [1.5, 12.0]
    """
    lengths = np.asarray(lengths, dtype=np.float64)
    if cost is float:
        return lengths.copy()
    scale = getattr(cost, "quadratic_scale", None)
    if scale is not None:
        return lengths + lengths ** 2 / scale  # the same float operations as the scalar cost
    return np.fromiter((cost(float(length)) for length in lengths), dtype=np.float64, count=lengths.size)


def greedy_cuts(costs: np.ndarray, max_cost: float, max_size: Optional[int] = None) -> np.ndarray:
    """Where :func:`pack_greedy` would cut a sequence whose items cost ``costs`` (in their order).

    The same batches as :func:`pack_greedy`, computed a batch at a time with array operations (a batch is
    the longest prefix whose size x running maximum stays within ``max_cost``), which is what makes
    planning an epoch of a million items take well under a second.

    Returns:
        ``(batches + 1,)`` int64 offsets: batch ``k`` is ``costs[cuts[k]:cuts[k + 1]]``.

    Example:
        >>> greedy_cuts(np.array([1.0, 1.2, 5.0]), max_cost=10.0).tolist()
        [0, 2, 3]
    """
    count = len(costs)
    cuts = [0]
    if count == 0:
        return np.asarray(cuts, dtype=np.int64)
    smallest = float(costs.min())
    window = count if smallest <= 0 else min(count, int(max_cost // smallest) + 1)
    if max_size is not None:
        window = min(window, max_size)
    sizes = np.arange(1, window + 1, dtype=np.float64)
    start = 0
    while start < count:
        stop = min(count, start + window)
        running = np.maximum.accumulate(costs[start:stop])
        # size x running max only grows along the prefix, so the fitting prefix is the count of fits
        taken = int(np.count_nonzero(sizes[:stop - start] * running <= max_cost))
        start += max(taken, 1)
        cuts.append(start)
    return np.asarray(cuts, dtype=np.int64)


def balanced_cuts(costs: np.ndarray, parts: int, max_cost: float, max_size: Optional[int] = None,
                  group: int = 1, passes: int = BALANCE_PASSES) -> Optional[np.ndarray]:
    """Cut a sequence of items, longest first, into exactly ``parts`` batches of about equal padded cost.

    ``costs`` runs from the longest items down (it may be only roughly sorted: the cost of a batch is
    bounded by the largest cost from its first item on). Each batch takes the number of items whose padded
    cost comes nearest to its equal share of the cost still to place (the remaining total over the
    remaining batches), never more than the budget or the item cap allow. Long items are coarse, so they
    go first, while many batches are left to even out the rounding; short items at the end are
    fine-grained. A first pass weighs every item by the cost of an item about half a batch longer (what it
    adds to its batch once padded); where that estimate is too far off for the last batch to fit (sparse
    tails of the distribution), the next pass weighs every item by the padding of its batch in the pass
    before, up to ``passes`` passes.

    With ``group`` > 1, batches are dealt in groups of that many consecutive ones (the steps of a
    distributed epoch): when the budget keeps a group's first batch, whose long items are the coarsest to
    share out, below its share (three 53 s items in a 200 s budget cannot exceed 160 s), the group's other
    batches aim at that batch's cost instead, so that a group stays even; but only down to
    ``1 / GROUP_MARGIN`` of the share: a first batch further below (one item of 52 s in a 100 s budget)
    stays the one short batch of its group, as starving the whole group would cost more.

    Returns:
        ``(parts + 1,)`` offsets as for :func:`greedy_cuts`, or None when no pass fits the items in
        ``parts`` batches (or there are fewer items than parts).

    Example:
        >>> costs = np.array([4.0, 3.0, 3.0, 2.0, 2.0, 2.0, 1.0, 1.0])
        >>> balanced_cuts(costs, parts=3, max_cost=9.0).tolist()  # padded 2 x 4, 2 x 3, 4 x 2
        [0, 2, 4, 8]
    """
    count = len(costs)
    if parts < 1 or count < parts:
        return None
    ceiling = np.maximum.accumulate(costs[::-1])[::-1]  # bounds the cost of a batch starting here
    limit = count if max_size is None else max_size
    # What an item adds to its batch's padded cost is about the longest item of its batch: half a batch
    # (of about the mean share) before it.
    per_batch = np.minimum(float(np.sum(costs)) / parts / np.maximum(costs, 1e-300), count)
    first = np.maximum(np.arange(count) - (per_batch / 2).astype(np.int64), 0)
    weights = ceiling[first]
    for _ in range(passes):
        cuts = _share_cuts(weights, ceiling, parts, max_cost, limit, group)
        sizes = np.diff(cuts)
        padded = sizes * np.maximum.reduceat(costs, cuts[:-1])
        if padded.max() <= max_cost and sizes.max() <= limit:
            return cuts
        real = np.add.reduceat(costs, cuts[:-1])
        weights = costs * np.repeat(padded / np.maximum(real, 1e-300), sizes)
    return None


def _nearest_in_ratio(items: float) -> int:
    """The whole number of items nearest ``items`` in ratio (4 or 5 for 4.4: 4.4 / 4 < 5 / 4.4), since the
    spread of a step is a ratio of padded costs."""
    lower = int(items)
    return lower + 1 if lower == 0 or items * items > lower * (lower + 1) else lower


def _share_cuts(weights: np.ndarray, ceiling: np.ndarray, parts: int, max_cost: float, limit: int,
                group: int) -> np.ndarray:
    """Offsets of ``parts`` consecutive batches, each padded to about its equal share of the remaining
    ``weights`` within the budget (and within its group's coarse first batch); the last group of batches
    shares what is left evenly (it may not fit)."""
    count = len(weights)
    placed = np.concatenate([[0.0], np.cumsum(weights)])
    total = float(placed[-1])
    cuts, position, group_cap = [0], 0, 0.0
    last_group = parts - (group if parts % group == 0 else 1)
    for index in range(last_group):
        left = parts - index
        longest = float(ceiling[position])
        most = min(count - position - (left - 1), limit)
        if index % group == 0:
            group_cap = 0.0
        if longest > 0:
            most = min(most, int(max_cost // longest))
            while most > 1 and most * longest > max_cost:  # floor division may round up
                most -= 1
            share = (total - float(placed[position])) / left
            # aim at the share, or at the group's first batch when its coarse long items cannot reach it
            size = _nearest_in_ratio((group_cap or share) / longest)
            if index % group == 0 and group > 1 and share / GROUP_MARGIN <= most * longest < share:
                group_cap = most * longest
            size = max(1, min(size, most))
        else:
            size = max(1, most)
        position += size
        cuts.append(position)
    # The last group shares its (shortest, finest) items at equal quantiles of their weight, so that what
    # the rounding left over is spread over the group rather than put in its last batch.
    left = parts - last_group
    quantiles = placed[position] + (total - placed[position]) * np.arange(1, left) / left
    inner = np.searchsorted(placed, quantiles, side="left") - 1
    rank = np.arange(1, left)
    inner = np.maximum.accumulate(np.maximum(inner, position + rank) - rank) + rank  # one item each at least
    inner = np.minimum(inner, count - left + rank)
    return np.asarray(cuts + inner.tolist() + [count], dtype=np.int64)


def check_lengths(lengths: Sequence[float], num_items: int) -> np.ndarray:
    """Lengths as a float64 array, checked: one per item, finite and not negative."""
    array = np.asarray(lengths, dtype=np.float64).reshape(-1)
    if array.size != num_items:
        raise DataError(f"got {array.size} lengths for {num_items} items")
    bad = np.flatnonzero(~np.isfinite(array) | (array < 0))
    if bad.size:
        raise DataError(f"item {int(bad[0])} has length {float(array[bad[0]])}; lengths must be finite and "
                        ">= 0")
    return array


def check_max_batch_size(max_batch_size: Optional[int]) -> None:
    if max_batch_size is not None and (isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int)
                                       or max_batch_size < 1):
        raise DataError(f"max_batch_size must be a positive int or None, got {max_batch_size!r}")


def sorted_order(lengths: np.ndarray, sort: str) -> np.ndarray:
    """Indices by length, ties in dataset order."""
    keys = lengths if sort == "ascending" else -lengths
    return np.argsort(keys, kind="stable")


def padding_stats(batches: Sequence[Sequence[int]], lengths: Optional[np.ndarray]) -> dict:
    """Batches, items, and real / padded total length (``None`` figures without lengths).

    Example:
        >>> padding_stats([[0, 1]], np.array([1.0, 3.0]))["padding_efficiency"]
        0.6666666666666666
    """
    items = sum(len(batch) for batch in batches)
    if lengths is None:
        return {"batches": len(batches), "items": items, "real_length": None, "padded_length": None,
                "padding_efficiency": None}
    real = float(sum(lengths[index] for batch in batches for index in batch))
    padded = float(sum(len(batch) * max(lengths[index] for index in batch) for batch in batches if batch))
    return {"batches": len(batches), "items": items, "real_length": real, "padded_length": padded,
            "padding_efficiency": real / padded if padded > 0 else None}
