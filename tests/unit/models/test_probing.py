"""Frozen-encoder probes: the split keeps speakers apart, and a linear CTC head reads what features hold."""
from __future__ import annotations

import pytest
import torch

from speechkit.errors import DataError
from speechkit.models.wav2vec2.probing import (
    CharacterVocabulary,
    evaluate_probes,
    greedy_ctc,
    speaker_disjoint_split,
    train_probes,
)


def corpus(speakers=6, per_speaker=(3, 5, 2, 7, 4, 6)):
    return {f"{chr(97 + s)}-{u}": {"spk": chr(97 + s), "text": "AB"}
            for s in range(speakers) for u in range(per_speaker[s % len(per_speaker)])}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("fraction", [0.1, 0.3, 0.6])
def test_split_is_speaker_disjoint_complete_and_sized(seed, fraction):
    items = corpus()
    train, evaluation = speaker_disjoint_split(items, fraction, seed)
    assert sorted(train + evaluation) == sorted(items) and not set(train) & set(evaluation)
    train_speakers = {items[key]["spk"] for key in train}
    eval_speakers = {items[key]["spk"] for key in evaluation}
    assert train_speakers and eval_speakers and not train_speakers & eval_speakers
    assert len(evaluation) >= fraction * len(items) or len(train_speakers) == 1
    assert speaker_disjoint_split(items, fraction, seed) == (train, evaluation)  # the seed decides


def test_split_refuses_what_it_cannot_keep_apart():
    with pytest.raises(DataError, match="item 'x' names no speaker"):
        speaker_disjoint_split({"x": {"text": "A"}, "y": {"spk": "b"}}, 0.5, 0, "train.json")
    with pytest.raises(DataError, match="1 speaker"):
        speaker_disjoint_split({"x": {"spk": "a"}, "y": {"spk": "a"}}, 0.5, 0)
    with pytest.raises(DataError, match="between 0 and 1"):
        speaker_disjoint_split(corpus(), 1.0, 0)


def test_greedy_ctc_merges_repeats_and_drops_blanks():
    log_probs = torch.log(torch.eye(3)[torch.tensor([[1, 1, 0, 1, 2, 2, 0, 0]])] * 0.98 + 0.01)
    assert greedy_ctc(log_probs, torch.tensor([8])) == [[1, 1, 2]]
    assert greedy_ctc(log_probs, torch.tensor([2])) == [[1]]


def test_a_linear_probe_reads_characters_that_the_features_hold_and_not_noise():
    generator = torch.Generator().manual_seed(0)
    vocabulary = CharacterVocabulary(["ABC"])
    draws = [torch.randint(3, (4,), generator=generator).tolist() for _ in range(40)]
    texts = ["".join("ABC"[i] for i in draw) for draw in draws]

    def utterance(text):
        # Each character over 3 frames, then a blank-ish silence frame: the first "layer" holds the text as
        # one-hot vectors (+ noise), the second pure noise.
        frames = []
        for character in text:
            frames += [torch.eye(4)[vocabulary.index[character]]] * 3 + [torch.eye(4)[0]]
        clean = torch.stack(frames) + 0.1 * torch.randn(len(frames), 4, generator=generator)
        return [clean, torch.randn(len(frames), 4, generator=generator)], text

    data = [utterance(text) for text in texts]
    heads = train_probes(data[:30], vocabulary, steps=150, batch_size=8, lr=0.05, seed=0)
    informative, noise = evaluate_probes(heads, data[30:], vocabulary)
    assert informative < 10.0 and noise > 40.0
