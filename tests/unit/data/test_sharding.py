"""Samplers under W ranks: equal batch counts, coverage, length-ordered steps, elastic resume, eval shards."""
from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from speechkit.data.length_steps import LENGTH_GRAIN
from speechkit.data.samplers import DynamicBatchSampler, EvalBatchSampler, FixedBatchSampler
from speechkit.data.sharding import deal_fixed, shard_round_robin
from speechkit.errors import DataError


def speech_lengths(count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(np.clip(rng.gamma(2.2, 3.0, count) + 1.0, 1.0, 20.0), 2)


LENGTHS = speech_lengths(403, seed=4)


def build(kind: str, rank: int, world_size: int, lengths=LENGTHS, **extra):
    if kind == "dynamic":
        return DynamicBatchSampler(lengths, 50.0, seed=9, rank=rank, world_size=world_size, **extra)
    if kind == "fixed":
        return FixedBatchSampler(len(lengths), 6, seed=9, rank=rank, world_size=world_size, **extra)
    return FixedBatchSampler(len(lengths), 6, lengths=lengths, sort="ascending", rank=rank,
                             world_size=world_size, **extra)


def all_ranks(kind: str, world_size: int, epoch: int = 0, **extra) -> list:
    samplers = [build(kind, rank, world_size, **extra) for rank in range(world_size)]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    return samplers


@pytest.mark.parametrize("kind", ["dynamic", "fixed", "sorted"])
@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_ranks_yield_equal_batch_counts_and_cover_every_item_once(kind, world_size):
    for epoch in (0, 1):
        per_rank = [list(sampler) for sampler in all_ranks(kind, world_size, epoch)]
        assert len({len(batches) for batches in per_rank}) == 1
        assert all(len(sampler) == len(per_rank[0]) for sampler in all_ranks(kind, world_size, epoch))
        items = [index for batches in per_rank for batch in batches for index in batch]
        assert sorted(items) == list(range(len(LENGTHS)))


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_dynamic_steps_hold_neighbouring_lengths(world_size):
    samplers = all_ranks("dynamic", world_size, epoch=1, batch_ordering="descending")
    per_rank = [list(sampler) for sampler in samplers]
    steps = [[LENGTHS[batch] for batch in step] for step in zip(*per_rank)]
    for step, following in zip(steps, steps[1:]):  # items of a step are all at least those of the next
        shortest = min(batch.min() for batch in step)
        assert shortest * (1 + LENGTH_GRAIN) >= max(batch.max() for batch in following)
    for step in steps:
        assert all(len(batch) * batch.max() <= 50.0 for batch in step)


def test_tiny_buckets_pass_their_items_to_the_next_bucket():
    lengths = np.array([1.0] + [5.0] * 9 + [9.0] * 7)  # the first bucket has fewer items than ranks
    for world_size in (2, 3, 4):
        per_rank = [list(DynamicBatchSampler(lengths, 20.0, bucket_boundaries=[2.0, 6.0], rank=rank,
                                             world_size=world_size, seed=1)) for rank in range(world_size)]
        assert len({len(batches) for batches in per_rank}) == 1
        items = sorted(index for batches in per_rank for batch in batches for index in batch)
        assert items == list(range(len(lengths)))
        for batch in (batch for batches in per_rank for batch in batches):
            assert len(batch) * lengths[batch].max() <= 20.0


def test_fixed_tail_rule_over_many_shapes():
    for count, batch_size, world_size in itertools.product(range(1, 41), range(1, 6), range(1, 6)):
        steps = deal_fixed(list(range(count)), batch_size, world_size)
        assert all(len(step.batches) == world_size for step in steps)
        batches = [batch for step in steps for batch in step.batches]
        assert all(1 <= len(batch) <= batch_size for batch in batches)
        assert set(index for batch in batches for index in batch) == set(range(count))
        if batch_size >= 2 and count >= world_size:  # repeats only when unavoidable
            assert sum(len(batch) for batch in batches) == count, (count, batch_size, world_size)
        dropped = deal_fixed(list(range(count)), batch_size, world_size, drop_last=True)
        assert all(len(batch) == batch_size for step in dropped for batch in step.batches)
        assert len(dropped) == count // (batch_size * world_size)


def test_fewer_items_than_ranks_repeat_items_so_no_rank_starves():
    per_rank = [list(FixedBatchSampler(2, 4, rank=rank, world_size=3, shuffle=False)) for rank in range(3)]
    assert [len(batches) for batches in per_rank] == [1, 1, 1]
    assert Counter(index for batches in per_rank for batch in batches for index in batch) == {0: 2, 1: 1}


def consume(samplers: list, steps: int) -> list:
    """Run ``steps`` training steps on every rank; return the items seen."""
    iterators = [iter(sampler) for sampler in samplers]
    return [index for _ in range(steps) for iterator in iterators for index in next(iterator)]


@pytest.mark.parametrize("kind", ["dynamic", "fixed", "sorted"])
@pytest.mark.parametrize("new_world_size", [1, 2, 3, 8])
def test_elastic_resume_sees_every_item_exactly_once(kind, new_world_size):
    before = all_ranks(kind, 4, epoch=2)
    seen = consume(before, 5)
    states = [sampler.state_dict() for sampler in before]
    assert all(state["consumed"] == states[0]["consumed"] for state in states)  # one position, any rank
    assert states[0]["num_consumed"] == len(seen)

    after = [build(kind, rank, new_world_size) for rank in range(new_world_size)]
    for sampler in after:
        sampler.load_state_dict(states[0])
        sampler.set_epoch(2)
    rest = [list(sampler) for sampler in after]
    assert len({len(batches) for batches in rest}) == 1
    seen += [index for batches in rest for batch in batches for index in batch]
    assert Counter(seen) == Counter(range(len(LENGTHS)))


def test_elastic_resume_twice_4_to_2_to_3():
    first = all_ranks("dynamic", 4, epoch=1)
    seen = consume(first, 3)
    state = first[0].state_dict()
    second = [build("dynamic", rank, 2) for rank in range(2)]
    for sampler in second:
        sampler.load_state_dict(state)
    seen += consume(second, 4)
    state = second[1].state_dict()
    third = [build("dynamic", rank, 3) for rank in range(3)]
    for sampler in third:
        sampler.load_state_dict(state)
    seen += [index for sampler in third for batch in sampler for index in batch]
    assert Counter(seen) == Counter(range(len(LENGTHS)))


@pytest.mark.parametrize("kind", ["dynamic", "fixed"])
def test_resume_on_the_same_world_size_continues_each_rank_exactly(kind):
    uninterrupted = [list(sampler) for sampler in all_ranks(kind, 3, epoch=1)]
    before = all_ranks(kind, 3, epoch=1)
    consume(before, 4)
    state = before[2].state_dict()
    for rank in range(3):
        restored = build(kind, rank, 3)
        restored.load_state_dict(state)
        assert list(restored) == uninterrupted[rank][4:]


@pytest.mark.parametrize("count", [1, 2, 7, 101])
@pytest.mark.parametrize("world_size", [2, 3, 4])
@pytest.mark.parametrize("mode", ["fixed", "sorted", "dynamic"])
def test_eval_shards_are_disjoint_and_complete(count, world_size, mode):
    lengths = speech_lengths(count, seed=count)
    options = {"fixed": {"batch_size": 4}, "sorted": {"batch_size": 4, "sort": "descending"},
               "dynamic": {"max_batch_length": 40.0}}[mode]
    shards = [[index for batch in EvalBatchSampler(count, lengths=lengths, rank=rank, world_size=world_size,
                                                   **options) for index in batch]
              for rank in range(world_size)]
    assert sorted(index for shard in shards for index in shard) == list(range(count))
    sizes = [len(shard) for shard in shards]
    assert max(sizes) - min(sizes) <= 1


def test_round_robin_shards_of_a_sorted_order_share_the_audio_evenly():
    lengths = speech_lengths(1001, seed=2)
    order = np.argsort(lengths)
    totals = [lengths[shard_round_robin(order, rank, 4)].sum() for rank in range(4)]
    assert max(totals) / min(totals) < 1.02


def test_rank_outside_the_world_is_an_error():
    with pytest.raises(DataError, match="rank 3 is outside world_size 3"):
        FixedBatchSampler(10, 2, rank=3, world_size=3)
    with pytest.raises(DataError, match="rank -1"):
        EvalBatchSampler(10, rank=-1, world_size=2)
