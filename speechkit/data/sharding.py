"""Dealing batches to ranks: equal step counts for training, disjoint shards for evaluation.

A training *step* is one batch per rank, all taken from the same stretch of the epoch's global order (for
dynamic batching: from the same length bucket), so the ranks of a step do about the same work and none waits
on another's long batch. Every rank gets the same number of steps, which keeps collectives in lockstep.

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


def deal_buckets(sequences: Sequence[Sequence[int]], pack, resplit, world_size: int,
                 drop_last: bool = False) -> list:
    """Steps whose ``world_size`` batches all come from one bucket, every bucket's items used once.

    Arguments:
        sequences: per bucket (shortest first), its items in the order they should be batched.
        pack: ``items -> batches``, a valid packing (e.g. :func:`speechkit.data.buckets.pack_greedy`).
        resplit: ``(items, batches, target) -> exactly target valid batches`` (see
            :func:`speechkit.data.buckets.resplit`).
        drop_last: keep only whole steps of each bucket's packing and drop the items left over, instead of
            re-cutting the bucket into a multiple of ``world_size`` (slightly smaller) batches.

    A bucket packed into ``n`` batches is re-cut into the next multiple of ``world_size``. A bucket with
    fewer items than ranks (or whose long items cannot fill whole steps) passes what is left to the next,
    longer bucket, so short items only ever join longer ones and the budget still holds. The longest bucket
    has nowhere to pass its items: when it cannot give every rank a batch of each of its steps (a few very
    long items, many ranks), it joins the bucket below it, and if that is still not enough it takes back
    the steps planned last. Only when nothing left can fill whole steps (e.g. fewer items than ranks, or
    ``max_batch_size=1``) does a rank short of an item repeat one.
    """
    sequences = [list(sequence) for sequence in sequences]
    while len(sequences) > 1 and not _fills_whole_steps(sequences[-1], pack, world_size):
        tail = sequences.pop()
        sequences[-1] += tail
    steps: list = []
    carry: list = []
    last = len(sequences) - 1
    for bucket, sequence in enumerate(sequences):
        items = carry + list(sequence)
        carry = []
        if not items:
            continue
        batches = pack(items)
        if drop_last:
            keep = len(batches) - len(batches) % world_size
            steps += steps_of(batches[:keep], world_size, bucket)
            continue
        if len(items) < world_size and bucket != last:
            carry = items
            continue
        wanted = -(-len(batches) // world_size) * world_size
        if wanted <= len(items):
            steps += steps_of(resplit(items, batches, wanted), world_size, bucket)
        elif bucket != last:
            keep = len(items) - len(items) % world_size  # a multiple of world_size below len(batches)
            used = batches[:keep]
            carry = items[sum(len(batch) for batch in used):]
            steps += steps_of(used, world_size, bucket)
        else:
            # Take back the previous steps until the items can fill whole steps (rarely needed: a few long
            # items left with a tight budget); repeat items only if even everything left cannot.
            while wanted > len(items) and steps:
                items = [index for batch in steps.pop().batches for index in batch] + items
                batches = pack(items)
                wanted = -(-len(batches) // world_size) * world_size
            if wanted <= len(items):
                steps += steps_of(resplit(items, batches, wanted), world_size, bucket)
                continue
            singles = resplit(items, batches, len(items))
            steps += steps_of(fill_empty(singles + [[]] * (wanted - len(items)), items), world_size, bucket)
    return steps


def _fills_whole_steps(items: list, pack, world_size: int) -> bool:
    """Whether ``items`` can be cut into a multiple of ``world_size`` non-empty batches within budget."""
    if not items:
        return False
    wanted = -(-len(pack(items)) // world_size) * world_size
    return wanted <= len(items)
