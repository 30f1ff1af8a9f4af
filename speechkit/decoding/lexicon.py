"""A closed vocabulary for CTC beam search: hypotheses may only spell words of a word list.

Words are token sequences that begin with a *word-start* token (SentencePiece pieces that begin with
``"▁"``). While a hypothesis grows, its last, unfinished word must be the beginning of a known word; when a
new word starts (or the utterance ends), the word just finished must be a known word. Character models
benefit most: they can spell anything, and a near miss (``DOR`` for ``DOOR``) is a word error.

Example:
    >>> lexicon = Lexicon([(4, 5), (4, 6, 7)], word_start=[4])  # words "4 5" and "4 6 7"
    >>> partial = lexicon.extend((), 4)
    >>> lexicon.extend(partial, 6), lexicon.extend(partial, 7)
    ((4, 6), None)
    >>> lexicon.is_complete((4, 5)), lexicon.is_complete((4, 6))
    (True, False)
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Callable, Optional

from speechkit.decoding.word_list import WordList
from speechkit.errors import DataError

WORD_START_MARK = "\u2581"  # SentencePiece's word-boundary mark, "▁"


class Lexicon:
    """Known words as token-id sequences, and the incremental check used during beam search.

    Args:
        words: the token ids of each word; each must begin with a token of ``word_start``.
        word_start: the token ids that begin a word.

    Raises:
        DataError: an empty word list, or a word that does not begin with a word-start token.
    """

    def __init__(self, words: Iterable[Sequence[int]], word_start: Collection[int]):
        self.word_start = frozenset(int(t) for t in word_start)
        self.words = frozenset(tuple(int(t) for t in word) for word in words if len(word))
        if not self.words:
            raise DataError("a lexicon needs at least one word")
        for word in self.words:
            if word[0] not in self.word_start:
                raise DataError(f"lexicon word {list(word)} does not begin with a word-start token")
        self.prefixes = frozenset(word[:end] for word in self.words for end in range(1, len(word) + 1))

    @classmethod
    def from_tokenizer(cls, tokenizer, words: Iterable[str]) -> Lexicon:
        """The lexicon of ``words`` (strings) as ``tokenizer`` (a SentencePiece tokenizer) encodes them.

        Word-start tokens are the pieces that begin with ``"▁"``.
        """
        pieces = (tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size))
        word_start = [i for i, piece in enumerate(pieces) if piece.startswith(WORD_START_MARK)]
        return cls((tokenizer.encode(word) for word in sorted(set(words))), word_start)

    @classmethod
    def from_manifest(cls, manifest: str, tokenizer, replacements: Optional[dict] = None,
                      text_field: str = "text", normalizer: Optional[Callable[[str], str]] = None) -> Lexicon:
        """The words of a manifest's transcripts (``text_field`` split on white space) as ``tokenizer``
        spells them: the closed vocabulary of a training set. ``normalizer`` (the recipe's text normaliser,
        :class:`speechkit.data.text_policy.TextNormalizer`) prepares each transcript first, as it does the
        training targets: words written "Nine," and "nine" are the one word "NINE" the model spells
        (:meth:`speechkit.decoding.WordList.from_manifest`).

        Example:
            >>> from speechkit.data.text_policy import TextNormalizer
            >>> lexicon = Lexicon.from_manifest("data/train.json", tokenizer, {"data_root": "data"},
            ...                                 normalizer=TextNormalizer(case="upper"))
            >>> sorted(tokenizer.decode(list(word)) for word in lexicon.words)
            ['GOOD', 'HELLO', 'MORNING', 'WORLD']
        """
        return cls.from_tokenizer(tokenizer, WordList.from_manifest(manifest, replacements, text_field,
                                                                    normalizer).words)

    def extend(self, partial: tuple[int, ...], token: int) -> Optional[tuple[int, ...]]:
        """The unfinished word after appending ``token`` to a hypothesis whose unfinished word is ``partial``.

        Returns ``None`` when the hypothesis would leave the lexicon: ``token`` starts a word while
        ``partial`` is not a whole word, or the grown word begins no known word.
        """
        if token in self.word_start:
            if not self.is_complete(partial):
                return None
            grown = (token,)
        else:
            grown = partial + (token,)
        return grown if grown in self.prefixes else None

    def is_complete(self, partial: tuple[int, ...]) -> bool:
        """Whether a hypothesis may end with the unfinished word ``partial`` (nothing, or a known word)."""
        return not partial or partial in self.words

    def __len__(self) -> int:
        return len(self.words)
