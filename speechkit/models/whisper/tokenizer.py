"""Whisper's tokenizer: the checkpoint's byte-level BPE (``tokenizer.json``, or ``vocab.json`` +
``merges.txt`` + ``added_tokens.json``) through the ``tokenizers`` library, and its special tokens.

The vocabulary of every published model puts the text tokens first and ``<|endoftext|>`` right after them,
then ``<|startoftranscript|>``, the languages, ``<|translate|>``, ``<|transcribe|>``, ``<|startoflm|>``,
``<|startofprev|>``, ``<|nospeech|>``, ``<|notimestamps|>`` and the timestamps ``<|0.00|>`` to
``<|30.00|>``; text is therefore every id below ``<|endoftext|>``.

Example:
    >>> tokenizer = WhisperTokenizer.from_file("whisper-tiny/tokenizer.json")  # doctest: +SKIP
    >>> tokenizer.decode(tokenizer.encode(" hello world"))                     # doctest: +SKIP
    ' hello world'
"""
from __future__ import annotations

import json
import os
from typing import Optional

from speechkit.errors import CheckpointError

END_OF_TEXT = "<|endoftext|>"


def _tokenizers():
    try:
        import tokenizers
    except ImportError:  # an optional extra
        raise ImportError("Whisper's tokenizer needs the tokenizers package: "
                          "pip install 'speechkit[whisper]'") from None
    return tokenizers


class WhisperTokenizer:
    """Text <-> token ids with a ``tokenizers.Tokenizer``.

    Arguments:
        tokenizer: a ``tokenizers.Tokenizer`` holding Whisper's vocabulary and special tokens.
        where: the file it came from (for error messages).
    """

    def __init__(self, tokenizer, where: str = "tokenizer"):
        self.tokenizer = tokenizer
        self.where = where
        self.end_of_text = tokenizer.token_to_id(END_OF_TEXT)
        if self.end_of_text is None:
            raise CheckpointError(f"{where}: has no {END_OF_TEXT} token")
        self.timestamp_begin = tokenizer.token_to_id("<|0.00|>")

    @classmethod
    def from_file(cls, path) -> WhisperTokenizer:
        """From a ``tokenizer.json``; a file ``tokenizers`` cannot read raises :class:`CheckpointError`."""
        tokenizers = _tokenizers()
        try:
            return cls(tokenizers.Tokenizer.from_file(os.fspath(path)), str(path))
        except Exception as error:  # tokenizers raises plain Exceptions
            if isinstance(error, CheckpointError):
                raise
            raise CheckpointError(f"{path}: not a readable tokenizer.json ({str(error)[:200]})") from None

    @classmethod
    def from_vocab_merges(cls, vocab_path, merges_path, added_tokens_path=None) -> WhisperTokenizer:
        """From ``vocab.json`` + ``merges.txt`` (GPT-2 style byte-level BPE) and ``added_tokens.json``
        (token -> id, the special and timestamp tokens)."""
        tokenizers = _tokenizers()
        try:
            model = tokenizers.models.BPE.from_file(os.fspath(vocab_path), os.fspath(merges_path))
        except Exception as error:
            raise CheckpointError(f"{vocab_path}, {merges_path}: not a readable BPE vocabulary "
                                  f"({str(error)[:200]})") from None
        tokenizer = tokenizers.Tokenizer(model)
        tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tokenizer.decoder = tokenizers.decoders.ByteLevel()
        if added_tokens_path is not None:
            try:
                with open(added_tokens_path, encoding="utf-8") as handle:
                    added = json.load(handle)
            except (OSError, ValueError) as error:
                raise CheckpointError(f"{added_tokens_path}: not a readable JSON object ({error})") from None
            if not isinstance(added, dict) or not all(isinstance(v, int) for v in added.values()):
                raise CheckpointError(f"{added_tokens_path}: must map tokens to integer ids")
            for token, index in sorted(added.items(), key=lambda item: item[1]):
                if tokenizer.token_to_id(token) is not None:
                    continue
                next_free = tokenizer.get_vocab_size(with_added_tokens=True)
                if index != next_free:
                    raise CheckpointError(f"{added_tokens_path}: token {token!r} has id {index}, but the "
                                          f"next free id is {next_free}")
                tokenizer.add_special_tokens([token])
        return cls(tokenizer, str(vocab_path))

    @property
    def vocab_size(self) -> int:
        """Every id the tokenizer knows, special tokens included."""
        return self.tokenizer.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str) -> Optional[int]:
        return self.tokenizer.token_to_id(token)

    def encode(self, text: str) -> list:
        """Text -> ids (no special tokens added)."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids) -> str:
        """The text of ``ids``: special and timestamp tokens (every id from ``<|endoftext|>`` up) dropped."""
        return self.tokenizer.decode([int(i) for i in ids if int(i) < self.end_of_text],
                                     skip_special_tokens=False)

    def decode_ids(self, ids) -> str:  # the name speechkit's interfaces call
        return self.decode(ids)

    def decode_with_timestamps(self, ids, time_precision: float = 0.02) -> str:
        """Text with the timestamps written in, e.g. ``<|0.00|> hello<|1.20|>``."""
        pieces, run = [], []
        for token in (int(i) for i in ids):
            if self.timestamp_begin is not None and token >= self.timestamp_begin:
                pieces.append(self.decode(run))
                run = []
                pieces.append(f"<|{(token - self.timestamp_begin) * time_precision:.2f}|>")
            else:
                run.append(token)
        pieces.append(self.decode(run))
        return "".join(pieces)
