"""SentencePiece tokenizer: train from a manifest's transcripts, encode/decode ids and pieces, save/load.

Example:
    >>> tokenizer = SentencePieceTokenizer.train("data/train.json", "tokenizer/", vocab_size=14,
    ...                                          model_type="unigram", text_field="text")
    >>> ids = tokenizer.encode("HELLO WORLD")
    >>> tokenizer.decode(ids)
    'HELLO WORLD'
    >>> same = SentencePieceTokenizer.load("tokenizer/14_unigram.model")

Ids: ``unk`` is 0 and ``bos``/``eos``/``pad`` are off unless asked for (``bos_id=1, eos_id=2``). For CTC,
offset the ids by one to make room for a blank at 0, or pass ``blank_symbol`` to reserve a piece.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Optional, Union

import sentencepiece

from speechkit import distributed
from speechkit.data.text_policy import apply_unknown_policy, check_policy, count_characters_outside
from speechkit.errors import DataError, ManifestError

MODEL_TYPES = ("unigram", "bpe", "char", "word")


class SentencePieceTokenizer:
    """A trained SentencePiece model.

    Arguments:
        model_path: a ``.model`` file written by :meth:`train` (or any SentencePiece model).
    """

    def __init__(self, model_path: Union[str, os.PathLike]):
        self.model_path = os.fspath(model_path)
        if not os.path.isfile(self.model_path):
            raise DataError(f"SentencePiece model not found: {self.model_path}")
        self._processor = sentencepiece.SentencePieceProcessor()
        try:
            self._processor.Load(self.model_path)
        except (OSError, RuntimeError) as error:
            raise DataError(f"cannot load SentencePiece model {self.model_path}: {error}") from None

    @classmethod
    def load(cls, model_path: Union[str, os.PathLike]) -> SentencePieceTokenizer:
        return cls(model_path)

    @classmethod
    def load_or_train(cls, model_path: Union[str, os.PathLike], source: Union[str, os.PathLike], *,
                      vocab_size: int, **train_options: Any) -> SentencePieceTokenizer:
        """Load ``model_path``; if it does not exist, train it on ``source`` first (on the main process only,
        the others wait) and save it there. The training files go to ``<model_path's folder>/build``.

        Raises:
            DataError: the model has more pieces than ``vocab_size`` (an output layer sized ``vocab_size``
                could not emit them all), besides the errors of :meth:`train`.

        Example:
            >>> tokenizer = SentencePieceTokenizer.load_or_train(
            ...     "results/tokenizer.model", "data/train.json", vocab_size=20, model_type="bpe")
            >>> tokenizer.vocab_size
            20
        """
        path = Path(model_path)
        if not path.is_file():
            def train_and_save() -> None:
                cls.train(source, path.parent / "build", vocab_size=vocab_size, **train_options).save(path)

            distributed.run_on_main(train_and_save)
        tokenizer = cls.load(path)
        if tokenizer.vocab_size > vocab_size:
            raise DataError(f"{path} has {tokenizer.vocab_size} pieces but vocab_size is {vocab_size}")
        return tokenizer

    # -- training -----------------------------------------------------------------------------------------

    @classmethod
    def train(cls, source: Union[str, os.PathLike, Iterable[str]], output_dir: Union[str, os.PathLike], *,
              vocab_size: int, model_type: str = "unigram", text_field: str = "text",
              model_name: Optional[str] = None, character_coverage: float = 1.0,
              user_defined_symbols: Sequence[str] = (), bos_id: int = -1, eos_id: int = -1, unk_id: int = 0,
              pad_id: int = -1, max_sentence_length: int = 100000, num_threads: int = 1,
              replacements: Optional[dict] = None, normalizer=None, unknown_characters: str = "refuse",
              **trainer_options: Any) -> SentencePieceTokenizer:
        """Train on the ``text_field`` of a manifest (JSON/CSV path) or on an iterable of strings.

        The texts are normalised first (``normalizer``, e.g. the recipe's
        :class:`~speechkit.data.text_policy.TextNormalizer`). A character vocabulary (``model_type="char"``)
        is sized from the data: one piece per distinct character, plus the word boundary and the special
        pieces, never more than ``vocab_size``. When ``vocab_size`` is too small for every character, the
        rarest ones would become unknown: ``unknown_characters`` decides (``"refuse"``: a ``DataError``
        naming them, their counts, example ids and the ``vocab_size`` that fits them all; ``"unknown"``,
        ``"drop_utterance"``, ``"drop_character"``: see :mod:`speechkit.data.text_policy`). The returned
        tokenizer's ``training_coverage`` reports the characters of the training text it cannot spell.

        Arguments:
            output_dir: receives ``<model_name>.model``, ``.vocab`` and the training text.
            vocab_size: pieces in the vocabulary (with ``model_type="char"``, at least the distinct
                characters plus the special pieces).
            model_type: ``"unigram"``, ``"bpe"``, ``"char"`` or ``"word"``.
            model_name: file name stem (default ``"<vocab_size>_<model_type>"``).
            trainer_options: further ``SentencePieceTrainer`` options, passed as they are.

        Raises:
            ManifestError: the manifest has a row without ``text_field`` (names the id).
            DataError: a bad model type, no text, a vocabulary too large for the text, or (policy
                ``"refuse"``) characters a character vocabulary of ``vocab_size`` pieces cannot hold.
        """
        if model_type not in MODEL_TYPES:
            raise DataError(f"model_type must be one of {MODEL_TYPES}, got {model_type!r}")
        if not isinstance(vocab_size, int) or vocab_size < 2:
            raise DataError(f"vocab_size must be an integer >= 2, got {vocab_size!r}")
        check_policy(unknown_characters)
        pairs = _id_texts_from(source, text_field, replacements)
        if normalizer is not None:
            pairs = [(data_id, normalizer(text)) for data_id, text in pairs]
        pairs = [(data_id, text) for data_id, text in pairs if text.strip()]
        if not pairs:
            raise DataError(f"no text to train a tokenizer on in {_describe(source)}")
        if model_type == "char":
            special = sum(1 for index in (bos_id, eos_id, unk_id, pad_id) if index >= 0)
            pairs, vocab_size = _size_character_vocabulary(
                pairs, vocab_size, special + len(user_defined_symbols), unknown_characters, _describe(source))
        texts = [text for _, text in pairs if text.strip()]
        output_dir = os.fspath(output_dir)
        os.makedirs(output_dir, exist_ok=True)
        model_name = model_name or f"{vocab_size}_{model_type}"
        prefix = os.path.join(output_dir, model_name)
        text_path = prefix + ".train.txt"
        with open(text_path, "w", encoding="utf-8") as handle:
            for text in texts:
                handle.write(text.replace("\n", " ") + "\n")
        options = dict(input=text_path, model_prefix=prefix, vocab_size=vocab_size, model_type=model_type,
                       character_coverage=character_coverage, bos_id=bos_id, eos_id=eos_id, unk_id=unk_id,
                       pad_id=pad_id, max_sentence_length=max_sentence_length, num_threads=num_threads,
                       minloglevel=2, **trainer_options)
        if user_defined_symbols:
            options["user_defined_symbols"] = list(user_defined_symbols)
        try:
            sentencepiece.SentencePieceTrainer.Train(**options)
        except RuntimeError as error:
            hint = ""
            if "Vocabulary size" in str(error) or "vocab_size" in str(error):
                hint = (" (the text is too small for this vocab_size: lower it, or pass "
                        "hard_vocab_limit=False)")
            raise DataError(f"training the SentencePiece model {prefix}.model failed: {error}{hint}"
                            ) from None
        tokenizer = cls(prefix + ".model")
        tokenizer.training_coverage = count_characters_outside(pairs, tokenizer.alphabet(),
                                                               name=_describe(source))
        return tokenizer

    # -- vocabulary ---------------------------------------------------------------------------------------

    @property
    def vocab_size(self) -> int:
        return int(self._processor.GetPieceSize())

    def __len__(self) -> int:
        return self.vocab_size

    @property
    def unk_id(self) -> int:
        return int(self._processor.unk_id())

    @property
    def bos_id(self) -> int:
        """-1 when the model has no bos piece."""
        return int(self._processor.bos_id())

    @property
    def eos_id(self) -> int:
        return int(self._processor.eos_id())

    @property
    def pad_id(self) -> int:
        return int(self._processor.pad_id())

    def alphabet(self) -> set:
        """The characters this model spells without its unknown piece (those of its ordinary pieces; the
        word boundary ``"▁"`` stands for whitespace, which is always spelled).

        Example:
            >>> sorted(tokenizer.alphabet())[:3]
            ['D', 'E', 'G']
        """
        characters: set = set()
        for index in range(self.vocab_size):
            if self._processor.IsUnknown(index) or self._processor.IsControl(index):
                continue
            characters.update(self._processor.IdToPiece(index).replace("\u2581", ""))
        return characters

    def id_to_piece(self, index: int) -> str:
        self._check_id(index)
        return self._processor.IdToPiece(int(index))

    def piece_to_id(self, piece: str) -> int:
        return int(self._processor.PieceToId(piece))

    def _check_id(self, index: int) -> None:
        if not 0 <= int(index) < self.vocab_size:
            raise DataError(f"token id {index} is outside the vocabulary of {self.vocab_size} "
                            f"({self.model_path})")

    # -- encoding -----------------------------------------------------------------------------------------

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list:
        """Token ids of ``text``."""
        ids = list(self._processor.EncodeAsIds(text))
        if add_bos:
            ids = [self._required("bos", self.bos_id)] + ids
        if add_eos:
            ids = ids + [self._required("eos", self.eos_id)]
        return ids

    def encode_as_pieces(self, text: str) -> list:
        """The pieces of ``text`` (``"▁"`` marks a word start)."""
        return list(self._processor.EncodeAsPieces(text))

    def decode(self, ids: Iterable[int]) -> str:
        """Text of token ids (bos/eos/pad ids are dropped)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        ids = [int(index) for index in ids]
        for index in ids:
            self._check_id(index)
        return self._processor.DecodeIds(ids)

    def decode_pieces(self, pieces: Sequence[str]) -> str:
        return self._processor.DecodePieces(list(pieces))

    def _required(self, name: str, index: int) -> int:
        if index < 0:
            raise DataError(f"{self.model_path} has no {name} piece (train with {name}_id=...)")
        return index

    # -- files --------------------------------------------------------------------------------------------

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Copy the model file to ``path`` (and its ``.vocab`` next to it, when there is one)."""
        path = os.fspath(path)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        if os.path.abspath(path) != os.path.abspath(self.model_path):
            shutil.copyfile(self.model_path, path)
        vocab = os.path.splitext(self.model_path)[0] + ".vocab"
        target_vocab = os.path.splitext(path)[0] + ".vocab"
        if os.path.isfile(vocab) and os.path.abspath(vocab) != os.path.abspath(target_vocab):
            shutil.copyfile(vocab, target_vocab)

    # DataLoader workers receive a pickled copy: send the model's bytes, not the native processor.
    def __getstate__(self) -> dict:
        return {"model_path": self.model_path, "proto": self._processor.serialized_model_proto()}

    def __setstate__(self, state: dict) -> None:
        self.model_path = state["model_path"]
        self._processor = sentencepiece.SentencePieceProcessor()
        self._processor.LoadFromSerializedProto(state["proto"])

    def __repr__(self) -> str:
        return f"SentencePieceTokenizer({self.model_path!r}, vocab_size={self.vocab_size})"


def _size_character_vocabulary(pairs: list, vocab_size: int, special: int, policy: str, name: str) -> tuple:
    """``(pairs, vocab_size)`` for a character model: the text after the unknown-character policy and the
    pieces it needs (its characters, the word boundary and ``special`` pieces, at most ``vocab_size``)."""
    counts: dict = {}
    for _, text in pairs:
        for char in text:
            if not char.isspace():
                counts[char] = counts.get(char, 0) + 1
    room = vocab_size - special - 1  # one piece is the word boundary
    if room < 1:
        raise DataError(f"vocab_size {vocab_size} leaves no room for characters next to {special} special "
                        "pieces and the word boundary")
    by_frequency = sorted(counts, key=lambda char: (-counts[char], char))
    alphabet = set(by_frequency[:room])
    if len(counts) > room:
        try:
            pairs, _ = apply_unknown_policy(pairs, alphabet, policy, name=name)
        except DataError as error:
            fits_all = len(counts) + special + 1
            raise DataError(f"{error}\nA character vocabulary of vocab_size {vocab_size} holds {room} "
                            f"characters; this text has {len(counts)}: vocab_size {fits_all} holds them all"
                            ) from None
        if policy != "unknown":  # the kept text may hold fewer characters (whole utterances dropped)
            counts = {char for _, text in pairs for char in text if not char.isspace()}
    return pairs, min(vocab_size, min(len(counts), room) + special + 1)


def _id_texts_from(source: Union[str, os.PathLike, Iterable[str]], text_field: str,
                   replacements: Optional[dict]) -> list:
    """``(id, text)`` pairs of a manifest (its ids) or of an iterable of strings (``line N`` ids)."""
    if not isinstance(source, (str, os.PathLike)):
        return [(f"line {number}", str(text)) for number, text in enumerate(source, 1)]
    from speechkit.data.fairseq_manifest import is_fairseq_manifest
    from speechkit.data.manifest import load_manifest

    if os.fspath(source).endswith(".tsv") and is_fairseq_manifest(source):
        rows = load_manifest(source, check_files=False)  # labels from its .wrd/.ltr files
    else:  # only the text is read: audio paths may keep their placeholders ($data_root)
        rows = load_manifest(source, replacements, check_files=False, require_duration=False,
                             file_fields=())
    pairs = []
    for data_id, row in rows.items():
        if text_field not in row:
            raise ManifestError(f"{os.fspath(source)}: id {data_id!r} has no field {text_field!r} to "
                                "train the tokenizer on")
        if not isinstance(row[text_field], str):
            raise ManifestError(f"{os.fspath(source)}: id {data_id!r}: field {text_field!r} must be "
                                f"text, got {row[text_field]!r}")
        pairs.append((data_id, row[text_field]))
    return pairs


def _describe(source: Any) -> str:
    return os.fspath(source) if isinstance(source, (str, os.PathLike)) else "the given texts"
