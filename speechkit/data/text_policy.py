"""How transcripts become the text a model learns and is scored on: one normaliser, one coverage check.

The same ``TextNormalizer`` is applied to training targets, to the language model's text and to both sides of
the error rates, so that what the model learns, what it is scored on and what the WER file says agree. A
recipe declares it in its YAML::

    text_normalizer: !new:speechkit.data.text_policy.TextNormalizer
        case: upper            # lower, upper, or null (leave as written)
        punctuation: remove    # remove (keeping keep_characters) or keep
        unicode: NFKC          # NFKC or null
        numbers: null          # or !name:my_module.spell_numbers (a function str -> str)
        keep_characters: "'"

Characters the tokenizer cannot spell become its unknown piece. ``count_characters_outside`` counts them
before training starts, and ``apply_unknown_policy`` decides what happens to them: ``"refuse"`` (the
default: a ``DataError`` naming characters, counts and example ids), ``"unknown"`` (keep them; the tokenizer
maps them to its unknown piece), ``"drop_utterance"`` or ``"drop_character"``.

Example:
    >>> normalize = TextNormalizer(case="upper")
    >>> normalize("Don’t stop — it's  Nine!")
    "DON'T STOP IT'S NINE"
    >>> letters = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    >>> report = count_characters_outside([("u1", "NINE"), ("u2", "NAÏVE")], letters)
    >>> report.counts, report.utterances
    ({'Ï': 1}, ['u2'])
"""
from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable, Optional

from speechkit.errors import DataError

#: The unknown-character policies, the first being the default.
UNKNOWN_CHARACTER_POLICIES = ("refuse", "unknown", "drop_utterance", "drop_character")

_CASES = ("lower", "upper", None)
_PUNCTUATION = ("remove", "keep")
_UNICODE_FORMS = ("NFKC", None)
# Typographic apostrophes read as "'" when the apostrophe is kept: "don’t" and "don't" are one word.
_APOSTROPHES = {"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'"}
_SPACES = re.compile(r"\s+")


def _choice(name: str, value, allowed) -> None:
    if value not in allowed:
        names = ", ".join("null" if a is None else repr(a) for a in allowed)
        raise DataError(f"TextNormalizer: {name}={value!r} is not one of {names}")


