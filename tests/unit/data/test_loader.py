"""make_dataloader over a real DynamicItemDataset and PaddedBatch: options, sharding, resume, workers."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch

from speechkit.data.batch import PaddedBatch
from speechkit.data.dataset import DynamicItemDataset
from speechkit.data.loader import SpeechLoader, make_dataloader
from speechkit.errors import DataError
from speechkit.stage import Stage

FRAMES_PER_SECOND = 100


def make_dataset(count: int = 57, seed: int = 0) -> DynamicItemDataset:
    """Items whose ``sig`` has ``duration * 100`` frames, so padded sizes can be checked on real tensors."""
    rng = np.random.default_rng(seed)
    durations = np.round(np.clip(rng.gamma(2.2, 3.0, count) + 1.0, 1.0, 20.0), 2)
    data = {f"utt{index:03d}": {"duration": float(duration)} for index, duration in enumerate(durations)}
    dataset = DynamicItemDataset(data)

    def signal(duration):
        return torch.ones(int(round(duration * FRAMES_PER_SECOND)))

    dataset.add_dynamic_item(signal, takes=["duration"], provides=["sig"])
    dataset.set_output_keys(["id", "sig"])
    return dataset


def noisy_dataset(count: int = 12) -> DynamicItemDataset:
    """Items carrying a draw from numpy's global generator: shows how workers are seeded."""
    dataset = DynamicItemDataset({f"n{index}": {"duration": 1.0} for index in range(count)})
    dataset.add_dynamic_item(lambda _: np.random.random(), takes=["duration"], provides=["noise"])
    dataset.set_output_keys(["id", "noise"])
    return dataset


def ids(batches) -> list:
    return [utterance for batch in batches for utterance in batch.id]


def test_training_loader_pads_batches_and_covers_the_epoch():
    dataset = make_dataset()
    loader = make_dataloader(dataset, Stage.TRAIN, batch_size=4, seed=3)
    assert isinstance(loader, SpeechLoader)
    loader.set_epoch(1)
    batches = list(loader)
    assert len(batches) == len(loader) == 15
    assert all(isinstance(batch, PaddedBatch) for batch in batches)
    assert sorted(ids(batches)) == sorted(dataset.data_ids)
    first = batches[0]
    expected = [int(round(dataset.data[utt]["duration"] * FRAMES_PER_SECOND)) for utt in first.id]
    assert first.sig.lengths.dtype == torch.int64 and first.sig.lengths.tolist() == expected
    loader.set_epoch(2)
    assert ids(loader) != ids(batches)


def test_dynamic_batching_respects_the_budget_on_real_tensors():
    dataset = make_dataset(80)
    budget_seconds = 40.0
    loader = make_dataloader(dataset, "train", dynamic_batching={"max_batch_length": budget_seconds,
                                                                 "num_buckets": 4})
    batches = list(loader)
    assert sorted(ids(batches)) == sorted(dataset.data_ids)
    for batch in batches:
        assert batch.sig.data.numel() <= budget_seconds * FRAMES_PER_SECOND
    stats = loader.stats()
    assert stats["items"] == 80 and stats["batches"] == len(batches) == stats["batches_yielded"]
    assert 0.5 < stats["padding_efficiency"] <= 1.0
    padded = sum(batch.sig.data.numel() for batch in batches) / FRAMES_PER_SECOND
    real = sum(batch.sig.lengths.sum().item() for batch in batches) / FRAMES_PER_SECOND
    assert stats["padding_efficiency"] == pytest.approx(real / padded, rel=1e-3)


@pytest.mark.parametrize("stage", ["valid", "test"])
def test_evaluation_loaders_shard_without_duplicates_or_drops(stage):
    dataset = make_dataset(23)
    shards = []
    for rank in range(3):
        loader = make_dataloader(dataset, stage, rank=rank, world_size=3, batch_size=2, sort="ascending",
                                 shuffle=True)
        shards.append(ids(loader))
    assert sorted(utt for shard in shards for utt in shard) == sorted(dataset.data_ids)
    assert sorted(len(shard) for shard in shards) == [7, 8, 8]


def test_training_ranks_get_equal_batch_counts_through_the_loader():
    dataset = make_dataset(41)
    loaders = [make_dataloader(dataset, "train", rank=rank, world_size=4, batch_size=3, seed=1)
               for rank in range(4)]
    per_rank = [list(loader) for loader in loaders]
    assert len({len(batches) for batches in per_rank}) == 1
    assert Counter(utt for batches in per_rank for utt in ids(batches)) == Counter(dataset.data_ids)


