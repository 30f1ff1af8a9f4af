"""Whisper's text normalisation for scoring: the two normalisers its published WERs were computed with.

- :class:`BasicTextNormalizer` (any language): lower-case, drop ``[...]`` and ``(...)`` (annotations such as
  ``[laughs]``), turn punctuation and symbols into spaces, collapse spaces; diacritics kept unless asked.
- :class:`EnglishTextNormalizer`: the same plus what makes two English spellings of one utterance score
  equal: fillers (``um``, ``uh``, ``hmm``) dropped, contractions and titles written out (``won't`` ->
  ``will not``, ``Mr.`` -> ``mister``), diacritics removed, spelled-out numbers written as digits
  (``twenty one`` -> ``21``, ``five dollars and fifty cents`` -> ``$5.50``, ``fifty percent`` -> ``50%``,
  ``twenty first`` -> ``21st``) and British spellings made American through a mapping (a checkpoint's
  ``normalizer.json``, which the published folders ship).

Scores computed after these match the published Whisper evaluations' conventions; where the number rules
differ from the reference's on rare constructions, docs/whisper.md lists them.

Example:
    >>> normalize = EnglishTextNormalizer({"colour": "color"})
    >>> normalize("Mr. Smith won't pay twenty one dollars [laughs] for the colour!")
    'mister smith will not pay $21 for the color'
"""
from __future__ import annotations

import json
import os
import re
import unicodedata
from typing import Optional

from speechkit.errors import CheckpointError

#: Letters NFKD does not decompose, written with plain Latin letters.
LETTER_SPELLINGS = {"œ": "oe", "Œ": "OE", "ø": "o", "Ø": "O", "æ": "ae", "Æ": "AE", "ß": "ss", "ẞ": "SS",
                    "đ": "d", "Đ": "D", "ð": "d", "Ð": "D", "þ": "th", "Þ": "th", "ł": "l", "Ł": "L"}

_BRACKETED = re.compile(r"[<\[][^>\]]*[>\]]")
_PARENTHESISED = re.compile(r"\(([^)]+?)\)")
_SPACES = re.compile(r"\s+")


def replace_symbols(text: str, keep: str = "", strip_diacritics: bool = False) -> str:
    """Every mark, symbol and punctuation character (Unicode categories M, S, P) becomes a space, except
    those in ``keep``; with ``strip_diacritics``, accents are dropped first (``é`` -> ``e``, ``æ`` -> ``ae``).
    """
    if strip_diacritics:
        out = []
        for char in unicodedata.normalize("NFKD", text):
            if char in keep:
                out.append(char)
            elif char in LETTER_SPELLINGS:
                out.append(LETTER_SPELLINGS[char])
            elif unicodedata.category(char) == "Mn":
                continue  # a combining accent of the previous letter
            elif unicodedata.category(char)[0] in "MSP":
                out.append(" ")
            else:
                out.append(char)
        return "".join(out)
    return "".join(" " if char not in keep and unicodedata.category(char)[0] in "MSP" else char
                   for char in unicodedata.normalize("NFKC", text))


class BasicTextNormalizer:
    """Lower-case, annotations in brackets and parentheses removed, symbols to spaces, spaces collapsed.

    Arguments:
        remove_diacritics: also drop accents (``café`` -> ``cafe``).
        split_letters: put a space between the letters of each word (scripts without spaces between words).

    Example:
        >>> BasicTextNormalizer()("Hello, World! [music] Café")
        'hello world café'
    """

    def __init__(self, remove_diacritics: bool = False, split_letters: bool = False):
        self.remove_diacritics, self.split_letters = remove_diacritics, split_letters

    def __call__(self, text: str) -> str:
        text = _PARENTHESISED.sub("", _BRACKETED.sub("", text.lower()))
        text = replace_symbols(text, strip_diacritics=self.remove_diacritics).lower()
        if self.split_letters:
            import unicodedata as ud

            text = " ".join(" ".join(c for c in word if ud.category(c)[0] != "Z") for word in text.split())
        return _SPACES.sub(" ", text).strip()


