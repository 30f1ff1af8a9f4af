"""Dynamic batching from 1 to 1,024 simulated ranks: full batches, the budget, every item once, equal steps,
mid-epoch resume on another world size, and the remainder policies (drop_last, repeats)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from speechkit.data import buckets
from speechkit.data.length_steps import EXTRA_STEPS, deal_length_ordered
from speechkit.data.sampler_state import decode_mask
from speechkit.data.samplers import DynamicBatchSampler


def lognormal(count: int, longest: float, seed: int = 0) -> np.ndarray:
    """Up to ``count`` durations in seconds shaped like a speech corpus (median 5 s, a long right tail),
    without those over ``longest`` (the budget: such items are filtered out before batching)."""
    durations = np.round(np.random.default_rng(seed).lognormal(np.log(5.0), 0.5, count), 3)
    return durations[durations <= longest]


def planned(lengths, budget: float, world_size: int, epoch: int = 1, **options):
    sampler = DynamicBatchSampler(lengths, budget, seed=7, world_size=world_size, **options)
    sampler.set_epoch(epoch)
    return sampler, sampler.plan()


def padded(batch, lengths) -> float:
    return len(batch) * float(lengths[list(batch)].max())


def check_steps(steps: list, lengths: np.ndarray, budget: float, world_size: int) -> list:
    """Every step has one batch per rank, no batch breaks the budget; returns every item yielded."""
    assert all(len(step.batches) == world_size for step in steps)
    batches = [batch for step in steps for batch in step.batches]
    assert all(batch and padded(batch, lengths) <= budget for batch in batches)
    return [index for batch in batches for index in batch]


def mean_fill(steps: list, lengths: np.ndarray, budget: float) -> float:
    return float(np.mean([padded(batch, lengths) for step in steps for batch in step.batches])) / budget


def fill_floor(alone: list, steps: list, lengths: np.ndarray, budget: float) -> float:
    """One process's fill scaled by the share of batches whole steps need: all that may be lost."""
    world_size = len(steps[0].batches)
    return 0.98 * len(alone) / (world_size * len(steps)) * mean_fill(alone, lengths, budget)


def step_spreads(steps: list, lengths: np.ndarray) -> np.ndarray:
    """Longest / shortest padded cost among each step's batches."""
    costs = [[padded(batch, lengths) for batch in step.batches] for step in steps]
    return np.array([max(step) / min(step) for step in costs])


def test_batches_stay_full_at_1024_ranks():
    # 20,000 items of 2.85-3 s in 12 s batches: 4 items fill a batch, 5,000 batches make 4.9 steps of 1,024
    lengths = np.round(np.random.default_rng(3).uniform(2.85, 3.0, 20_000), 3)
    sampler, steps = planned(lengths, 12.0, 1024)
    items = check_steps(steps, lengths, 12.0, 1024)
    assert sorted(items) == list(range(len(lengths)))
    assert len(steps) == 5
    assert mean_fill(steps, lengths, 12.0) >= 0.9
    # 5,120 batches for 20,000 items: some hold 3 items instead of 4, the coarsest a step can be
    assert step_spreads(steps, lengths).max() <= 12.0 / (3 * 2.85)
    for rank in (0, 511, 1023):  # each rank yields its column of the plan, and as many batches as the others
        rank_sampler = DynamicBatchSampler(lengths, 12.0, seed=7, world_size=1024, rank=rank)
        rank_sampler.set_epoch(1)
        assert list(rank_sampler) == [list(step.batches[rank]) for step in steps]


