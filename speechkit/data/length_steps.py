"""Dealing an epoch of dynamic batches to ranks: full batches of neighbouring lengths at any world size.

With one rank, the batches :class:`speechkit.data.samplers.DynamicBatchSampler` packs (greedily, bucket by
bucket) are the steps. With ``W`` ranks, let ``N`` be the number of batches the epoch's items take when
packed greedily in length order (the fewest: bucket ends would leave part-filled batches). The epoch then
needs ``q = ceil(N / W)`` steps of ``W`` batches, ``T = q * W`` batches: the epoch's items
are put in length order (items within ``LENGTH_GRAIN`` of each other in random order per (seed, epoch), so
batches change from epoch to epoch) and cut, from the longest down, into ``T`` batches of about equal
padded cost (:func:`speechkit.data.buckets.balanced_cuts`); each ``W`` consecutive batches make a step. So

* the batches of a step hold neighbouring lengths and about the same padded cost: no rank waits;
* every batch is about as full as with one process: only the ``T - N`` batches needed to round up to whole
  steps are shared out over the epoch, a loss below ``1 / q`` of the fill, instead of re-cutting every
  bucket into a multiple of ``W`` batches;
* every item is used exactly once. Items are repeated only when the epoch has fewer items than the ``T``
  batches it needs (e.g. fewer items than ranks, or ``max_batch_size=1``): then every item makes its own
  batch and the shortest items fill the batches still missing.

A step of the epoch's longest items holds batches of a few items each, whose padded cost moves by a whole
long item at a time; where an even share per batch leaves a step's batches more than ``MAX_SPREAD`` apart,
that step is cut again so that every batch's cost lies in one window ``[top / MAX_SPREAD, top]`` (items
too long to lead a batch in the window fill longer batches), and the rest of the epoch is balanced anew.
A window exists unless the longest items are a sparse tail (a lone item far longer than the next ones):
then the step stays as the balanced cut made it.

When the balanced cut does not fit the budget (an epoch that just fills its ``q`` steps leaves almost no
room for evening out coarse long items), it is tried with up to ``EXTRA_STEPS`` more steps (a cut with
fewer than ``TIGHT`` spare batches gets one pass before that); failing that,
the packed batches themselves are dealt in length order, the largest split until their count is a
multiple of ``W``.

With ``drop_last`` the bucket-packed batches are dealt instead: the ``N' mod W`` least filled of them
(``N'`` packed) are dropped and the rest is cut evenly into ``N' - (N' mod W)`` batches (or, if that does
not fit, dealt as packed).

Example:
    >>> costs = np.array([2.0, 2.0, 2.0, 2.0, 9.0, 9.0])
    >>> items, cuts = np.arange(6), np.array([0, 4, 6])  # two batches: 4 x 2.0 and 2 x 9.0
    >>> [step.batches for step in deal_length_ordered(items, cuts, costs, 2, max_cost=18.0)]
    [((4, 5), (0, 1, 2, 3))]
"""
from __future__ import annotations

import heapq
from typing import Optional

import numpy as np

from speechkit.data.buckets import BALANCE_PASSES, balanced_cuts, greedy_cuts
from speechkit.data.sharding import Step

LENGTH_GRAIN = 0.01  # items whose costs differ by less than 1% are shuffled among each other
EXTRA_STEPS = 2  # steps a balanced cut may add to the fewest that hold the epoch, before giving up on it
TIGHT = 0.002  # with fewer spare batches than this share, one balancing pass is tried before a step more
MAX_SPREAD = 1.2  # longest / shortest padded batch cost a step may have (the slowest rank's wait)
RECUTS = 4  # most steps re-cut into a cost window (the coarse steps of the longest items: a few at most)
WINDOWS = 64  # tops of the cost windows tried per re-cut step, from the budget down to half of it
SPAN = 32  # most items per batch a re-cut step may hold (more items per batch are fine-grained anyway)


