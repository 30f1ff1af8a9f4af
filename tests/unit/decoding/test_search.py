"""decode(search, ...): each name gives exactly what the search function gives; bad names are refused."""
from __future__ import annotations

import pytest
import torch

from speechkit.decoding import AttentionBeamSearch, ctc_greedy_decode, ctc_prefix_beam_search, decode
from speechkit.errors import HparamsError


def test_each_search_name_matches_its_function():
    generator = torch.Generator().manual_seed(0)
    log_probs = torch.randn(2, 7, 6, generator=generator).log_softmax(-1)
    lengths = torch.tensor([7, 4])
    assert decode("greedy", log_probs, lengths, blank_index=0) == ctc_greedy_decode(log_probs, lengths, 0)
    expected = ctc_prefix_beam_search(log_probs, lengths, beam_size=3, blank_index=0,
                                      blank_skip_threshold=0.999, length_bonus=0.5)
    assert decode("ctc_beam", log_probs, lengths, blank_index=0, beam_size=3, length_bonus=0.5) == expected


def test_unknown_search_and_attention_without_decoder():
    log_probs, lengths = torch.zeros(1, 3, 4).log_softmax(-1), torch.tensor([3])
    with pytest.raises(HparamsError, match="decoding must be one of greedy, ctc_beam, attention, got 'beam'"):
        decode("beam", log_probs, lengths, blank_index=0)
    with pytest.raises(HparamsError, match="needs a decoder"):
        decode("attention", log_probs, lengths, blank_index=0)
    assert AttentionBeamSearch  # the class decode("attention") builds
