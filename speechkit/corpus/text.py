"""English sentences for the built-in corpus: a small grammar, a fixed vocabulary, and text normalization.

The grammar draws everyday sentences ("THE OLD FARMER CARRIED TWO BASKETS TO THE MARKET THIS MORNING") from
about 500 common words, so that a small model can learn the whole vocabulary in minutes while no two
sentences need to be alike. Every word is spelled as the synthesizers read it (numbers are words), and the
transcript is normalized to upper-case letters, apostrophe and space.

Example:
    >>> import random
    >>> sentences = make_sentences(3, random.Random(0))
    >>> all(normalize_text(s) == s for s in sentences)
    True
"""
from __future__ import annotations

import random
import re
from typing import Callable

# Word lists, grouped by the part they play in a sentence. Plain lists (not sets) keep the draw order stable.
PERSONS = ("the farmer", "the teacher", "the doctor", "the driver", "the captain", "the baker", "the painter",
           "the children", "my brother", "my sister", "her father", "his mother", "our neighbor",
           "the old man", "the young woman", "the little girl", "the tall boy", "the police officer",
           "the student",
           "the nurse", "the king", "the queen", "the sailor", "the singer", "the writer", "the hunter",
           "the lawyer", "the pilot", "the soldier", "the gardener")
NAMES = ("john", "mary", "peter", "susan", "david", "emma", "robert", "linda", "thomas", "alice", "james",
         "laura", "michael", "anna", "george", "helen", "frank", "grace", "henry", "rachel")
ADJECTIVES = ("old", "new", "small", "large", "red", "blue", "green", "yellow", "black", "white", "heavy",
              "light", "warm", "cold", "quiet", "loud", "bright", "dark", "clean", "dirty", "broken",
              "empty", "famous", "strange", "beautiful", "wooden", "golden", "simple", "little", "open")
THINGS = ("book", "letter", "basket", "table", "chair", "window", "door", "bottle", "cup", "box", "bag",
          "key", "map", "picture", "clock", "lamp", "coat", "hat", "ball", "boat", "car", "horse", "dog",
          "cat", "bird", "apple", "orange", "cake", "bread", "flower", "stone", "rope", "knife", "candle",
          "bicycle", "radio", "camera", "ticket", "garden", "bridge")
PLURAL_THINGS = ("books", "letters", "baskets", "tables", "chairs", "bottles", "cups", "boxes", "bags",
                 "keys", "maps", "pictures", "apples", "oranges", "cakes", "flowers", "stones", "candles",
                 "tickets", "horses", "dogs", "birds", "shoes", "coins", "papers", "eggs", "plates",
                 "glasses", "pencils", "blankets")
PLACES = ("the market", "the station", "the river", "the house", "the school", "the church", "the office",
          "the kitchen", "the garden", "the village", "the city", "the harbor", "the hospital", "the library",
          "the forest", "the hill", "the beach", "the bank", "the farm", "the museum", "the park",
          "the store", "the hotel", "the airport", "the corner", "the bridge", "the castle", "the theater")
PAST_VERBS = ("carried", "found", "opened", "closed", "bought", "sold", "painted", "washed", "dropped",
              "moved", "brought", "took", "left", "lost", "built", "cleaned", "fixed", "showed", "gave",
              "kept", "pulled", "pushed", "watched", "picked", "covered", "filled", "broke", "hid", "sent",
              "wanted")
BASE_VERBS = ("carry", "find", "open", "close", "buy", "sell", "paint", "wash", "move", "bring", "take",
              "leave", "build", "clean", "fix", "show", "keep", "watch", "pick", "fill", "send", "check",
              "count", "hold", "read")
MOTION_VERBS = ("walked", "drove", "ran", "went", "traveled", "returned", "hurried", "rode", "sailed", "came")
TIMES = ("this morning", "last night", "yesterday", "today", "on monday", "on tuesday", "on wednesday",
         "on thursday", "on friday", "on saturday", "on sunday", "in the evening", "after lunch",
         "before dinner", "every day", "last week", "next week", "in the spring", "in the summer",
         "in the winter", "at noon", "at midnight", "early", "late", "tomorrow", "soon", "again", "at dawn")
