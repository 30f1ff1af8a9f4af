"""Training targets from transcripts: normalised, checked against the tokenizer's alphabet per split, before
any training step.

Characters a tokenizer cannot spell become its unknown piece: the model learns to emit it and the user reads
``⁇`` in transcripts. ``prepare_text_targets`` counts such characters in every split first and refuses (a
``DataError`` naming characters, counts and example ids per split) unless a policy is chosen (see
:mod:`speechkit.data.text_policy`); it then adds a ``target_text`` item (the normalised text, minus the
unspellable characters with ``"drop_character"``) that the token items read.

Example::

    datasets, reports = prepare_text_targets(datasets, tokenizer, TextNormalizer(case="upper"),
                                             policy="refuse")
    for dataset in datasets.values():
        dataset.add_dynamic_item(token_sequences(tokenizer, 2, 3, text_key="target_text"))
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

from speechkit.data.text_policy import (
    CoverageReport,
    apply_unknown_policy,
    check_policy,
    count_characters_outside,
)
from speechkit.errors import DataError

logger = logging.getLogger(__name__)

_HINT = ("choose a policy for them (unknown_characters: unknown, drop_utterance or drop_character), "
         "normalise the text (text_normalizer), or retrain the tokenizer on text that holds them "
         "(docs/data.md, \"How text is normalised\")")


class TargetText:
    """A transcript's training target: ``normalizer(text)``, then, when ``alphabet`` is given, without the
    characters outside it (whitespace collapsed). Picklable, for loader workers.

    Example:
        >>> TargetText(str.upper, alphabet=set("ABC"))("a, b!  c")
        'A B C'
    """

    def __init__(self, normalizer: Optional[Callable[[str], str]] = None, alphabet: Optional[set] = None):
        self.normalizer = normalizer
        self.alphabet = None if alphabet is None else frozenset(alphabet)

    def __call__(self, text: str) -> str:
        if self.normalizer is not None:
            text = self.normalizer(text)
        if self.alphabet is not None:
            text = " ".join("".join(c for c in text if c.isspace() or c in self.alphabet).split())
        return text


def _alphabet_of(tokenizer_or_alphabet) -> set:
    alphabet = getattr(tokenizer_or_alphabet, "alphabet", None)
    return set(alphabet() if callable(alphabet) else tokenizer_or_alphabet)


def split_texts(dataset, text_key: str, normalizer: Optional[Callable[[str], str]], split: str) -> list:
    """``(id, normalised text)`` of every item of a ``DynamicItemDataset`` (read from its rows, no audio)."""
    pairs = []
    for data_id in dataset.data_ids:
        row = dataset.data[data_id]
        if text_key not in row:
            raise DataError(f"{split}: id {data_id!r} has no field {text_key!r} (fields: {sorted(row)})")
        text = row[text_key]
        if not isinstance(text, str):
            raise DataError(f"{split}: id {data_id!r}: field {text_key!r} must be text, got {text!r}")
        pairs.append((data_id, normalizer(text) if normalizer is not None else text))
    return pairs


def prepare_text_targets(datasets: dict, tokenizer_or_alphabet, normalizer: Optional[Callable] = None,
                         policy: str = "refuse", text_key: str = "text", target_key: str = "target_text",
                         ) -> tuple:
    """Counts the characters outside the tokenizer's alphabet in every split, applies ``policy`` and adds
    the ``target_key`` item to each dataset; returns ``(datasets, {split: CoverageReport})``.

    Arguments:
        datasets: ``{split: DynamicItemDataset}`` (the datasets with ``"drop_utterance"`` are new subsets).
        tokenizer_or_alphabet: a tokenizer with ``alphabet()`` or a set of characters.
        normalizer: applied to every transcript first (the recipe's ``text_normalizer``).
        policy: ``"refuse"``, ``"unknown"``, ``"drop_utterance"`` or ``"drop_character"``.

    Raises:
        DataError: ``"refuse"`` and some split holds characters outside the alphabet (every such split is
            named, with counts and example ids); a split left with no text; a policy that does not exist.
    """
    check_policy(policy)
    alphabet = _alphabet_of(tokenizer_or_alphabet)
    texts = {split: split_texts(dataset, text_key, normalizer, split) for split, dataset in datasets.items()}
    reports = {split: count_characters_outside(pairs, alphabet, name=split) for split, pairs in texts.items()}
    for line in coverage_lines(reports):
        logger.info("%s", line)
    failing = [report for report in reports.values() if report]
    if failing and policy == "refuse":
        raise DataError("characters the tokenizer cannot spell (they would become its unknown piece):\n"
                        + "\n".join(report.format() for report in failing) + "\n" + _HINT)
    prepared = {}
    for split, dataset in datasets.items():
        kept, _ = apply_unknown_policy(texts[split], alphabet, policy, name=split)
        if policy == "drop_utterance" and len(kept) < len(texts[split]):
            kept_ids = {data_id for data_id, _ in kept}
            dataset = dataset.filtered_sorted(key_test={"id": kept_ids.__contains__})
        keep_only = alphabet if policy == "drop_character" else None
        dataset.add_dynamic_item(TargetText(normalizer, keep_only), takes=[text_key], provides=[target_key])
        prepared[split] = dataset
    return prepared, reports


def prepare_token_targets(datasets: dict, tokenizer, normalizer: Optional[Callable], policy: str,
                          bos_index: int, eos_index: int, output_keys: list) -> dict:
    """:func:`prepare_text_targets`, then the token sequences of the targets (``tokens_bos``,
    ``tokens_eos``, ``tokens``: see :func:`speechkit.tokenizers.token_sequences`); each dataset outputs
    ``output_keys``. Returns the datasets (the coverage reports are in the log).
    """
    from speechkit.tokenizers.items import token_sequences

    datasets, _ = prepare_text_targets(datasets, tokenizer, normalizer, policy=policy)
    for dataset in datasets.values():
        dataset.add_dynamic_item(token_sequences(tokenizer, bos_index, eos_index, text_key="target_text"))
        dataset.set_output_keys(output_keys)
    return datasets


def coverage_lines(reports: dict) -> list:
    """One line per split: its coverage, and what the policy will do (for a recipe's log)."""
    lines = []
    for split, report in reports.items():
        if not isinstance(report, CoverageReport):
            raise DataError(f"coverage_lines: {split!r} is not a CoverageReport")
        outside = sum(report.counts.values())
        lines.append(f"{split}: {report.total_utterances} utterances, character coverage "
                     f"{100 * report.coverage:.2f}% ({outside} characters outside the tokenizer's alphabet "
                     f"in {len(report.utterances)} utterances)")
    return lines
