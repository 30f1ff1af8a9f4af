"""Training and evaluation batch samplers on one rank: budgets, coverage, determinism, resume, bad input."""
from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest
import torch

from speechkit.data import buckets
from speechkit.data.samplers import DynamicBatchSampler, EvalBatchSampler, FixedBatchSampler, padding_stats
from speechkit.errors import DataError


def speech_lengths(count: int, seed: int = 0) -> np.ndarray:
    """Durations in seconds shaped like read speech: most 3-10 s, a long tail up to 20 s."""
    rng = np.random.default_rng(seed)
    return np.round(np.clip(rng.gamma(2.2, 3.0, count) + 1.0, 1.0, 20.0), 2)


def flat(batches) -> list:
    return [index for batch in batches for index in batch]


LENGTHS = speech_lengths(301)


def make_samplers(lengths=LENGTHS):
    return {
        "dynamic": DynamicBatchSampler(lengths, max_batch_length=60.0, seed=5),
        "dynamic_unpooled": DynamicBatchSampler(lengths, max_batch_length=60.0, num_buckets=6, pool_batches=0,
                                                seed=5),
        "fixed_shuffled": FixedBatchSampler(len(lengths), 8, lengths=lengths, seed=5),
        "fixed_sorted": FixedBatchSampler(len(lengths), 8, lengths=lengths, sort="descending"),
    }


@pytest.mark.parametrize("name", ["dynamic", "dynamic_unpooled", "fixed_shuffled", "fixed_sorted"])
def test_every_item_exactly_once_per_epoch(name):
    sampler = make_samplers()[name]
    for epoch in (0, 1, 2):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(flat(batches)) == list(range(len(LENGTHS)))
        assert len(batches) == len(sampler)


@pytest.mark.parametrize("length_cost", [None, 40.0, lambda length: length * 1.5])
@pytest.mark.parametrize("max_batch_size", [None, 3])
def test_dynamic_batches_never_exceed_the_budget(length_cost, max_batch_size):
    budget = 45.0
    sampler = DynamicBatchSampler(LENGTHS, budget, length_cost=length_cost, max_batch_size=max_batch_size,
                                  seed=2)
    cost = buckets.cost_function(length_cost)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(flat(batches)) == list(range(len(LENGTHS)))
        for batch in batches:
            assert len(batch) * cost(max(LENGTHS[batch])) <= budget + 1e-9
            assert max_batch_size is None or len(batch) <= max_batch_size


def test_attention_cost_makes_long_items_form_smaller_batches():
    lengths = np.array([2.0] * 40 + [18.0] * 40)
    plain = list(DynamicBatchSampler(lengths, 72.0, bucket_boundaries=[5.0], seed=0))
    costly = list(DynamicBatchSampler(lengths, 72.0, bucket_boundaries=[5.0], seed=0, length_cost=18.0))
    long_size = {name: max(len(b) for b in batches if lengths[b[0]] > 5)
                 for name, batches in (("plain", plain), ("costly", costly))}
    assert long_size == {"plain": 4, "costly": 2}  # 4 x 18 = 72; 2 x (18 + 18^2/18) = 72
    assert len(costly) > len(plain)


@pytest.mark.parametrize("name", ["dynamic", "fixed_shuffled"])
def test_same_seed_and_epoch_give_the_same_batches_and_other_epochs_differ(name):
    first, second = make_samplers()[name], make_samplers()[name]
    first.set_epoch(3)
    second.set_epoch(3)
    assert list(first) == list(second)
    second.set_epoch(4)
    assert list(first) != list(second)
    other_seed = DynamicBatchSampler(LENGTHS, 60.0, seed=6) if name == "dynamic" else FixedBatchSampler(
        len(LENGTHS), 8, seed=6)
    other_seed.set_epoch(3)
    assert list(first) != list(other_seed)


