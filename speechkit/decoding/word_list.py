"""The words a closed-vocabulary search may spell, as a file a model folder can carry.

A recognizer trained on a closed domain (digits, commands, the built-in corpus's grammar) reads better when
its beam search may only spell the words it was trained on (:class:`~speechkit.decoding.lexicon.Lexicon`).
``train.py`` of the speech recognition template writes its training transcripts' words to ``vocabulary.txt``
(one word per line, UTF-8); a model folder that names that file as its ``vocabulary`` decodes with it
(:class:`speechkit.pretrained.EncoderASR`). The file comes from outside like every file of a model folder,
so its size and lines are checked before anything is built from it.

Example:
    >>> words = WordList(["NINE", "FIVE", "NINE"])
    >>> words.words
    ('FIVE', 'NINE')
    >>> words.save("vocabulary.txt"); WordList.load("vocabulary.txt").words  # doctest: +SKIP
    ('FIVE', 'NINE')
"""
from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Callable, Optional, Union

from speechkit.atomic_files import atomic_write
from speechkit.errors import DataError

#: the largest word list read: 64 MiB is several million words, far more than any search can use
MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_WORD_CHARACTERS = 256


class WordList:
    """A sorted set of words: non-empty strings without white space.

    Args:
        words: the words, in any order, repeats allowed.

    Raises:
        DataError: no words, or a word that is empty, holds white space or is longer than 256 characters.
    """

    def __init__(self, words: Iterable[str]):
        unique = set()
        for word in words:
            _check_word(word, "word list")
            unique.add(word)
        if not unique:
            raise DataError("a word list needs at least one word")
        self.words = tuple(sorted(unique))

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> WordList:
        """Read a word list: one word per line, UTF-8; blank lines are skipped.

        Raises:
            DataError: a file over 64 MiB, not UTF-8, with no word, or a line holding more than one word; the
                error names the file and the line.
        """
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise DataError(f"{path}: a word list of {size} bytes is larger than the {MAX_FILE_BYTES} "
                            "allowed")
        with open(path, "rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise DataError(f"{path}: a word list must be UTF-8 text ({error})") from None
        words = []
        for number, line in enumerate(text.splitlines(), start=1):
            word = line.strip()
            if word:
                _check_word(word, f"{path}, line {number}")
                words.append(word)
        if not words:
            raise DataError(f"{path}: the word list holds no word")
        return cls(words)

    @classmethod
    def from_manifest(cls, manifest: str, replacements: Optional[dict] = None, text_field: str = "text",
                      normalizer: Optional[Callable[[str], str]] = None) -> WordList:
        """The words of a manifest's transcripts (``text_field`` split on white space), each transcript
        prepared by ``normalizer`` first (the recipe's text normaliser, as for the training targets)."""
        from speechkit.data.manifest import load_manifest

        rows = load_manifest(manifest, replacements, check_files=False).values()
        texts = (str(row[text_field]) for row in rows)
        if normalizer is not None:
            texts = (normalizer(text) for text in texts)
        return cls(word for text in texts for word in text.split())

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Write the words, one per line (UTF-8), replacing ``path`` atomically."""
        with atomic_write(path) as handle:
            handle.write("".join(f"{word}\n" for word in self.words))

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        return f"WordList({len(self.words)} words)"


def _check_word(word, where: str) -> None:
    if not isinstance(word, str) or not word:
        raise DataError(f"{where}: a word must be a non-empty string, got {word!r}")
    if len(word) > MAX_WORD_CHARACTERS:
        raise DataError(f"{where}: a word of {len(word)} characters is longer than the "
                        f"{MAX_WORD_CHARACTERS} allowed")
    if len(word.split()) != 1 or word != word.strip():
        raise DataError(f"{where}: one word per line, without white space, got {word!r}")