# --------------------------------------------------------------------------------------------- English
_FILLERS = re.compile(r"\b(hmm|mm|mhm|mmm|uh|um)\b")
#: Whole-word rewrites applied in order: informal forms, titles (their period is gone by then), perfect
#: tenses whose 's / 'd are unambiguous, then the remaining contractions.
_REWRITES = [(re.compile(pattern), replacement) for pattern, replacement in [
    (r"\bwon't\b", "will not"), (r"\bcan't\b", "can not"), (r"\blet's\b", "let us"), (r"\bain't\b", "aint"),
    (r"\by'all\b", "you all"), (r"\bwanna\b", "want to"), (r"\bgotta\b", "got to"),
    (r"\bgonna\b", "going to"), (r"\bi'ma\b", "i am going to"), (r"\bimma\b", "i am going to"),
    (r"\bwoulda\b", "would have"), (r"\bcoulda\b", "could have"), (r"\bshoulda\b", "should have"),
    (r"\bma'am\b", "madam"),
    *[(rf"\b{short}\b", f"{long} ") for short, long in [
        ("mr", "mister"), ("mrs", "missus"), ("st", "saint"), ("dr", "doctor"), ("prof", "professor"),
        ("capt", "captain"), ("gov", "governor"), ("ald", "alderman"), ("gen", "general"),
        ("sen", "senator"), ("rep", "representative"), ("pres", "president"), ("rev", "reverend"),
        ("hon", "honorable"), ("asst", "assistant"), ("assoc", "associate"), ("lt", "lieutenant"),
        ("col", "colonel"), ("jr", "junior"), ("sr", "senior"), ("esq", "esquire")]],
    *[(rf"'{short} (been|gone|done|got)\b", rf" {long} \1") for short, long in [("d", "had"),
                                                                                 ("s", "has")]],
    (r"n't\b", " not"), (r"'re\b", " are"), (r"'s\b", " is"), (r"'d\b", " would"), (r"'ll\b", " will"),
    (r"'t\b", " not"), (r"'ve\b", " have"), (r"'m\b", " am"),
]]