def roundtrip(state: dict) -> dict:
    """Through torch.save / torch.load(weights_only=True), as a checkpoint stores it."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


@pytest.mark.parametrize("name", ["dynamic", "dynamic_unpooled", "fixed_shuffled", "fixed_sorted"])
@pytest.mark.parametrize("consumed", [0, 1, 7, None])
def test_restored_sampler_yields_exactly_the_remaining_batches(name, consumed):
    reference = make_samplers()[name]
    reference.set_epoch(2)
    full = list(reference)
    consumed = len(full) if consumed is None else consumed
    sampler = make_samplers()[name]
    sampler.set_epoch(2)
    iterator = iter(sampler)
    taken = [next(iterator) for _ in range(consumed)]
    state = roundtrip(sampler.state_dict())
    assert state["num_consumed"] == len(flat(taken))

    restored = make_samplers()[name]
    restored.load_state_dict(state)
    restored.set_epoch(2)  # the training loop sets the same epoch again: the position must survive it
    assert len(restored) == len(full) - consumed
    assert list(restored) == full[consumed:]
    # the pass after the resumed one is a whole epoch again
    assert list(restored) == full


def test_resume_twice_in_one_epoch_continues_the_same_plan():
    sampler = make_samplers()["dynamic"]
    sampler.set_epoch(1)
    full = list(sampler)
    iterator = iter(sampler)
    for _ in range(3):
        next(iterator)
    second = make_samplers()["dynamic"]
    second.load_state_dict(sampler.state_dict())
    iterator = iter(second)
    for _ in range(4):
        next(iterator)
    third = make_samplers()["dynamic"]
    third.load_state_dict(second.state_dict())
    assert list(third) == full[7:]


def test_state_of_another_epoch_is_dropped_by_set_epoch():
    sampler = make_samplers()["fixed_shuffled"]
    sampler.set_epoch(1)
    iterator = iter(sampler)
    next(iterator)
    restored = make_samplers()["fixed_shuffled"]
    restored.load_state_dict(sampler.state_dict())
    restored.set_epoch(2)
    reference = make_samplers()["fixed_shuffled"]
    reference.set_epoch(2)
    assert list(restored) == list(reference)


def test_bucket_boundaries_hold_equal_total_length():
    lengths = speech_lengths(5000, seed=1)
    bounds = buckets.equal_total_boundaries(lengths, 10)
    assert len(bounds) == 10 and bounds[-1] == lengths.max()
    totals = np.bincount(buckets.assign_buckets(lengths, bounds), weights=lengths)
    assert totals.max() / totals.min() < 1.1  # equal total duration, not equal counts
    counts = np.bincount(buckets.assign_buckets(lengths, bounds))
    assert counts[0] > 2 * counts[-1]


def test_explicit_boundaries_put_longer_items_in_a_last_bucket():
    lengths = np.array([1.0, 2.0, 3.0, 30.0, 31.0])
    sampler = DynamicBatchSampler(lengths, 100.0, bucket_boundaries=[2.5, 10.0], shuffle=False,
                                  batch_ordering="ascending")
    assert list(sampler) == [[0, 1], [2], [3, 4]]


@pytest.mark.parametrize("ordering", ["ascending", "descending"])
def test_batch_ordering_by_length(ordering):
    sampler = DynamicBatchSampler(LENGTHS, 60.0, batch_ordering=ordering, seed=1)
    longest = [max(LENGTHS[batch]) for batch in sampler]
    assert longest == sorted(longest, reverse=ordering == "descending")


def test_dynamic_batching_pads_far_less_than_a_fixed_batch_size():
    lengths = speech_lengths(2000, seed=3)
    budget = 200.0
    dynamic = DynamicBatchSampler(lengths, budget, seed=0).stats()
    fixed = FixedBatchSampler(len(lengths), int(budget // lengths.max()), lengths=lengths, seed=0).stats()
    assert dynamic["items"] == fixed["items"] == 2000
    assert dynamic["padding_efficiency"] >= 0.95
    assert fixed["padding_efficiency"] < 0.7
    assert 0.8 < dynamic["budget_fill"] <= 1.0
    assert dynamic["batches"] < fixed["batches"]


def test_padding_stats_by_hand():
    stats = padding_stats([[0, 1], [2]], np.array([1.0, 3.0, 2.0]))
    assert stats == {"batches": 2, "items": 3, "real_length": 6.0, "padded_length": 8.0,
                     "padding_efficiency": 0.75}
    assert padding_stats([[0]], None)["padding_efficiency"] is None


def test_drop_last_keeps_full_batches_only():
    fixed = FixedBatchSampler(21, 4, drop_last=True)
    batches = list(fixed)
    assert [len(b) for b in batches] == [4] * 5 and len(set(flat(batches))) == 20
    assert sorted(flat(DynamicBatchSampler(LENGTHS, 60.0, drop_last=True))) == list(range(len(LENGTHS)))
    ranks = [DynamicBatchSampler(LENGTHS, 60.0, drop_last=True, rank=rank, world_size=3) for rank in range(3)]
    items = [index for sampler in ranks for index in flat(sampler)]
    assert len(items) == len(set(items)) < len(LENGTHS)
    assert len({len(sampler) for sampler in ranks}) == 1


def test_eval_sampler_one_rank_keeps_dataset_or_length_order():
    assert list(EvalBatchSampler(5, 2)) == [[0, 1], [2, 3], [4]]
    lengths = [3.0, 1.0, 2.0, 5.0, 4.0]
    assert list(EvalBatchSampler(5, 2, lengths=lengths, sort="ascending")) == [[1, 2], [0, 4], [3]]
    dynamic = list(EvalBatchSampler(5, lengths=lengths, max_batch_length=8.0))
    assert dynamic == [[1, 2], [0, 4], [3]]  # 2 x 2.0, 2 x 4.0, 1 x 5.0 <= 8.0


def test_eval_sampler_resumes_on_the_same_rank_and_restarts_elsewhere():
    sampler = EvalBatchSampler(9, 2, rank=1, world_size=2)
    iterator = iter(sampler)
    next(iterator)
    state = roundtrip(sampler.state_dict())
    same = EvalBatchSampler(9, 2, rank=1, world_size=2)
    same.load_state_dict(state)
    assert len(same) == 1 and list(same) == [[5, 7]]
    other = EvalBatchSampler(9, 2, rank=1, world_size=3)
    other.load_state_dict(state)
    assert list(other) == list(EvalBatchSampler(9, 2, rank=1, world_size=3))


def test_item_longer_than_the_budget_is_named():
    lengths = [1.0, 2.0, 50.0]
    with pytest.raises(DataError, match=r"item 2: length 50"):
        DynamicBatchSampler(lengths, 40.0)
    with pytest.raises(DataError, match=r"item 2 has length 50"):
        list(EvalBatchSampler(3, lengths=lengths, max_batch_length=40.0))


@pytest.mark.parametrize("kwargs, message", [
    ({"max_batch_length": 0}, "max_batch_length"),
    ({"max_batch_length": 10.0, "num_buckets": 2, "bucket_boundaries": [1.0]}, "not both"),
    ({"max_batch_length": 10.0, "bucket_boundaries": [3.0, 2.0]}, "ascending"),
    ({"max_batch_length": 10.0, "num_buckets": 0}, "num_buckets"),
    ({"max_batch_length": 10.0, "batch_ordering": "sorted"}, "batch_ordering"),
    ({"max_batch_length": 10.0, "max_batch_size": 0}, "max_batch_size"),
    ({"max_batch_length": 10.0, "length_cost": -1}, "length_cost"),
    ({"max_batch_length": 10.0, "rank": 2, "world_size": 2}, "rank 2"),
])
def test_bad_dynamic_arguments_are_named(kwargs, message):
    with pytest.raises(DataError, match=message):
        DynamicBatchSampler([1.0, 2.0, 3.0], **kwargs)


def test_bad_lengths_and_fixed_arguments_are_named():
    with pytest.raises(DataError, match="item 1 has length"):
        DynamicBatchSampler([1.0, float("nan")], 10.0)
    with pytest.raises(DataError, match="item 0 has length -1.0"):
        FixedBatchSampler(2, 1, lengths=[-1.0, 1.0])
    with pytest.raises(DataError, match="batch_size"):
        FixedBatchSampler(3, 0)
    with pytest.raises(DataError, match="needs the item lengths"):
        FixedBatchSampler(3, 1, sort="ascending")
    with pytest.raises(DataError, match="sort must be"):
        FixedBatchSampler(3, 1, lengths=[1, 2, 3], sort="up")


def test_bad_states_are_rejected_with_the_reason():
    dynamic = DynamicBatchSampler(LENGTHS, 60.0)
    fixed_state = FixedBatchSampler(len(LENGTHS), 4).state_dict()
    with pytest.raises(DataError, match="saved by a FixedBatchSampler"):
        dynamic.load_state_dict(fixed_state)
    smaller = DynamicBatchSampler(LENGTHS[:-1], 60.0).state_dict()
    with pytest.raises(DataError, match="dataset changed"):
        dynamic.load_state_dict(smaller)
    broken = dict(dynamic.state_dict(), consumed="not base64!")
    with pytest.raises(DataError, match="consumed"):
        DynamicBatchSampler(LENGTHS, 60.0).load_state_dict(broken)
    with pytest.raises(DataError, match="no key 'epoch'"):
        dynamic.load_state_dict({"sampler": "DynamicBatchSampler", "num_items": 301, "consumed": ""})


def test_changed_options_replan_the_remaining_items():
    sampler = DynamicBatchSampler(LENGTHS, 60.0, seed=1)
    iterator = iter(sampler)
    seen = [next(iterator) for _ in range(5)]
    bigger = DynamicBatchSampler(LENGTHS, 90.0, seed=1)
    bigger.load_state_dict(sampler.state_dict())
    rest = list(bigger)
    assert Counter(flat(seen) + flat(rest)) == Counter(range(len(LENGTHS)))
    assert all(len(b) * max(LENGTHS[b]) <= 90.0 for b in rest)


@pytest.mark.parametrize("name", ["dynamic", "fixed_shuffled"])
def test_length_is_the_pass_length_while_it_runs(name):
    sampler = make_samplers()[name]
    total = len(sampler)
    lengths_seen = [len(sampler) for _ in sampler]
    assert lengths_seen == [total] * total
    eval_sampler = EvalBatchSampler(9, 2)
    assert [len(eval_sampler) for _ in eval_sampler] == [5] * 5
