"""Whisper's text normalisers: examples of each rule, and equality with transformers' implementation of the
reference on a set of sentences (the differences on rare number phrases are listed in docs/whisper.md and
checked here as differences, so that a change of either side is noticed)."""
import json

import pytest

from speechkit.errors import CheckpointError
from speechkit.models.whisper.text_normalizer import BasicTextNormalizer, EnglishTextNormalizer, spell_numbers

SPELLINGS = {"colour": "color", "favourite": "favorite", "organise": "organize", "theatre": "theater"}

SENTENCES = [
    "Hello, World! [laughs] (inaudible) Mr. Smith won't go.",
    "I have twenty one apples and one hundred and five pears",
    "It costs five dollars and fifty cents", "the twenty first of may, nineteen ninety nine",
    "fifty percent of 1,000,000 people", "He's been there; they'd done it", "point five", "one two three",
    "the 1990s and the nineties", "um hmm uh, ok", "Café naïve colour", "two thousand and twenty",
    "one million two hundred thousand", "third", "a hundred", "oh seven", "zero",
    "My favourite colour is blue.", "We'll organise it, can't we?", "Dr. Jones lives on St. James street",
    "It's 3.5 km away.", "five thousand three hundred and twelve", "the one hundredth time",
    "twenty twenty two", "I'm gonna wanna see y'all", "Œuvre of Bjørk", "three point one four", "ten pounds",
    "twelve cents", "the second time", "seventy five percent", "nine eleven", "Hello... world?!",
    "ninety nine bottles", "the fifth of november", "Let's go, ma'am", 'he said "hi" - and left',
    "eleven hundred", "two and a half", "one of them", "the sixties", "a thousand ways",
    "she's been twenty three", "$20 and 50%", "<noise> hello", "first and second", "The Theatre, at 7.30",
    "I'd like a glass",
]
#: Phrases where speechkit's number rules and the reference's part ways (docs/whisper.md).
DIFFERENT = {"It is 5 o'clock": ("it is 50 clock", "it is 5 o clock"),
             "one euro": ("one", "€1")}


def test_english_rules_on_examples():
    normalize = EnglishTextNormalizer(SPELLINGS)
    assert normalize("Mr. Smith won't pay twenty one dollars [laughs] for the colour!") == \
        "mister smith will not pay $21 for the color"
    assert normalize("Um, I'm (coughs) gonna be there at nineteen ninety nine") == \
        "i am going to be there at 1999"
    assert normalize("they've eaten 1,500 of the favourite ones") == \
        "they have eaten 1500 of the favorite ones"
    assert normalize("Éléonore's café — naïve!") == "eleonore is cafe naive"
    assert normalize("fifty percent") == "50%" and normalize("fifty % off") == "50% off"
    assert normalize("the price: $ x") == "the price x"  # a currency sign before no number goes
    assert spell_numbers("three point one four and two dollars and five cents") == "3.14 and $2.05"
    assert spell_numbers("the twenty first and the one hundredth") == "the 21st and the 100th"


def test_basic_normaliser_keeps_accents_unless_asked():
    assert BasicTextNormalizer()("Hello, World! [music] Café") == "hello world café"
    assert BasicTextNormalizer(remove_diacritics=True)("Ça ira (bis), Þór") == "ca ira thor"
    assert BasicTextNormalizer(split_letters=True)("ab, c") == "a b c"


def test_spellings_come_from_a_folders_normalizer_json(tmp_path):
    assert EnglishTextNormalizer.from_folder(tmp_path)("colour") == "colour"  # no file: no spellings
    (tmp_path / "normalizer.json").write_text(json.dumps(SPELLINGS))
    assert EnglishTextNormalizer.from_folder(tmp_path)("the colour") == "the color"
    (tmp_path / "normalizer.json").write_text(json.dumps({"colour": 3}))
    with pytest.raises(CheckpointError, match="normalizer.json: must be a JSON object mapping words"):
        EnglishTextNormalizer.from_folder(tmp_path)
    (tmp_path / "normalizer.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="normalizer.json: not a readable JSON file"):
        EnglishTextNormalizer.from_folder(tmp_path)


def test_equal_to_transformers_reference_implementation():
    reference = pytest.importorskip("transformers.models.whisper.english_normalizer")
    theirs, ours = reference.EnglishTextNormalizer(SPELLINGS), EnglishTextNormalizer(SPELLINGS)
    mismatches = [(s, theirs(s), ours(s)) for s in SENTENCES if theirs(s).strip() != ours(s)]
    assert not mismatches
    for sentence, (their_text, our_text) in DIFFERENT.items():
        assert (theirs(sentence).strip(), ours(sentence)) == (their_text, our_text)
    for options in ({}, {"remove_diacritics": True}):
        basic_theirs, basic_ours = reference.BasicTextNormalizer(**options), BasicTextNormalizer(**options)
        # The reference leaves the spaces at either end; speechkit strips them (WER splits on spaces anyway).
        assert [basic_theirs(s).strip() for s in SENTENCES] == [basic_ours(s) for s in SENTENCES]
