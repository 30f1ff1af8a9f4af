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
    return lambda length: float(length) + float(length) ** 2 / scale


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


def default_num_buckets(lengths: np.ndarray, max_batch_length: float, cost: CostFunction) -> int:
    """A bucket count that keeps buckets narrow yet several batches deep.

    About one bucket per four batches of the epoch, between 1 and 100: fewer buckets pad more, more buckets
    make the batch composition less random and leave more part-filled batches.
    """
    if len(lengths) == 0:
        return 1
    padded_total = sum(cost(length) for length in lengths)
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


def resplit(items: Sequence[int], batches: list, target: int, lengths: np.ndarray, cost: CostFunction,
            max_cost: float, max_size: Optional[int] = None) -> list:
    """Re-cut ``items`` into exactly ``target`` consecutive batches that all respect the budget.

    ``batches`` is a valid packing of the same items (e.g. from :func:`pack_greedy`) with at most ``target``
    batches, and ``target`` is at most the number of items. Near-equal batch sizes are tried first (they keep
    every batch about as full); if one of those breaks the budget, the largest batches of ``batches`` are
    halved until there are ``target`` (a part of a valid batch is valid).
    """
    count = len(items)
    if not len(batches) <= target <= count:
        raise DataError(f"cannot cut {count} items packed in {len(batches)} batches into {target} batches")
    sizes = [count // target + (1 if position < count % target else 0) for position in range(target)]
    even, start = [], 0
    for size in sizes:
        even.append(list(items[start:start + size]))
        start += size
    if all(fits(batch, lengths, cost, max_cost, max_size) for batch in even):
        return even
    halved = [list(batch) for batch in batches]
    while len(halved) < target:
        largest = max(range(len(halved)), key=lambda position: len(halved[position]))
        batch = halved[largest]
        middle = len(batch) // 2
        halved[largest:largest + 1] = [batch[:middle], batch[middle:]]
    return halved


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