def test_speech_lengths_at_1024_ranks_lose_only_the_rounding_to_whole_steps():
    budget = 20.0
    lengths = lognormal(20_000, budget)
    _, alone = planned(lengths, budget, 1)
    _, steps = planned(lengths, budget, 1024)
    assert sorted(check_steps(steps, lengths, budget, 1024)) == list(range(len(lengths)))
    # the fewest whole steps, or (a tight epoch of coarse 2-4 item batches) up to EXTRA_STEPS more
    assert -(-len(alone) // 1024) <= len(steps) <= -(-len(alone) // 1024) + EXTRA_STEPS
    assert mean_fill(steps, lengths, budget) >= fill_floor(alone, steps, lengths, budget)


@pytest.mark.parametrize("world_size, count, budget", [(2, 6_000, 200.0), (7, 6_000, 200.0),
                                                       (64, 20_000, 200.0), (1024, 100_000, 100.0)])
def test_steps_are_even_when_batches_hold_many_items(world_size, count, budget):
    lengths = lognormal(count, budget, seed=world_size)
    _, steps = planned(lengths, budget, world_size)
    assert sorted(check_steps(steps, lengths, budget, world_size)) == list(range(len(lengths)))
    assert len(steps) >= 4
    # rounding up to whole steps adds fewer than one step of batches: at most 1 / steps of the fill
    assert mean_fill(steps, lengths, budget) >= 0.95 * (len(steps) - 1) / len(steps)
    # batches of 5 or more items can match each other's padded cost within 1.2; fewer (the longest few
    # items of the epoch) are as coarse as one item in (items + 1)
    fine = [step for step in steps if min(len(batch) for batch in step.batches) >= 5]
    assert len(fine) >= len(steps) - 1
    assert step_spreads(fine, lengths).max() <= 1.2


@pytest.mark.parametrize("budget, seed", [(150.0, 0), (120.0, 2)])
@pytest.mark.parametrize("world_size", [4, 16, 64, 256])
def test_steps_of_the_longest_few_items_are_even_too(budget, seed, world_size):
    # 50,000 speech-like items up to 37-53 s: the longest step's batches hold 2-4 items, so their padded
    # cost moves by a whole long item at a time (an even share per batch left 1.22-1.41 between them)
    lengths = lognormal(50_000, budget, seed=seed)
    _, steps = planned(lengths, budget, world_size)
    assert sorted(check_steps(steps, lengths, budget, world_size)) == list(range(len(lengths)))
    assert min(len(batch) for step in steps for batch in step.batches) <= 4  # the coarse case is planned
    assert step_spreads(steps, lengths).max() <= 1.2
    assert mean_fill(steps, lengths, budget) >= 0.9


def test_same_seed_and_epoch_give_the_same_plan_at_scale():
    lengths = lognormal(5_000, 60.0)
    first = [step.batches for step in planned(lengths, 60.0, 64)[1]]
    assert first == [step.batches for step in planned(lengths, 60.0, 64)[1]]
    assert first != [step.batches for step in planned(lengths, 60.0, 64, epoch=2)[1]]


@pytest.mark.parametrize("before, after", [(1024, 37), (64, 1024), (1024, 1)])
def test_resume_mid_epoch_on_another_world_size(before, after):
    budget = 20.0
    lengths = lognormal(20_000, budget, seed=1)
    sampler, steps = planned(lengths, budget, before)
    iterator = iter(sampler)
    for _ in range(2):
        next(iterator)
    state = sampler.state_dict()
    seen = [index for step in steps[:2] for batch in step.batches for index in batch]
    assert state["num_consumed"] == len(seen)

    consumed = decode_mask(state["consumed"], len(lengths))
    rest = planned(lengths, budget, after)[0].plan(consumed)  # what every rank of the new world plans
    rest_items = check_steps(rest, lengths, budget, after)
    assert Counter(seen + rest_items) == Counter(range(len(lengths)))
    for rank in sorted({0, after - 1}):
        rank_sampler = DynamicBatchSampler(lengths, budget, seed=7, world_size=after, rank=rank)
        rank_sampler.load_state_dict(state)
        yielded = list(rank_sampler)
        assert yielded == [list(step.batches[rank]) for step in rest]
        assert len(yielded) == len(rest)
    alone = planned(lengths, budget, 1)[0].plan(consumed)
    assert mean_fill(rest, lengths, budget) >= fill_floor(alone, rest, lengths, budget)


def test_drop_last_drops_the_least_filled_remainder_only():
    budget = 20.0
    lengths = lognormal(20_000, budget, seed=2)
    _, alone = planned(lengths, budget, 1)
    _, steps = planned(lengths, budget, 1024, drop_last=True)
    items = check_steps(steps, lengths, budget, 1024)
    assert len(items) == len(set(items))
    batches = len(alone)
    assert len(steps) == batches // 1024
    dropped = len(lengths) - len(items)
    assert 0 < dropped <= (batches % 1024) * max(len(batch) for step in alone for batch in step.batches)


def test_items_repeat_only_when_there_are_fewer_items_than_batches_needed():
    lengths = np.arange(1.0, 11.0)  # one item per batch: 10 batches for 4 ranks need 12
    _, steps = planned(lengths, 100.0, 4, max_batch_size=1)
    counts = Counter(check_steps(steps, lengths, 100.0, 4))
    assert len(steps) == 3 and set(counts) == set(range(10))
    assert sorted(index for index, count in counts.items() if count == 2) == [0, 1]  # the two shortest
    _, few = planned(np.array([1.0, 2.0, 3.0]), 100.0, 5)
    assert Counter(check_steps(few, np.array([1.0, 2.0, 3.0]), 100.0, 5)) == {0: 2, 1: 2, 2: 1}


@pytest.mark.parametrize("world_size", [1, 4])
def test_items_of_length_zero_are_batched_like_any_other(world_size):
    lengths = np.concatenate([np.zeros(30), lognormal(200, 40.0, seed=4)])
    per_rank = [list(DynamicBatchSampler(lengths, 40.0, world_size=world_size, rank=rank, max_batch_size=16))
                for rank in range(world_size)]
    assert len({len(batches) for batches in per_rank}) == 1
    batches = [batch for batches in per_rank for batch in batches]
    assert sorted(index for batch in batches for index in batch) == list(range(len(lengths)))
    assert all(len(batch) <= 16 and padded(batch, lengths) <= 40.0 for batch in batches)


def test_greedy_cuts_match_pack_greedy():
    rng = np.random.default_rng(0)
    for trial in range(30):
        lengths = rng.lognormal(1.0, 0.6, int(rng.integers(1, 400)))
        cost = buckets.cost_function([None, 8.0][trial % 2])
        costs = buckets.item_costs(lengths, cost)
        budget = float(costs.max()) * float(rng.uniform(1.0, 12.0))
        cap = [None, 5][trial % 3 == 0]
        order = rng.permutation(len(lengths))
        expected = buckets.pack_greedy(order.tolist(), lengths, cost, budget, cap)
        cuts = buckets.greedy_cuts(costs[order], budget, cap)
        assert [order[a:b].tolist() for a, b in zip(cuts[:-1], cuts[1:])] == expected


def test_balanced_cuts_make_exactly_the_parts_within_budget_or_none():
    costs = np.sort(lognormal(3_000, 200.0, seed=5))[::-1]
    for parts in (1, 90, 100, 1000):
        cuts = buckets.balanced_cuts(costs, parts, 200.0, max_size=40)
        if cuts is None:
            continue
        sizes = np.diff(cuts)
        assert len(sizes) == parts and sizes.min() >= 1 and sizes.max() <= 40
        assert (sizes * costs[cuts[:-1]]).max() <= 200.0
    assert buckets.balanced_cuts(costs[:5], 6, 200.0) is None  # fewer items than parts
    assert buckets.balanced_cuts(np.full(10, 3.0), 2, 10.0) is None  # 10 items of 3 need 4 batches of 10


def test_deal_keeps_each_packed_batch_with_one_rank():
    costs = np.array([1.0, 1.0, 4.0])
    steps = deal_length_ordered(np.arange(3), np.array([0, 2, 3]), costs, 1, max_cost=4.0)
    assert [step.batches for step in steps] == [((0, 1),), ((2,),)]