class TextNormalizer:
    """Maps a transcript to the form used for training targets, LM text and scoring.

    Steps, in order: unicode normal form (NFKC folds full-width letters, ligatures and compatibility forms),
    the ``numbers`` function (if given), case, punctuation (every Unicode punctuation character except
    ``keep_characters`` becomes a space), then whitespace collapsed to single spaces and stripped.

    Arguments:
        case: ``"lower"``, ``"upper"`` or ``None`` (case left as written).
        punctuation: ``"remove"`` or ``"keep"``.
        unicode: ``"NFKC"`` or ``None``.
        numbers: ``None`` (digits left as written) or a function ``str -> str`` applied to the whole text,
            e.g. one spelling digits out as words (YAML: ``numbers: !name:my_module.spell_numbers``).
        keep_characters: punctuation kept when ``punctuation="remove"`` (default: the apostrophe).

    Example:
        >>> TextNormalizer(case="lower")("Hello, World!  (again)")
        'hello world again'
        >>> print(TextNormalizer(case="lower").describe())
        unicode NFKC; numbers as written; lower case; punctuation removed except "'"; whitespace collapsed
    """

    def __init__(self, case: Optional[str] = None, punctuation: str = "remove",
                 unicode: Optional[str] = "NFKC", numbers: Optional[Callable[[str], str]] = None,
                 keep_characters: str = "'"):
        _choice("case", case, _CASES)
        _choice("punctuation", punctuation, _PUNCTUATION)
        _choice("unicode", unicode, _UNICODE_FORMS)
        if numbers is not None and not callable(numbers):
            raise DataError(f"TextNormalizer: numbers={numbers!r} is not a function (str -> str) nor null")
        if not isinstance(keep_characters, str):
            raise DataError(f"TextNormalizer: keep_characters={keep_characters!r} is not a string")
        self.case = case
        self.punctuation = punctuation
        self.unicode = unicode
        self.numbers = numbers
        self.keep_characters = keep_characters

    def __call__(self, text: str) -> str:
        if not isinstance(text, str):
            raise DataError(f"TextNormalizer: expected a string, got {type(text).__name__} ({text!r})")
        if self.unicode:
            text = unicodedata.normalize(self.unicode, text)
        if self.numbers is not None:
            spelled = self.numbers(text)
            if not isinstance(spelled, str):
                raise DataError(f"TextNormalizer: numbers function {_name(self.numbers)} returned "
                                f"{type(spelled).__name__} for {text!r}, not a string")
            text = spelled
        if self.case == "lower":
            text = text.lower()
        elif self.case == "upper":
            text = text.upper()
        if self.punctuation == "remove":
            text = "".join(self._keep_or_space(char) for char in text)
        return _SPACES.sub(" ", text).strip()

    def _keep_or_space(self, char: str) -> str:
        if char in self.keep_characters:
            return char
        if "'" in self.keep_characters and char in _APOSTROPHES:
            return "'"
        return " " if unicodedata.category(char).startswith("P") else char

    def describe(self) -> str:
        """One line saying what this normaliser does (written at the top of WER files)."""
        parts = [f"unicode {self.unicode}" if self.unicode else "unicode as written",
                 f"numbers by {_name(self.numbers)}" if self.numbers else "numbers as written",
                 f"{self.case} case" if self.case else "case as written"]
        if self.punctuation == "remove":
            kept = f' except "{self.keep_characters}"' if self.keep_characters else ""
            parts.append(f"punctuation removed{kept}")
        else:
            parts.append("punctuation kept")
        parts.append("whitespace collapsed")
        return "; ".join(parts)

    def __repr__(self) -> str:
        return (f"TextNormalizer(case={self.case!r}, punctuation={self.punctuation!r}, "
                f"unicode={self.unicode!r}, "
                f"numbers={_name(self.numbers) if self.numbers else None}, "
                f"keep_characters={self.keep_characters!r})")


def _name(function) -> str:
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or type(function).__name__
    return f"{module}.{name}" if module else name


@dataclass
class CoverageReport:
    """Characters of some texts outside an alphabet.

    Attributes:
        counts: character -> occurrences, most frequent first.
        examples: character -> up to ``max_examples`` ids of utterances containing it.
        utterances: ids of the utterances with at least one such character, in reading order.
        total_characters: non-whitespace characters read.
        total_utterances: utterances read.
        name: what was read (a split name or a file), used in messages.
    """

    counts: dict = field(default_factory=dict)
    examples: dict = field(default_factory=dict)
    utterances: list = field(default_factory=list)
    total_characters: int = 0
    total_utterances: int = 0
    name: str = "text"

    @property
    def coverage(self) -> float:
        """Fraction of the characters read that are inside the alphabet (1.0 when nothing was read)."""
        if not self.total_characters:
            return 1.0
        return 1.0 - sum(self.counts.values()) / self.total_characters

    def __bool__(self) -> bool:
        return bool(self.counts)

    def format(self, limit: int = 10) -> str:
        """A few lines for an error message or a log: counts, the most frequent characters and example ids."""
        if not self.counts:
            return (f"{self.name}: every character of {self.total_utterances} utterances is in the alphabet "
                    f"({self.total_characters} characters)")
        outside = sum(self.counts.values())
        lines = [f"{self.name}: {len(self.counts)} characters outside the alphabet, {outside} occurrences in "
                 f"{len(self.utterances)} of {self.total_utterances} utterances "
                 f"(coverage {100 * self.coverage:.2f}% of {self.total_characters} characters)"]
        for char, count in list(self.counts.items())[:limit]:
            ids = ", ".join(self.examples[char])
            label = f"{char!r} (U+{ord(char):04X} {unicodedata.name(char, '?')})"
            lines.append(f"  {label}: {count} times, e.g. {ids}")
        if len(self.counts) > limit:
            lines.append(f"  ... and {len(self.counts) - limit} more characters")
        return "\n".join(lines)