@pytest.mark.parametrize("num_workers", [0, 2])
@pytest.mark.parametrize("dynamic", [None, {"max_batch_length": 30.0}])
def test_resumed_loader_yields_exactly_the_remaining_batches(num_workers, dynamic):
    dataset = make_dataset(50)
    options = {"batch_size": 3, "dynamic_batching": dynamic, "num_workers": num_workers, "seed": 4}
    reference = make_dataloader(dataset, "train", **options)
    reference.set_epoch(1)
    expected = [batch.id for batch in reference]

    loader = make_dataloader(dataset, "train", **options)
    loader.set_epoch(1)
    iterator = iter(loader)
    taken = [next(iterator).id for _ in range(4)]  # the workers have prefetched further than this
    state = loader.state_dict()
    del iterator
    assert taken == expected[:4]

    resumed = make_dataloader(dataset, "train", **options)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)
    assert len(resumed) == len(expected) - 4
    rest = []
    for batch in resumed:
        assert len(resumed) == len(expected) - 4  # constant while the pass runs
        rest.append(batch.id)
    assert rest == expected[4:]
    assert resumed.state_dict()["num_consumed"] == len(dataset)
    assert len(resumed) == len(expected)  # the next pass is a whole epoch again
    assert [batch.id for batch in resumed] == expected


def test_elastic_resume_through_loaders_4_to_2_ranks():
    dataset = make_dataset(61)
    options = {"dynamic_batching": {"max_batch_length": 35.0}, "seed": 2}
    before = [make_dataloader(dataset, "train", rank=rank, world_size=4, **options) for rank in range(4)]
    iterators = [iter(loader) for loader in before]
    seen = [utt for _ in range(2) for iterator in iterators for utt in next(iterator).id]
    state = before[0].state_dict()
    after = [make_dataloader(dataset, "train", rank=rank, world_size=2, **options) for rank in range(2)]
    for loader in after:
        loader.load_state_dict(state)
    rest = [ids(loader) for loader in after]
    assert len(rest[0]) > 0
    assert Counter(seen + rest[0] + rest[1]) == Counter(dataset.data_ids)


def test_workers_are_seeded_per_seed_epoch_and_rank():
    dataset = noisy_dataset()

    def draws(epoch: int, rank: int = 0, seed: int = 0) -> list:
        loader = make_dataloader(dataset, "train", batch_size=4, num_workers=1, seed=seed, rank=rank,
                                 world_size=2, collate_fn=list)
        loader.set_epoch(epoch)
        return [item["noise"] for batch in loader for item in batch]

    assert draws(0) == draws(0)
    assert draws(0) != draws(1)
    assert draws(0, rank=0) != draws(0, rank=1)


def test_custom_collate_and_sorted_training_order():
    dataset = make_dataset(9)
    loader = make_dataloader(dataset, "train", batch_size=4, sort="descending", collate_fn=list)
    durations = [item["sig"].numel() for batch in loader for item in batch]
    assert durations == sorted(durations, reverse=True)


@pytest.mark.parametrize("options, message", [
    ({"batch_sise": 4}, "batch_sise"),
    ({"dynamic_batching": {"num_buckets": 3}}, "max_batch_length"),
    ({"dynamic_batching": {"max_batch_length": 10.0, "buckets": 3}}, "buckets"),
    ({"dynamic_batching": 30}, "dynamic_batching"),
    ({"num_workers": -1}, "num_workers"),
    ({"batch_size": 0}, "batch_size"),
    ({"sort": "random"}, "sort"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(DataError, match=message):
        make_dataloader(make_dataset(5), "train", **options)


def test_missing_length_field_names_the_item_and_key():
    dataset = DynamicItemDataset({"a": {"duration": 1.0}, "b": {"words": "HI"}}, output_keys=["id"])
    with pytest.raises(DataError, match=r"'b'.*'duration'"):
        make_dataloader(dataset, "train", dynamic_batching={"max_batch_length": 10.0})
    # without sorting or dynamic batches the lengths only feed statistics
    loader = make_dataloader(dataset, "train", batch_size=2, collate_fn=list)
    assert loader.stats()["padding_efficiency"] is None and len(list(loader)) == 1


def test_unknown_stage_is_an_error():
    with pytest.raises(DataError, match="unknown stage 'training'"):
        make_dataloader(make_dataset(3), "training")


@pytest.mark.parametrize("stage", ["train", "test"])
def test_items_too_long_for_the_budget_are_named_by_id(stage):
    dataset = DynamicItemDataset({"short": {"duration": 2.0}, "very_long": {"duration": 45.0}},
                                 output_keys=["id"])
    with pytest.raises(DataError, match=r"1 data point.*'very_long'.*duration 45"):
        make_dataloader(dataset, stage, dynamic_batching={"max_batch_length": 30.0})
