"""Frozen-encoder probes: did pretraining learn anything, measured per layer before any long fine-tune.

The SUPERB recipe: the encoder stays frozen, its features of one layer are computed once, and a small head
is trained on them for a few minutes; a layer whose head transcribes better holds more of what recognition
needs. Here the head is linear with CTC over characters (one per layer, all trained on the same batches),
scored by greedy CER on utterances of speakers the heads never saw (:func:`speaker_disjoint_split`), so the
figure says what the features carry about speech, not about the training voices.

Example:
    >>> items = {"a1": {"spk": "a"}, "a2": {"spk": "a"}, "b1": {"spk": "b"}, "c1": {"spk": "c"}}
    >>> train, evaluation = speaker_disjoint_split(items, eval_fraction=0.25, seed=0)
    >>> sorted(train + evaluation) == sorted(items), {items[k]["spk"] for k in train} & {
    ...     items[k]["spk"] for k in evaluation}
    (True, set())
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from speechkit.errors import DataError
from speechkit.metrics import ErrorRateStats


def speaker_disjoint_split(items: dict, eval_fraction: float, seed: int, where: str = "manifest") -> tuple:
    """``(train ids, eval ids)``: whole speakers (``spk``) go to the evaluation side, drawn in a seeded
    order, until it holds at least ``eval_fraction`` of the utterances; no speaker is on both sides.

    Raises:
        DataError: an item without ``spk`` (naming it and ``where``), fewer than two speakers, or a fraction
            outside (0, 1).
    """
    if not 0 < eval_fraction < 1:
        raise DataError(f"{where}: eval_fraction must be between 0 and 1, got {eval_fraction}")
    speakers: dict = {}
    for key, item in items.items():
        if not isinstance(item, dict) or not item.get("spk"):
            raise DataError(f"{where}: item {key!r} names no speaker (spk); the probe's split needs one")
        speakers.setdefault(str(item["spk"]), []).append(key)
    if len(speakers) < 2:
        raise DataError(f"{where}: {len(speakers)} speaker(s); a speaker-disjoint split needs at least two")
    names = sorted(speakers)
    generator = torch.Generator().manual_seed(seed)
    order = [names[i] for i in torch.randperm(len(names), generator=generator).tolist()]
    evaluation: list = []
    chosen = set()
    for name in order[:-1]:  # at least one speaker stays for training
        if len(evaluation) >= eval_fraction * len(items):
            break
        evaluation += speakers[name]
        chosen.add(name)
    train = [key for name in names if name not in chosen for key in speakers[name]]
    return sorted(train), sorted(evaluation)


class CharacterVocabulary:
    """Characters of the training texts -> ids (0: the CTC blank); unseen characters are left out."""

    def __init__(self, texts):
        self.characters = sorted({character for text in texts for character in text})
        self.index = {character: i + 1 for i, character in enumerate(self.characters)}

    def __len__(self) -> int:
        return len(self.characters) + 1

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text if c in self.index], dtype=torch.long)

    def decode(self, ids) -> str:
        return "".join(self.characters[i - 1] for i in ids if i > 0)


def _pad(features: list) -> tuple:
    lengths = torch.tensor([len(f) for f in features])
    padded = torch.zeros(len(features), int(lengths.max()), features[0].shape[-1])
    for index, item in enumerate(features):
        padded[index, : len(item)] = item
    return padded, lengths


def greedy_ctc(log_probs: torch.Tensor, lengths: torch.Tensor) -> list:
    """Best path, repeats merged and blanks (0) dropped, per item: lists of ids."""
    best = log_probs.argmax(-1)
    out = []
    for row, length in zip(best.tolist(), lengths.tolist()):
        ids, previous = [], 0
        for token in row[:length]:
            if token != previous and token != 0:
                ids.append(token)
            previous = token
        out.append(ids)
    return out


def train_probes(train: list, vocabulary: CharacterVocabulary, steps: int = 1000, batch_size: int = 16,
                 lr: float = 2e-3, seed: int = 0) -> nn.ModuleList:
    """One linear CTC head per layer, trained together on the same batches of frozen features.

    ``train``: ``(layers, texts)`` pairs per utterance, ``layers`` a list of ``(frames, dim)`` tensors (the
    same number for every utterance; dims may differ between layers).
    """
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    dims = [layer.shape[-1] for layer in train[0][0]]
    heads = nn.ModuleList(nn.Linear(dim, len(vocabulary)) for dim in dims)
    optimizer = torch.optim.Adam(heads.parameters(), lr=lr)
    targets = [vocabulary.encode(text) for _, text in train]
    for _ in range(steps):
        chosen = torch.randint(len(train), (min(batch_size, len(train)),), generator=generator).tolist()
        tokens = [targets[i] for i in chosen]
        token_lengths = torch.tensor([len(t) for t in tokens])
        flat = torch.cat(tokens) if int(token_lengths.sum()) else torch.zeros(0, dtype=torch.long)
        loss = 0.0
        for layer, head in enumerate(heads):
            features, lengths = _pad([train[i][0][layer] for i in chosen])
            log_probs = F.log_softmax(head(features), dim=-1)
            loss = loss + F.ctc_loss(log_probs.transpose(0, 1), flat, lengths, token_lengths, blank=0,
                                     reduction="mean", zero_infinity=True)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return heads


@torch.no_grad()
def evaluate_probes(heads: nn.ModuleList, evaluation: list, vocabulary: CharacterVocabulary,
                    ids: Optional[list] = None) -> list:
    """Greedy CER (%) of each layer's head on ``evaluation`` (``(layers, text)`` pairs)."""
    ids = ids or [f"utt{i}" for i in range(len(evaluation))]
    rates = []
    for layer, head in enumerate(heads):
        stats = ErrorRateStats(cer=True)
        for start in range(0, len(evaluation), 32):
            chunk = evaluation[start:start + 32]
            features, lengths = _pad([layers[layer] for layers, _ in chunk])
            hyps = greedy_ctc(F.log_softmax(head(features), dim=-1), lengths)
            stats.append(ids[start:start + 32], [vocabulary.decode(h) for h in hyps], [t for _, t in chunk])
        rates.append(float(stats.summarize("error_rate")))
    return rates