def count_characters_outside(texts: Iterable, alphabet, name: str = "text",
                             max_examples: int = 3) -> CoverageReport:
    """Counts the characters of ``texts`` that ``alphabet`` lacks (whitespace is never counted: tokenizers
    turn it into word boundaries).

    Arguments:
        texts: iterable of ``(id, text)`` pairs.
        alphabet: the characters the tokenizer can spell (a set, or any container of 1-character strings).
        name: what the texts are (e.g. ``"train"``), for messages.
        max_examples: ids kept per character.

    Example:
        >>> report = count_characters_outside([("a", "HI!"), ("b", "OK!")], set("HIOK"), name="train")
        >>> report.counts, report.examples, round(report.coverage, 3)
        ({'!': 2}, {'!': ['a', 'b']}, 0.667)
    """
    alphabet = set(alphabet)
    counts: Counter = Counter()
    examples: dict = {}
    utterances: list = []
    total_characters = total_utterances = 0
    for utterance_id, text in texts:
        total_utterances += 1
        missing = False
        for char in text:
            if char.isspace():
                continue
            total_characters += 1
            if char not in alphabet:
                counts[char] += 1
                missing = True
                ids = examples.setdefault(char, [])
                if len(ids) < max_examples and utterance_id not in ids:
                    ids.append(utterance_id)
        if missing:
            utterances.append(utterance_id)
    ordered = dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return CoverageReport(counts=ordered, examples={char: examples[char] for char in ordered},
                          utterances=utterances, total_characters=total_characters,
                          total_utterances=total_utterances, name=name)


def check_policy(policy: str) -> str:
    """Returns ``policy`` if it names an unknown-character policy, else raises a ``DataError`` naming them."""
    if policy not in UNKNOWN_CHARACTER_POLICIES:
        raise DataError(f"unknown-character policy {policy!r} does not exist; use one of "
                        f"{', '.join(UNKNOWN_CHARACTER_POLICIES)}")
    return policy


def apply_unknown_policy(texts: Iterable, alphabet, policy: str = "refuse", name: str = "text"):
    """Applies an unknown-character policy to ``(id, text)`` pairs; returns ``(kept_pairs, report)``.

    ``"refuse"`` raises a ``DataError`` with the report when any character is outside ``alphabet``;
    ``"unknown"`` keeps the texts as they are; ``"drop_utterance"`` leaves out the utterances holding such a
    character; ``"drop_character"`` deletes those characters (whitespace then collapsed). A split left with no
    utterance (or no text) is an error whatever the policy.

    Example:
        >>> kept, report = apply_unknown_policy([("a", "HI!"), ("b", "OK")], set("HIOK"), "drop_character")
        >>> kept
        [('a', 'HI'), ('b', 'OK')]
    """
    check_policy(policy)
    pairs = list(texts)
    alphabet = set(alphabet)
    report = count_characters_outside(pairs, alphabet, name=name)
    hint = ("; choose a policy for them (unknown_characters: unknown, drop_utterance or drop_character), "
            "normalise the text, or enlarge the vocabulary (docs/data.md, \"How text is normalised\")")
    if report and policy == "refuse":
        raise DataError(report.format() + "\n" + hint.lstrip("; "))
    if policy == "drop_utterance":
        affected = set(report.utterances)
        kept = [(utterance_id, text) for utterance_id, text in pairs if utterance_id not in affected]
    elif policy == "drop_character":
        kept = [(utterance_id, _keep_only(text, alphabet)) for utterance_id, text in pairs]
    else:
        kept = pairs
    if pairs and not any(text.strip() for _, text in kept):
        raise DataError(f"{name}: policy {policy!r} leaves none of its {len(pairs)} utterances with text\n"
                        + report.format())
    return kept, report


def _keep_only(text: str, alphabet: set) -> str:
    kept = "".join(char for char in text if char.isspace() or char in alphabet)
    return _SPACES.sub(" ", kept).strip()
