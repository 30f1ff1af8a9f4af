"""Speaker-balanced training batches: ``speakers_per_batch`` speakers, ``utterances_per_speaker`` each.

Margin losses and pair/triplet objectives learn most from batches that hold several utterances of several
speakers, and a corpus with a few talkative speakers would otherwise fill batches with them. Each epoch,
every speaker's utterances are shuffled (seeded by seed and epoch); batches then draw distinct speakers,
those with the most utterances left first (ties broken at random), and take the next utterances of each,
starting a speaker's list over when it runs out. An epoch has ``ceil(items / batch size)`` batches, rounded
up to a multiple of the world size, dealt one per rank per step, so every rank yields the same number of
batches (docs/design.md, contract 3). Resumable like the other training samplers
(:class:`speechkit.data.samplers.FixedBatchSampler`).

Example:
    >>> sampler = SpeakerBalancedSampler(["a", "a", "b", "b", "c", "c"], speakers_per_batch=2,
    ...                                  utterances_per_speaker=1, seed=0)
    >>> [len(batch) for batch in sampler]
    [2, 2, 2]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np

from speechkit.data.samplers import _PlannedSampler
from speechkit.data.sharding import steps_of
from speechkit.errors import DataError


class SpeakerBalancedSampler(_PlannedSampler):
    """Training batches of ``speakers_per_batch`` x ``utterances_per_speaker`` items.

    Arguments:
        speakers: one speaker label per dataset item.
        speakers_per_batch: distinct speakers in a batch (at most the number of speakers).
        utterances_per_speaker: items of each speaker in a batch (repeated when a speaker has fewer).
        seed, rank, world_size: as the other training samplers.
    """

    def __init__(self, speakers: Sequence, speakers_per_batch: int, utterances_per_speaker: int = 2, *,
                 seed: int = 0, rank: int = 0, world_size: int = 1):
        labels = [str(s) for s in speakers]
        for name, value in (("speakers_per_batch", speakers_per_batch),
                            ("utterances_per_speaker", utterances_per_speaker)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DataError(f"{name} must be a positive int, got {value!r}")
        names = sorted(set(labels))
        if speakers_per_batch > len(names):
            raise DataError(f"speakers_per_batch={speakers_per_batch} but the data has only {len(names)} "
                            f"speaker(s): {', '.join(names[:10])}")
        super().__init__(len(labels), seed, rank, world_size)
        self.speakers_per_batch, self.utterances_per_speaker = speakers_per_batch, utterances_per_speaker
        index = {name: i for i, name in enumerate(names)}
        self.speaker_ids = np.array([index[s] for s in labels], dtype=np.int64)
        self.speaker_names = names

    @property
    def batch_size(self) -> int:
        return self.speakers_per_batch * self.utterances_per_speaker

    def _plan_options(self) -> dict:
        return {"speakers_per_batch": self.speakers_per_batch,
                "utterances_per_speaker": self.utterances_per_speaker}

    def _plan(self, remaining: Optional[np.ndarray]) -> list:
        rng = np.random.default_rng([self.seed, self.epoch])
        items = np.arange(self.num_items) if remaining is None else np.flatnonzero(remaining)
        if items.size == 0:
            return []
        pools = {}
        for speaker in np.unique(self.speaker_ids[items]):
            pools[int(speaker)] = list(rng.permutation(items[self.speaker_ids[items] == speaker]))
        per_batch = min(self.speakers_per_batch, len(pools))
        count = -(-items.size // self.batch_size)
        count = -(-count // self.world_size) * self.world_size
        cursor = {speaker: 0 for speaker in pools}
        batches = []
        for _ in range(count):
            left = np.array([len(pools[s]) - cursor[s] for s in pools], dtype=np.float64)
            keys = np.array(list(pools))
            # Most utterances left first; random ties (and a random order once every speaker has wrapped).
            order = np.lexsort((rng.random(len(keys)), -np.maximum(left, 0)))
            batch = []
            for speaker in keys[order[:per_batch]].tolist():
                pool = pools[speaker]
                for _ in range(self.utterances_per_speaker):
                    batch.append(int(pool[cursor[speaker] % len(pool)]))
                    cursor[speaker] += 1
            batches.append(batch)
        return steps_of(batches, self.world_size)
