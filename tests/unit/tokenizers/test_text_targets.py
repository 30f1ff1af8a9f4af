"""Training targets: per-split character coverage before training, the unknown-character policies."""
from __future__ import annotations

import pickle

import pytest

from speechkit.data import DynamicItemDataset
from speechkit.data.text_policy import TextNormalizer
from speechkit.errors import DataError
from speechkit.tokenizers import SentencePieceTokenizer
from speechkit.tokenizers.items import hypothesis_texts
from speechkit.tokenizers.text_targets import (
    TargetText,
    coverage_lines,
    prepare_text_targets,
    prepare_token_targets,
)

ALPHABET = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ'")
UPPER = TextNormalizer(case="upper")


def make_datasets():
    rows = {"train": {"t1": {"text": "Nine, ten!"}, "t2": {"text": "THE CAFÉ"}, "t3": {"text": "OK"}},
            "valid": {"v1": {"text": "naïve"}, "v2": {"text": "fine"}},
            "test": {"s1": {"text": "ÉTÉ"}, "s2": {"text": "good"}}}
    return {split: DynamicItemDataset(data) for split, data in rows.items()}


def targets(dataset) -> dict:
    with dataset.output_keys_as(["id", "target_text"]):
        return {item["id"]: item["target_text"] for item in dataset}


def test_refuse_names_every_split_with_counts_and_ids():
    with pytest.raises(DataError) as error:
        prepare_text_targets(make_datasets(), ALPHABET, UPPER)
    message = str(error.value)
    assert "train: 1 characters outside the alphabet, 1 occurrences in 1 of 3 utterances" in message
    assert "valid: 1 characters outside the alphabet" in message and "e.g. v1" in message
    assert "test: 1 characters outside the alphabet, 2 occurrences in 1 of 2 utterances" in message
    assert "unknown_characters" in message


def test_clean_text_passes_refuse_and_targets_are_normalised():
    datasets = {"train": DynamicItemDataset({"a": {"text": "Nine, ten!"}, "b": {"text": "it's ok"}})}
    prepared, reports = prepare_text_targets(datasets, ALPHABET, UPPER)
    assert targets(prepared["train"]) == {"a": "NINE TEN", "b": "IT'S OK"}
    assert reports["train"].coverage == 1.0
    assert coverage_lines(reports) == [
        "train: 2 utterances, character coverage 100.00% (0 characters outside the tokenizer's alphabet in 0 "
        "utterances)"]


def test_unknown_keeps_drop_utterance_drops_drop_character_strips():
    prepared, reports = prepare_text_targets(make_datasets(), ALPHABET, UPPER, policy="unknown")
    assert targets(prepared["train"])["t2"] == "THE CAFÉ" and reports["test"].counts == {"É": 2}
    prepared, _ = prepare_text_targets(make_datasets(), ALPHABET, UPPER, policy="drop_utterance")
    assert targets(prepared["train"]) == {"t1": "NINE TEN", "t3": "OK"}
    assert targets(prepared["valid"]) == {"v2": "FINE"}
    prepared, _ = prepare_text_targets(make_datasets(), ALPHABET, UPPER, policy="drop_character")
    assert targets(prepared["train"])["t2"] == "THE CAF" and targets(prepared["test"])["s1"] == "T"


def test_bad_policy_all_dropped_and_missing_field():
    with pytest.raises(DataError, match="'keep' does not exist"):
        prepare_text_targets(make_datasets(), ALPHABET, UPPER, policy="keep")
    datasets = {"valid": DynamicItemDataset({"a": {"text": "été"}, "b": {"text": "ça"}})}
    with pytest.raises(DataError, match="valid: policy 'drop_utterance' leaves none of its 2 utterances"):
        prepare_text_targets(datasets, ALPHABET, UPPER, policy="drop_utterance")
    with pytest.raises(DataError, match="train: id 'a' has no field 'text'"):
        prepare_text_targets({"train": DynamicItemDataset({"a": {"words": "A"}})}, ALPHABET)
    with pytest.raises(DataError, match="must be text"):
        prepare_text_targets({"train": DynamicItemDataset({"a": {"text": 3}})}, ALPHABET)


def test_alphabet_from_a_trained_tokenizer(tmp_path):
    tokenizer = SentencePieceTokenizer.train(["THE CAT", "A DOG SAT"], tmp_path, vocab_size=40,
                                             model_type="char", hard_vocab_limit=False)
    datasets = {"train": DynamicItemDataset({"a": {"text": "the cat"}, "b": {"text": "the cow"}})}
    with pytest.raises(DataError, match="'W' \\(U\\+0057"):
        prepare_text_targets(datasets, tokenizer, UPPER)


def test_target_text_is_picklable():
    target = pickle.loads(pickle.dumps(TargetText(UPPER, set("AB"))))
    assert target("a, b c!") == "A B"


def test_token_targets_are_the_normalised_texts_tokens_and_hypotheses_read_back(tmp_path):
    tokenizer = SentencePieceTokenizer.train(["THE CAT", "A DOG SAT"], tmp_path, vocab_size=40,
                                             model_type="char", hard_vocab_limit=False, pad_id=0, unk_id=1,
                                             bos_id=2, eos_id=3)
    datasets = {"train": DynamicItemDataset({"a": {"text": "The cat!"}}),
                "test": DynamicItemDataset({"b": {"text": "a dog"}})}
    keys = ["id", "tokens_bos", "tokens"]
    prepared = prepare_token_targets(datasets, tokenizer, UPPER, "refuse", 2, 3, keys)
    item = prepared["train"][0]
    assert sorted(item) == ["id", "tokens", "tokens_bos"]
    assert item["tokens"].tolist() == tokenizer.encode("THE CAT") and item["tokens_bos"][0] == 2
    # Ids past the tokenizer's end (a larger output layer) are dropped; whitespace collapses.
    padded = item["tokens"].tolist() + [tokenizer.vocab_size, tokenizer.vocab_size + 3]
    assert hypothesis_texts(tokenizer, [padded, prepared["test"][0]["tokens"]]) == ["THE CAT", "A DOG"]
    with pytest.raises(DataError, match="'!'"):
        keep_punctuation = TextNormalizer(case="upper", punctuation="keep")
        prepare_token_targets(datasets, tokenizer, keep_punctuation, "refuse", 2, 3, ["id", "tokens"])
