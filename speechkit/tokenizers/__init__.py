"""Tokenizers: a SentencePiece wrapper (train from a manifest, encode/decode, save/load).

Example:
    >>> from speechkit.tokenizers import SentencePieceTokenizer
    >>> tokenizer = SentencePieceTokenizer.train("data/train.json", "tok/", vocab_size=30, model_type="bpe")
    >>> tokenizer.decode(tokenizer.encode("HELLO WORLD"))
    'HELLO WORLD'
"""
from __future__ import annotations

from speechkit.lazy_exports import lazy_exports

_LAZY = {
    "SentencePieceTokenizer": "speechkit.tokenizers.sentencepiece_tokenizer",
    "token_sequences": "speechkit.tokenizers.items",
    "hypothesis_texts": "speechkit.tokenizers.items",
    "prepare_text_targets": "speechkit.tokenizers.text_targets",
    "prepare_token_targets": "speechkit.tokenizers.text_targets",
}

__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = sorted(_LAZY)