def deal_length_ordered(items: np.ndarray, cuts: Optional[np.ndarray], costs: np.ndarray, world_size: int,
                        max_cost: float, max_size: Optional[int] = None, drop_last: bool = False,
                        rng: Optional[np.random.Generator] = None) -> list:
    """Steps of ``world_size`` batches over a packed epoch (see the module docstring).

    Arguments:
        items: ``(n,)`` dataset indices in packing order.
        cuts: ``(N + 1,)`` offsets of the ``N`` packed batches into ``items``, each within the budget; may
            be None with several ranks and no ``drop_last`` (the items are then only cut in length order).
        costs: cost of every dataset item (indexed by dataset index).
        max_cost, max_size: the budget and item cap every batch keeps.
        drop_last: drop the ``N mod world_size`` least-filled batches instead of sharing them out.
        rng: shuffles items of about equal length (None: ties keep packing order).

    Returns:
        Steps from the longest items down (the sampler orders them afterwards).
    """
    items = np.asarray(items, dtype=np.int64)
    if len(items) == 0:
        return []
    if cuts is not None:
        cuts = np.asarray(cuts, dtype=np.int64)
    if world_size == 1 or drop_last:
        if cuts is None:
            raise ValueError("one rank and drop_last deal the packed batches: give their cuts")
        items, cuts = _packed(items, cuts, costs, world_size, drop_last)
        if world_size == 1 or len(cuts) <= 1:
            flat, bounds = items.tolist(), cuts.tolist()
            return [Step((tuple(flat[start:stop]),)) for start, stop in zip(bounds[:-1], bounds[1:])]
    order = _longest_first(items, costs, rng)
    ordered_costs = costs[order]
    # as many steps as the items packed in length order need (the packed batches, when dropping the rest)
    fewest = len(cuts) - 1 if drop_last else _fewest_batches(ordered_costs, max_cost, max_size)
    if cuts is not None:
        fewest = min(fewest, len(cuts) - 1)
    wanted = -(-fewest // world_size) * world_size
    if len(items) < wanted:
        return _singles_with_repeats(items, costs, wanted, world_size)
    cut = None
    for extra in range(0 if drop_last else EXTRA_STEPS + 1):  # a tight epoch may even out only a step later
        if len(items) < wanted + extra * world_size:
            break
        parts = wanted + extra * world_size
        tight = parts - fewest < TIGHT * parts and extra < EXTRA_STEPS  # one pass, then a step more
        cut = balanced_cuts(ordered_costs, parts, max_cost, max_size, group=world_size,
                            passes=1 if tight else BALANCE_PASSES)
        if cut is not None:
            wanted += extra * world_size
            arrangement, cut = _even_coarse_steps(ordered_costs, cut, world_size, max_cost, max_size,
                                                  passes=1 if tight else BALANCE_PASSES)
            order = order[arrangement]
            break
    if drop_last and cut is None:
        cut = balanced_cuts(ordered_costs, wanted, max_cost, max_size, group=world_size)
    if cut is None:  # the packed batches then, or the items greedily packed in length order
        if cuts is None:
            items, cuts = order, greedy_cuts(ordered_costs, max_cost, max_size)
        wanted = -(-(len(cuts) - 1) // world_size) * world_size
        return _split_largest(np.split(items, cuts[1:-1]), costs, wanted, world_size)
    flat = order.tolist()
    chunks = [tuple(flat[start:stop]) for start, stop in zip(cut[:-1].tolist(), cut[1:].tolist())]
    return [Step(tuple(chunks[start:start + world_size])) for start in range(0, wanted, world_size)]


def _step_spreads(costs: np.ndarray, cut: np.ndarray, world_size: int) -> np.ndarray:
    """``(steps,)`` longest / shortest padded cost among the batches of each step of ``cut``."""
    padded = (np.diff(cut) * np.maximum.reduceat(costs, cut[:-1])).reshape(-1, world_size)
    return padded.max(axis=1) / np.maximum(padded.min(axis=1), 1e-300)


def _even_coarse_steps(costs: np.ndarray, cut: np.ndarray, world_size: int, max_cost: float,
                       max_size: Optional[int], passes: int) -> tuple:
    """``(arrangement, cut)``: ``cut`` with its uneven steps (spread over ``MAX_SPREAD``) re-cut into a cost
    window where one fits; ``arrangement`` reorders ``costs`` (the items of re-cut steps) to match.

    A batch of the longest items gains or loses a whole long item at a time (three 53 s items make 160 s,
    four 47 s items 187 s, three 140 s), so aiming every batch at one share can leave a step's batches
    more than ``MAX_SPREAD`` apart. Such a step is cut again by :func:`_window_step` with the windows
    ``[top / MAX_SPREAD, top]``, ``top`` from the budget down: the fullest window that gives the step its
    ``world_size`` batches and leaves the rest of the epoch a fitting balanced cut wins; otherwise the step
    stays as it was. Only the first ``RECUTS`` uneven steps are looked at (the coarse ones are few).
    """
    count = len(costs)
    arrangement = np.arange(count)
    limit = count if max_size is None else max_size
    steps, looked_at = (len(cut) - 1) // world_size, 0
    for _ in range(RECUTS):
        uneven = np.flatnonzero(_step_spreads(costs, cut, world_size)[looked_at:] > MAX_SPREAD)
        if uneven.size == 0:
            break
        step = looked_at + int(uneven[0])
        looked_at = step + 1
        start, later = int(cut[step * world_size]), (steps - step - 1) * world_size
        region = costs[start:start + min(count - start, SPAN * world_size)]
        for top in (max_cost * np.linspace(1.0, 0.5, WINDOWS)).tolist():
            found = _window_step(region, top, world_size, limit)
            if found is None:
                continue
            moved, inner = start + found[0], start + found[1]
            stop = int(inner[-1])
            spread = _step_spreads(costs[moved], inner - start, world_size).max()
            if count - stop < later or spread > MAX_SPREAD:
                continue
            rest = (balanced_cuts(costs[stop:], later, max_cost, max_size, group=world_size, passes=passes)
                    if later else (np.zeros(1, dtype=np.int64) if stop == count else None))
            if rest is not None:
                arrangement[start:stop] = arrangement[moved]
                costs = np.concatenate([costs[:start], costs[moved], costs[stop:]])
                cut = np.concatenate([cut[:step * world_size], inner, stop + rest[1:]])
                break
    return arrangement, cut


def _window_step(costs: np.ndarray, top: float, world_size: int, limit: int) -> Optional[tuple]:
    """One step of ``world_size`` batches from the head of ``costs`` (longest first), every batch's padded
    cost within ``[top / MAX_SPREAD, top]``, or None.

    Going down the items, an item *leads* a new batch of as many items as fit below ``top`` at the
    longest cost from it on, if that many reach the window's bottom at its own cost, and only when the
    items after it would otherwise run out of open places (an item that cannot lead must fill one);
    every other item fills the earliest open place of a batch led by a longer item.

    Returns:
        ``(positions, cuts)``: the step's items as positions in ``costs``, batch by batch, and the
        ``(world_size + 1,)`` offsets of its batches among them.
    """
    ceiling = np.maximum.accumulate(costs[::-1])[::-1]  # the longest item a batch led from here can hold
    sizes = np.minimum(np.floor(top / np.maximum(ceiling, 1e-300)), limit).astype(np.int64)
    can_lead = (sizes >= 1) & (sizes * costs >= top / MAX_SPREAD)
    # places that must be open on arriving at an item for the walk to go on: each item that cannot lead
    # takes one, a leader opens ``size - 1`` (the largest sum of that balance over the items from there)
    balance = np.concatenate([np.cumsum(np.where(can_lead, 1 - sizes, 1)[::-1])[::-1], [0]])
    needed = (balance - np.minimum.accumulate(balance[::-1])[::-1])[1:].tolist()
    if not can_lead[0]:
        return None
    can, size = can_lead.tolist(), sizes.tolist()
    leaders, places, open_places, end = [], [], 0, None
    for row in range(len(can)):
        if len(leaders) == world_size and open_places == 0:
            end = row
            break
        if len(leaders) < world_size and can[row] and open_places <= needed[row]:
            leaders.append(row)
            places.append(size[row] - 1)
            open_places += size[row] - 1
        elif open_places == 0:
            return None
        else:
            open_places -= 1
    else:
        if len(leaders) == world_size and open_places == 0:
            end = len(can)
    if end is None:
        return None
    batch_of = np.empty(end, dtype=np.int64)
    led = np.asarray(leaders, dtype=np.int64)
    batch_of[led] = np.arange(world_size)
    fillers = np.setdiff1d(np.arange(end), led)
    # the n-th filler takes the n-th open place, the earliest batches' first
    batch_of[fillers] = np.searchsorted(np.cumsum(places), np.arange(fillers.size), side="right")
    return np.argsort(batch_of, kind="stable"), np.concatenate([[0], np.cumsum(np.asarray(places) + 1)])


def _packed(items: np.ndarray, cuts: np.ndarray, costs: np.ndarray, world_size: int,
            drop_last: bool) -> tuple:
    """The packed batches (items, cuts), without the ``N mod world_size`` least filled with ``drop_last``."""
    count = len(cuts) - 1
    if not drop_last or count % world_size == 0:
        return items, cuts
    sizes = np.diff(cuts)
    keep = np.ones(count, dtype=bool)
    padded = sizes * np.maximum.reduceat(costs[items], cuts[:-1])
    keep[np.argsort(padded, kind="stable")[:count % world_size]] = False
    return items[np.repeat(keep, sizes)], np.concatenate([[0], np.cumsum(sizes[keep])])


def _fewest_batches(ordered_costs: np.ndarray, max_cost: float, max_size: Optional[int]) -> int:
    """Batches that greedy packing of the items in (about) descending cost makes: each batch takes as many
    items as its first, longest one allows (bounded by the longest item from there on)."""
    ceiling = np.maximum.accumulate(ordered_costs[::-1])[::-1]
    per_batch = np.minimum(np.floor(max_cost / np.maximum(ceiling, 1e-300)), len(ordered_costs))
    if max_size is not None:
        per_batch = np.minimum(per_batch, max_size)
    jump = (np.arange(len(ordered_costs)) + np.maximum(per_batch, 1).astype(np.int64)).tolist()
    position, batches = 0, 0
    while position < len(jump):
        position, batches = jump[position], batches + 1
    return batches


def _longest_first(items: np.ndarray, costs: np.ndarray, rng: Optional[np.random.Generator]) -> np.ndarray:
    """``items`` by descending cost; with ``rng``, items within ``LENGTH_GRAIN`` of each other in random
    order (each cost is rounded to a grain of a geometric grid, then a random tie-break)."""
    item_costs = costs[items]
    if rng is None:
        return items[np.argsort(-item_costs, kind="stable")]
    grain = np.floor(np.log(np.maximum(item_costs, 1e-12)) / np.log1p(LENGTH_GRAIN))
    return items[np.argsort(-grain + rng.random(len(items)) * 0.5, kind="stable")]


def _split_largest(batches: list, costs: np.ndarray, wanted: int, world_size: int) -> list:
    """The packed batches in order of their longest item, split until there are ``wanted``: always the one
    with the most items per piece, so every piece is part of a batch within budget."""
    batches = sorted(batches, key=lambda batch: -float(costs[batch].max()))
    pieces = [1] * len(batches)
    heap = [(-len(batch), position) for position, batch in enumerate(batches)]
    heapq.heapify(heap)
    for _ in range(wanted - len(batches)):
        _, position = heapq.heappop(heap)
        pieces[position] += 1
        heapq.heappush(heap, (-len(batches[position]) / pieces[position], position))
    chunks = [tuple(piece.tolist()) for batch, count in zip(batches, pieces)
              for piece in np.array_split(batch, count)]
    return [Step(tuple(chunks[start:start + world_size])) for start in range(0, wanted, world_size)]


def _singles_with_repeats(items: np.ndarray, costs: np.ndarray, wanted: int, world_size: int) -> list:
    """Every item alone, longest first, then the shortest items again for the batches still missing."""
    by_cost = items[np.argsort(-costs[items], kind="stable")].tolist()
    singles = [(index,) for index in by_cost] + [(by_cost[-1 - position % len(by_cost)],)
                                                 for position in range(wanted - len(by_cost))]
    return [Step(tuple(singles[start:start + world_size])) for start in range(0, wanted, world_size)]
