"""Dealing batches to ranks: equal step counts for training, disjoint shards for evaluation.

A training *step* is one batch per rank, all taken from the same stretch of the epoch's global order (for
dynamic batching: neighbours in length order, see :mod:`speechkit.data.length_steps`), so the ranks of a
step do about the same work and none waits on another's long batch. Every rank gets the same number of
steps, which keeps collectives in lockstep.

Tail rule for a fixed batch size ``B`` on ``W`` ranks, ``M`` items left: full steps take ``W * B`` items
each. The ``R = M mod (W * B)`` items left over are split into ``W`` near-equal batches (one last, smaller
step). If ``R < W`` some rank would get nothing, so the last full step and the ``R`` items are re-split into
two steps of ``2 * W`` near-equal batches instead (sizes at least ``B // 2``). Items are repeated only when
that is impossible too (``B == 1`` or fewer items than ranks): then the ranks short of an item get one from
the start of the order. ``drop_last=True`` drops the ``R`` items instead, so every batch has exactly ``B``
items.

Example:
    >>> [step.batches for step in deal_fixed([0, 1, 2, 3, 4, 5, 6], batch_size=2, world_size=2)]
    [((0, 1), (2, 3)), ((4, 5), (6,))]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from speechkit.errors import DataError


class Step(NamedTuple):
    """One training step: ``batches[r]`` is rank ``r``'s batch (dataset indices); ``bucket`` its bucket."""

    batches: tuple
    bucket: int = 0


def check_rank(rank: int, world_size: int) -> None:
    """Raise DataError unless ``0 <= rank < world_size``."""
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise DataError(f"sampler {name} must be an int, got {value!r}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise DataError(f"sampler rank {rank} is outside world_size {world_size} "
                        "(need 0 <= rank < world_size)")


def split_even(items: Sequence[int], parts: int) -> list:
    """Cut ``items`` into ``parts`` consecutive chunks whose sizes differ by at most one (early ones larger).

    Example:
        >>> split_even([0, 1, 2, 3, 4], 3)
        [[0, 1], [2, 3], [4]]
    """
    count = len(items)
    chunks, start = [], 0
    for part in range(parts):
        size = count // parts + (1 if part < count % parts else 0)
        chunks.append(list(items[start:start + size]))
        start += size
    return chunks


def fill_empty(chunks: list, pool: Sequence[int]) -> list:
    """Give every empty chunk one item from ``pool`` (cycling), the last resort of the tail rule."""
    filled, cursor = [], 0
    for chunk in chunks:
        if not chunk:
            chunk = [pool[cursor % len(pool)]]
            cursor += 1
        filled.append(chunk)
    return filled


def steps_of(batches: list, world_size: int, bucket: int = 0) -> list:
    """Group consecutive batches ``world_size`` at a time into steps (``len(batches)`` must divide)."""
    if len(batches) % world_size:
        raise DataError(f"{len(batches)} batches cannot be dealt evenly to {world_size} ranks")
    return [Step(tuple(tuple(batch) for batch in batches[start:start + world_size]), bucket)
            for start in range(0, len(batches), world_size)]


def deal_fixed(order: Sequence[int], batch_size: int, world_size: int, drop_last: bool = False) -> list:
    """Steps of ``batch_size`` items per rank over ``order`` (see the module docstring for the tail rule)."""
    count = len(order)
    per_step = batch_size * world_size
    full = count // per_step
    left = count - full * per_step
    batches = [list(order[start:start + batch_size]) for start in range(0, full * per_step, batch_size)]
    if left == 0 or drop_last:
        return steps_of(batches, world_size)
    if left < world_size and full >= 1 and batch_size >= 2:
        batches = batches[:-world_size]
        tail = split_even(order[(full - 1) * per_step:], 2 * world_size)
    else:
        tail = fill_empty(split_even(order[full * per_step:], world_size), order)
    return steps_of(batches + tail, world_size)


def shard_round_robin(order: Sequence[int], rank: int, world_size: int) -> list:
    """Rank ``rank``'s evaluation shard: every ``world_size``-th item of ``order`` starting at ``rank``.

    Shards are disjoint, together hold every item once, and differ in size by at most one item; dealing a
    length-sorted order round-robin also gives every rank about the same amount of audio.

    Example:
        >>> shard_round_robin([0, 1, 2, 3, 4], rank=1, world_size=2)
        [1, 3]
    """
    return list(order[rank::world_size])