NUMBERS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
           "twenty", "thirty", "forty", "fifty", "a hundred", "a few", "many", "several", "some")
PREPOSITIONS = ("to", "from", "near", "behind", "inside", "under", "across", "beside", "toward", "past")
ADVERBS = ("quickly", "slowly", "carefully", "quietly", "happily", "suddenly", "finally", "nearly",
           "always", "never", "often", "really")
FEELINGS = ("happy", "tired", "hungry", "angry", "worried", "ready", "sure", "glad", "afraid", "busy",
            "sorry", "surprised", "proud", "lucky", "late")
WEATHER = ("sunny", "windy", "cloudy", "rainy", "cold", "warm", "foggy", "clear", "hot", "wet")
SUBJECT_PRONOUNS = ("i", "we", "you", "they", "he", "she")
CONTRACTIONS = ("i don't", "we don't", "they don't", "she doesn't", "he doesn't", "you didn't", "i can't",
                "we won't", "they wouldn't", "it isn't")


def _pick(rng: random.Random, words) -> str:
    return words[rng.randrange(len(words))]


def _subject(rng: random.Random) -> str:
    return _pick(rng, NAMES) if rng.random() < 0.35 else _pick(rng, PERSONS)


def _object(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return f"the {_pick(rng, ADJECTIVES)} {_pick(rng, THINGS)}"
    if roll < 0.7:
        return f"{_pick(rng, NUMBERS)} {_pick(rng, PLURAL_THINGS)}"
    if roll < 0.85:
        return f"the {_pick(rng, THINGS)}"
    return f"a {_pick(rng, ADJECTIVES)} {_pick(rng, THINGS)}"


def _where(rng: random.Random) -> str:
    return f"{_pick(rng, PREPOSITIONS)} {_pick(rng, PLACES)}"


# Each template is a function of the random generator; together they give varied lengths (4 to 14 words).
_TEMPLATES: tuple[Callable[[random.Random], str], ...] = (
    lambda r: f"{_subject(r)} {_pick(r, PAST_VERBS)} {_object(r)} {_where(r)} {_pick(r, TIMES)}",
    lambda r: f"{_subject(r)} {_pick(r, ADVERBS)} {_pick(r, PAST_VERBS)} {_object(r)}",
    lambda r: f"{_subject(r)} {_pick(r, MOTION_VERBS)} {_where(r)} {_pick(r, TIMES)}",
    lambda r: f"please {_pick(r, BASE_VERBS)} {_object(r)} {_where(r)}",
    lambda r: f"did you {_pick(r, BASE_VERBS)} {_object(r)} {_pick(r, TIMES)}",
    lambda r: f"{_pick(r, SUBJECT_PRONOUNS)} will {_pick(r, BASE_VERBS)} {_object(r)} {_pick(r, TIMES)}",
    lambda r: f"{_pick(r, CONTRACTIONS)} want to {_pick(r, BASE_VERBS)} {_object(r)}",
    lambda r: f"{_subject(r)} was {_pick(r, FEELINGS)} because the day was {_pick(r, WEATHER)}",
    lambda r: f"it was {_pick(r, WEATHER)} {_pick(r, TIMES)} so we stayed {_where(r)}",
    lambda r: f"there are {_pick(r, NUMBERS)} {_pick(r, PLURAL_THINGS)} {_where(r)}",
    lambda r: f"{_subject(r)} said that {_object(r)} was {_pick(r, ADJECTIVES)}",
    lambda r: f"where did {_subject(r)} put {_object(r)}",
    lambda r: f"{_subject(r)} and {_subject(r)} {_pick(r, MOTION_VERBS)} {_where(r)} together",
    lambda r: f"{_subject(r)} {_pick(r, PAST_VERBS)} {_object(r)} and {_pick(r, PAST_VERBS)} {_object(r)}",
    lambda r: f"we {_pick(r, ADVERBS)} {_pick(r, MOTION_VERBS)} {_where(r)} with {_object(r)}",
    lambda r: f"{_subject(r)} is {_pick(r, FEELINGS)} {_pick(r, TIMES)}",
)

_NOT_ALLOWED = re.compile(r"[^A-Z' ]+")
_SPACES = re.compile(r" +")


def normalize_text(text: str) -> str:
    """Upper-case letters, apostrophe and single spaces: the transcript form of every corpus manifest.

    Example:
        >>> normalize_text("  Don't  stop, it's 5-ish! ")
        "DON'T STOP IT'S ISH"
    """
    upper = _NOT_ALLOWED.sub(" ", text.upper().replace("\u2019", "'"))
    return _SPACES.sub(" ", upper).strip()


def make_sentence(rng: random.Random) -> str:
    """One normalized sentence drawn from the grammar."""
    return normalize_text(_pick(rng, _TEMPLATES)(rng))


def make_sentences(count: int, rng: random.Random, max_tries_per_sentence: int = 50) -> list:
    """``count`` distinct normalized sentences, in draw order (so a seed always gives the same list).

    Raises ValueError when the grammar cannot give that many distinct sentences.
    """
    seen: set = set()
    sentences: list = []
    tries = 0
    while len(sentences) < count:
        tries += 1
        if tries > max_tries_per_sentence * max(count, 1):
            raise ValueError(f"the grammar gave only {len(sentences)} distinct sentences of {count} asked")
        sentence = make_sentence(rng)
        if sentence not in seen:
            seen.add(sentence)
            sentences.append(sentence)
    return sentences


#: The words of :func:`make_digit_strings`, index = digit.
DIGIT_WORDS = ("ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE")


def digit_string_count(length_range: tuple) -> int:
    """How many distinct digit strings have a length within ``length_range`` (both ends included)."""
    low, high = length_range
    return sum(10 ** length for length in range(low, high + 1))


def make_digit_strings(count: int, rng: random.Random, length_range: tuple = (3, 6)) -> list:
    """``count`` distinct connected-digit transcripts ("FIVE SEVEN EIGHT ZERO"), in draw order: each string's
    length is uniform within ``length_range``, its digits uniform and independent (the material of a
    connected-digit recognizer, e.g. phone numbers read out).

    Raises ValueError when fewer than ``count`` distinct strings have such lengths.

    Example:
        >>> make_digit_strings(2, random.Random(0), (3, 3))
        ['SIX ZERO FOUR', 'SIX FOUR SEVEN']
    """
    low, high = length_range
    if not 1 <= low <= high:
        raise ValueError(f"digit string lengths must be 1 <= min <= max, got {length_range!r}")
    if count > digit_string_count(length_range):
        raise ValueError(f"only {digit_string_count(length_range)} distinct digit strings have {low} to "
                         f"{high} digits, {count} asked")
    seen: set = set()
    strings: list = []
    while len(strings) < count:  # a draw repeats rarely unless count is close to every string there is
        length = rng.randint(low, high)
        string = " ".join(DIGIT_WORDS[rng.randrange(10)] for _ in range(length))
        if string not in seen:
            seen.add(string)
            strings.append(string)
    return strings


def vocabulary() -> list:
    """Every word the grammar can produce, sorted (useful for tokenizers and tests)."""
    words: set = set()
    groups = (PERSONS, NAMES, ADJECTIVES, THINGS, PLURAL_THINGS, PLACES, PAST_VERBS, BASE_VERBS, MOTION_VERBS,
              TIMES, NUMBERS, PREPOSITIONS, ADVERBS, FEELINGS, WEATHER, SUBJECT_PRONOUNS, CONTRACTIONS)
    for group in groups:
        for phrase in group:
            words.update(normalize_text(phrase).split())
    fixed = ("please did you will want to was because the day it so we stayed there are said that where put "
             "and together with is a")
    words.update(normalize_text(fixed).split())
    return sorted(words)
