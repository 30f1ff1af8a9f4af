"""The text policy: normaliser, character coverage and unknown-character policies."""
from __future__ import annotations

import pickle
import random

import pytest

from speechkit.corpus.text import make_sentences
from speechkit.data.text_policy import (
    UNKNOWN_CHARACTER_POLICIES,
    TextNormalizer,
    apply_unknown_policy,
    check_policy,
    count_characters_outside,
)
from speechkit.errors import DataError
from speechkit.experiment.hparams import load_hparams

UPPER = set("ABCDEFGHIJKLMNOPQRSTUVWXYZ'")


def spell_digits(text: str) -> str:
    names = "zero one two three four five six seven eight nine".split()
    return "".join(f" {names[int(c)]} " if c.isdigit() else c for c in text)


def test_case_punctuation_unicode_and_whitespace():
    normalize = TextNormalizer(case="lower")
    assert normalize("  Hello,   World!\t(again)  ") == "hello world again"
    assert normalize("Don’t stop") == "don't stop"  # typographic apostrophe is the kept one
    assert normalize("ｆｕｌｌ ﬁne") == "full fine"  # NFKC: full-width letters, ligature
    assert TextNormalizer(case="upper")("naïve café") == "NAÏVE CAFÉ"
    assert TextNormalizer(case=None)("MiXeD") == "MiXeD"


def test_unicode_none_keeps_compatibility_forms():
    assert TextNormalizer(unicode=None)("ﬁne") == "ﬁne"


def test_punctuation_keep_and_keep_characters():
    assert TextNormalizer(punctuation="keep")("a, b!") == "a, b!"
    assert TextNormalizer(keep_characters="-")("well-known, isn't") == "well-known isn t"
    assert TextNormalizer(keep_characters="")("isn't") == "isn t"


def test_numbers_left_alone_or_spelled_by_a_function():
    assert TextNormalizer(case="upper")("Route 66") == "ROUTE 66"
    spelled = TextNormalizer(case="upper", numbers=spell_digits)
    assert spelled("Route 66.") == "ROUTE SIX SIX"
    assert "spell_digits" in spelled.describe()


def test_numbers_function_returning_a_non_string_is_an_error():
    with pytest.raises(DataError, match="returned int"):
        TextNormalizer(numbers=len)("abc")


@pytest.mark.parametrize("kwargs, key", [
    ({"case": "title"}, "case"), ({"punctuation": "strip"}, "punctuation"), ({"unicode": "NFD"}, "unicode"),
    ({"numbers": "spell"}, "numbers"), ({"keep_characters": 3}, "keep_characters")])
def test_bad_options_name_the_key(kwargs, key):
    with pytest.raises(DataError, match=key):
        TextNormalizer(**kwargs)


def test_non_string_input_is_an_error():
    with pytest.raises(DataError, match="expected a string"):
        TextNormalizer()(None)


def test_describe_says_each_step():
    line = TextNormalizer(case="upper").describe()
    assert line == ("unicode NFKC; numbers as written; upper case; punctuation removed except \"'\"; "
                    "whitespace collapsed")
    assert "\n" not in TextNormalizer(punctuation="keep", unicode=None).describe()
    assert "punctuation kept" in TextNormalizer(punctuation="keep").describe()


def test_built_in_corpus_text_is_its_own_normal_form():
    normalize = TextNormalizer(case="upper")
    sentences = make_sentences(300, random.Random(3))
    assert [normalize(s) for s in sentences] == sentences


def test_picklable_for_loader_workers():
    normalize = TextNormalizer(case="lower", numbers=spell_digits)
    assert pickle.loads(pickle.dumps(normalize))("A 1") == "a one"


def test_built_from_yaml(tmp_path):
    yaml = tmp_path / "hp.yaml"
    yaml.write_text("text_normalizer: !new:speechkit.data.text_policy.TextNormalizer\n"
                    "    case: lower\n    punctuation: remove\n    unicode: NFKC\n"
                    f"    numbers: !name:{__name__}.spell_digits\n")
    normalize = load_hparams(str(yaml))["text_normalizer"]
    assert normalize("Nine, 9!") == "nine nine"


def test_count_characters_outside():
    texts = [("u1", "NINE"), ("u2", "Nine!"), ("u3", "nine"), ("u4", "HI THERE")]
    report = count_characters_outside(texts, UPPER, name="train")
    assert report.counts == {"n": 3, "e": 2, "i": 2, "!": 1}
    assert list(report.counts) == ["n", "e", "i", "!"]  # most frequent first
    assert report.examples["n"] == ["u2", "u3"]
    assert report.utterances == ["u2", "u3"]
    assert report.total_characters == 4 + 5 + 4 + 7 and report.total_utterances == 4
    assert report.coverage == pytest.approx(1 - 8 / 20)
    text = report.format()
    assert "train: 4 characters outside the alphabet, 8 occurrences in 2 of 4 utterances" in text
    assert "'n' (U+006E LATIN SMALL LETTER N): 3 times, e.g. u2, u3" in text


def test_examples_are_capped_and_full_coverage_reads_clean():
    texts = [(f"u{i}", "x") for i in range(10)]
    report = count_characters_outside(texts, set(), max_examples=2)
    assert report.examples == {"x": ["u0", "u1"]} and report.counts == {"x": 10}
    clean = count_characters_outside([("a", "AB C")], UPPER)
    assert not clean and clean.coverage == 1.0 and "every character" in clean.format()


def test_policy_names():
    assert UNKNOWN_CHARACTER_POLICIES[0] == "refuse"
    for name in UNKNOWN_CHARACTER_POLICIES:
        assert check_policy(name) == name
    with pytest.raises(DataError, match="'ignore' does not exist; use one of refuse, unknown"):
        check_policy("ignore")
    with pytest.raises(DataError, match="does not exist"):
        apply_unknown_policy([("a", "A")], UPPER, "map")


def test_refuse_names_examples_and_counts():
    with pytest.raises(DataError) as error:
        apply_unknown_policy([("u1", "NINE"), ("u2", "Nine")], UPPER, name="valid")
    message = str(error.value)
    assert "valid: 3 characters outside the alphabet" in message and "u2" in message
    assert "unknown_characters" in message
    kept, report = apply_unknown_policy([("u1", "NINE")], UPPER)
    assert kept == [("u1", "NINE")] and not report


def test_unknown_drop_utterance_drop_character():
    texts = [("u1", "NINE"), ("u2", "Nine !"), ("u3", "A B")]
    kept, report = apply_unknown_policy(texts, UPPER, "unknown")
    assert kept == texts and report.counts["e"] == 1
    kept, _ = apply_unknown_policy(texts, UPPER, "drop_utterance")
    assert kept == [("u1", "NINE"), ("u3", "A B")]
    kept, _ = apply_unknown_policy(texts, UPPER, "drop_character")
    assert kept == [("u1", "NINE"), ("u2", "N"), ("u3", "A B")]


@pytest.mark.parametrize("policy", ["drop_utterance", "drop_character"])
def test_a_split_whose_texts_are_all_dropped_is_an_error(policy):
    with pytest.raises(DataError, match=f"test: policy '{policy}' leaves none of its 2 utterances"):
        apply_unknown_policy([("u1", "abc"), ("u2", "de!")], UPPER, policy, name="test")
