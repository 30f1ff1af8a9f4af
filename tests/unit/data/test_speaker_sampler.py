"""Speaker-balanced sampler: batch composition, coverage, determinism, equal batches on every rank, resume."""
from __future__ import annotations

import pytest

from speechkit.data.speaker_sampler import SpeakerBalancedSampler
from speechkit.errors import DataError

SPEAKERS = [f"s{i % 7}" for i in range(60)] + ["rare"]


def test_batches_hold_distinct_speakers_k_utterances_each():
    sampler = SpeakerBalancedSampler(SPEAKERS, speakers_per_batch=4, utterances_per_speaker=2, seed=1)
    batches = list(sampler)
    assert len(batches) == -(-len(SPEAKERS) // 8)
    for batch in batches:
        speakers = [SPEAKERS[i] for i in batch]
        assert len(batch) == 8 and len(set(speakers)) == 4
        assert all(speakers.count(s) == 2 for s in set(speakers))
    seen = {i for batch in batches for i in batch}
    assert len(seen) >= 0.9 * len(SPEAKERS)


def test_epochs_differ_and_a_seed_repeats():
    first = SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=5)
    again = SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=5)
    assert list(first) == list(again)
    one = list(first)
    first.set_epoch(1)
    assert list(first) != one


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_rank_gets_as_many_batches_and_ranks_split_the_plan(world_size):
    single = SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=2, world_size=1)
    ranks = [list(SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=2, rank=r, world_size=world_size))
             for r in range(world_size)]
    assert len({len(batches) for batches in ranks}) == 1
    assert len(ranks[0]) * world_size >= len(list(single))


def test_resume_continues_the_same_batches():
    sampler = SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=3)
    sampler.set_epoch(2)
    full = list(sampler)
    iterator = iter(sampler)
    for _ in range(3):
        next(iterator)
    state = sampler.state_dict()
    resumed = SpeakerBalancedSampler(SPEAKERS, 3, 2, seed=3)
    resumed.load_state_dict(state)
    assert list(resumed) == full[3:]


def test_bad_options_are_refused():
    with pytest.raises(DataError, match="only 8 speaker"):
        SpeakerBalancedSampler(SPEAKERS, 9, 2)
    with pytest.raises(DataError, match="utterances_per_speaker"):
        SpeakerBalancedSampler(SPEAKERS, 2, 0)


def test_loader_option_builds_speaker_batches_from_the_manifest_field():
    from speechkit.data import DynamicItemDataset
    from speechkit.data.loader import make_dataloader

    data = DynamicItemDataset({f"u{i}": {"spk": SPEAKERS[i], "x": i} for i in range(len(SPEAKERS))})
    data.set_output_keys(["id", "spk"])
    loader = make_dataloader(data, "train", speaker_balanced={"speakers_per_batch": 3,
                                                              "utterances_per_speaker": 2})
    batch = next(iter(loader))
    assert len(batch.spk) == 6 and len(set(batch.spk)) == 3
    with pytest.raises(DataError, match="no field 'voice'"):
        make_dataloader(data, "train", speaker_balanced={"speakers_per_batch": 3, "speaker_key": "voice"})
