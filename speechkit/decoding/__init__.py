"""Decoding: CTC greedy and prefix beam search, attention beam search with CTC and LM scoring.

Example:
    >>> import torch
    >>> from speechkit.decoding import ctc_greedy_decode
    >>> len(ctc_greedy_decode(torch.randn(2, 6, 5).log_softmax(-1), torch.tensor([6, 3])))
    2
"""

from speechkit.decoding.beam_search import AttentionBeamSearch
from speechkit.decoding.ctc import (
    CTCPrefixBeamSearch,
    CTCPrefixBeamStream,
    PrefixLanguageModelScores,
    ctc_greedy_decode,
    ctc_prefix_beam_search,
)
from speechkit.decoding.ctc_prefix_score import CTCPrefixScorer, CTCPrefixState
from speechkit.decoding.lexicon import Lexicon
from speechkit.decoding.search import SEARCHES, decode
from speechkit.decoding.word_list import WordList

__all__ = [
    "AttentionBeamSearch",
    "CTCPrefixBeamSearch",
    "CTCPrefixBeamStream",
    "CTCPrefixScorer",
    "CTCPrefixState",
    "Lexicon",
    "SEARCHES",
    "PrefixLanguageModelScores",
    "WordList",
    "ctc_greedy_decode",
    "ctc_prefix_beam_search",
    "decode",
]