UNITS = {word: value for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
TENS = {word: 10 * value for value, word in enumerate(
    "twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
MULTIPLIERS = {"hundred": 100, "thousand": 10 ** 3, "million": 10 ** 6, "billion": 10 ** 9,
               "trillion": 10 ** 12, "quadrillion": 10 ** 15}
_ORDINAL_UNITS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
                  "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13,
                  "fourteenth": 14, "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18,
                  "nineteenth": 19}
ORDINALS = {**_ORDINAL_UNITS, **{word[:-1] + "ieth": value for word, value in TENS.items()},
            **{word + "th": value for word, value in MULTIPLIERS.items()}}
PLURAL_TENS = {word[:-1] + "ies": value for word, value in TENS.items()}
CURRENCIES = {"dollar": "$", "dollars": "$", "pound": "£", "pounds": "£", "euro": "€", "euros": "€"}
CENTS = ("cent", "cents")


def ordinal_suffix(value: int) -> str:
    if value % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(value % 10, "th")


class _Number:
    """A number being read word by word: ``digits`` already fixed (``nineteen ninety`` -> ``"19"`` then
    90), ``value`` the part still growing, ``last`` the kind of the previous word."""

    def __init__(self):
        self.digits, self.value, self.last, self.decimals = "", None, None, None

    def _start(self, value: int) -> None:
        if self.value is not None:
            self.digits += str(self.value)
        self.value = value

    def add(self, word: str) -> None:
        if self.decimals is not None:  # after "point": each digit word appends a digit
            self.decimals += str(UNITS[word]) if word in UNITS else word
        elif word in UNITS or word == "oh":
            value = UNITS.get(word, 0)
            grows = self.last == "multiplier" and value < 20 or (
                self.last == "tens" and self.value % 10 == 0 and value < 10)
            if grows:
                self.value += value
            else:
                self._start(value)
            self.last = "unit"
        elif word in TENS:
            if self.last == "multiplier" and self.value % 100 == 0:
                self.value += TENS[word]
            else:
                self._start(TENS[word])
            self.last = "tens"
        elif word in MULTIPLIERS:
            factor = MULTIPLIERS[word]
            if self.value is None:
                self.value = factor
            else:
                low = self.value % (1000 if factor == 100 else factor)
                self.value = self.value - low + low * factor
            self.last = "multiplier"
        elif word == "point":
            self.decimals = ""
        elif word.isdigit():
            self._start(int(word))
            self.last = "literal"

    def text(self) -> str:
        whole = self.digits + ("" if self.value is None else str(self.value))
        if self.decimals is not None:
            whole += "." + self.decimals
        return whole


def _is_number_word(word: str, following: Optional[str], number: _Number) -> bool:
    """Whether ``word`` continues (or starts) ``number``; ``following``: the next word."""
    inside = number.value is not None or number.decimals is not None
    if number.decimals is not None:  # after "point" only digits follow
        return word in UNITS and UNITS[word] < 10
    if word in UNITS or word in TENS or word in MULTIPLIERS:
        return True
    if word == "oh":  # a zero only before a digit ("oh seven", "two oh one"), else the interjection
        return following in UNITS
    if word == "point":
        return following in UNITS
    if word == "and":  # "one hundred and five", "two thousand and twenty"
        return number.last == "multiplier" and (following in UNITS or following in TENS)
    return word.isdigit() and (inside or following in MULTIPLIERS)


def spell_numbers(text: str) -> str:
    """Spelled-out numbers in lower-case English words -> digits, with ordinals (``21st``), plural tens
    (``90s``), percentages (``50%``), decimals (``3.14``) and amounts of dollars, pounds, euros and cents.

    Example:
        >>> spell_numbers("one hundred and five pears cost two dollars and fifty cents")
        '105 pears cost $2.50'
    """
    words = text.split()
    out, index = [], 0
    while index < len(words):
        number, start = _Number(), index
        while index < len(words):
            word = words[index]
            following = words[index + 1] if index + 1 < len(words) else None
            if not _is_number_word(word, following, number):
                break
            if word != "and":
                number.add(word)
            index += 1
        if index > start and words[index:index + 3] == ["and", "a", "half"] and number.decimals is None:
            number.decimals, index = "5", index + 3
        suffix_word = words[index] if index < len(words) else None
        if index == start:  # not a number: an ordinal or plural ten on its own, or a plain word
            out.append(_lone_word(words, index))
            index += 1
            continue
        if suffix_word in ORDINALS and number.decimals is None and (
                number.last in ("tens", "multiplier") or suffix_word[:-2] in MULTIPLIERS):
            number.add(_ordinal_base(suffix_word))
            out.append(number.text() + ordinal_suffix(int(number.text())))
            index += 1
        elif suffix_word in PLURAL_TENS and number.decimals is None:
            number._start(PLURAL_TENS[suffix_word])
            out.append(number.text() + "s")
            index += 1
        elif suffix_word in ("percent", "%"):
            out.append(number.text() + "%")
            index += 1
        elif suffix_word in CURRENCIES:
            amount, index = number.text(), index + 1
            cents, index = _cents_after(words, index)
            out.append(CURRENCIES[suffix_word] + amount + (f".{cents:02d}" if cents is not None else ""))
        elif suffix_word in CENTS:
            out.append("¢" + number.text())
            index += 1
        elif words[start:index] == ["one"]:  # "one of them", "this one": a pronoun, not a figure
            out.append("one")
        else:
            out.append(number.text())
    return " ".join(out)


def _ordinal_base(word: str) -> str:
    value = ORDINALS[word]
    for table in (UNITS, TENS, MULTIPLIERS):
        for name, number in table.items():
            if number == value:
                return name
    return str(value)


def _lone_word(words: list, index: int) -> str:
    word = words[index]
    if word in ORDINALS:
        return f"{ORDINALS[word]}{ordinal_suffix(ORDINALS[word])}"
    if word in PLURAL_TENS:
        return f"{PLURAL_TENS[word]}s"
    return word


def _cents_after(words: list, index: int) -> tuple:
    """``and fifty cents`` after an amount: (50, the index after it), or (None, index)."""
    if index < len(words) and words[index] == "and":
        end = index + 1
        number = _Number()
        while end < len(words) and (words[end] in UNITS or words[end] in TENS):
            number.add(words[end])
            end += 1
        if end > index + 1 and end < len(words) and words[end] in CENTS and number.decimals is None:
            value = int(number.text())
            if value < 100:
                return value, end + 1
    return None, index


class EnglishTextNormalizer:
    """Whisper's English normalisation (see the module's description).

    Arguments:
        spellings: word -> replacement (British to American spellings); a Whisper folder's
            ``normalizer.json`` gives the published mapping (:meth:`from_folder`).

    ``__call__(text) -> str``.
    """

    def __init__(self, spellings: Optional[dict] = None):
        self.spellings = dict(spellings or {})

    @classmethod
    def from_file(cls, path) -> EnglishTextNormalizer:
        """With the spellings of a ``normalizer.json`` (a JSON object of strings to strings)."""
        try:
            with open(path, encoding="utf-8") as handle:
                mapping = json.load(handle)
        except (OSError, ValueError) as error:
            raise CheckpointError(f"{path}: not a readable JSON file ({error})") from None
        if not isinstance(mapping, dict) or not all(isinstance(key, str) and isinstance(value, str)
                                                    for key, value in mapping.items()):
            raise CheckpointError(f"{path}: must be a JSON object mapping words to words")
        return cls(mapping)

    @classmethod
    def from_folder(cls, folder) -> EnglishTextNormalizer:
        """With the folder's ``normalizer.json`` when it has one, else without spellings."""
        path = os.path.join(os.fspath(folder), "normalizer.json")
        return cls.from_file(path) if os.path.isfile(path) else cls()

    def __call__(self, text: str) -> str:
        text = _PARENTHESISED.sub("", _BRACKETED.sub("", text.lower()))
        text = _FILLERS.sub("", text)
        text = re.sub(r"\s+'", "'", text)  # "don 't" -> "don't"
        for pattern, replacement in _REWRITES:
            text = pattern.sub(replacement, text)
        text = re.sub(r"(\d),(\d)", r"\1\2", text)  # 1,000 -> 1000
        text = re.sub(r"\.([^0-9]|$)", r" \1", text)  # periods that are not decimal points
        text = replace_symbols(text, keep=".%$¢€£", strip_diacritics=True)
        text = spell_numbers(text)
        text = " ".join(self.spellings.get(word, word) for word in text.split())
        text = re.sub(r"[.$¢€£]([^0-9])", r" \1", text)  # currency signs and periods not before a number
        text = re.sub(r"([^0-9])%", r"\1 ", text)  # percent signs not after a number
        return _SPACES.sub(" ", text).strip()


__all__ = ["BasicTextNormalizer", "EnglishTextNormalizer", "replace_symbols", "spell_numbers"]
