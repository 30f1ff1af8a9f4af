"""Decoding a batch by the name of its search, as recipes choose it in YAML (``decoding: ctc_beam``).

Searches:

- ``greedy``: CTC best path (:func:`~speechkit.decoding.ctc_greedy_decode`).
- ``ctc_beam``: CTC prefix beam search (:func:`~speechkit.decoding.ctc_prefix_beam_search`), with an
  optional LM (shallow fusion), a length bonus and a closed vocabulary (:class:`Lexicon`).
- ``attention``: attention beam search over a decoder, with CTC prefix scores and an optional LM
  (:class:`~speechkit.decoding.AttentionBeamSearch`).

Example:
    >>> import torch
    >>> log_probs = torch.randn(2, 6, 5).log_softmax(-1)
    >>> len(decode("greedy", log_probs, torch.tensor([6, 3]), blank_index=0))
    2
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from speechkit.decoding.beam_search import AttentionBeamSearch
from speechkit.decoding.ctc import ctc_greedy_decode, ctc_prefix_beam_search
from speechkit.errors import HparamsError

SEARCHES = ("greedy", "ctc_beam", "attention")


def decode(
    search: str,
    ctc_log_probs: torch.Tensor,
    lengths: torch.Tensor,
    *,
    blank_index: int,
    bos_index: Optional[int] = None,
    eos_index: Optional[int] = None,
    beam_size: int = 10,
    lm: Optional[torch.nn.Module] = None,
    lm_weight: float = 0.0,
    length_bonus: float = 0.0,
    lexicon: Any = None,
    encoded: Optional[torch.Tensor] = None,
    decoder: Optional[torch.nn.Module] = None,
    ctc_weight: float = 0.4,
    blank_skip_threshold: float = 0.999,
) -> list:
    """Token-id hypotheses (one list per item) of a batch.

    Args:
        search: ``greedy``, ``ctc_beam`` or ``attention``.
        ctc_log_probs: ``[batch, frames, vocab]`` CTC log-probabilities.
        lengths: ``[batch]`` valid frames.
        lm, lm_weight: shallow fusion (both beam searches); no LM when ``lm`` is None or ``lm_weight`` is 0.
        length_bonus, lexicon, blank_skip_threshold: ``ctc_beam`` only.
        encoded, decoder, ctc_weight: ``attention`` only (``encoded``: ``[batch, frames, dim]``).

    Raises:
        HparamsError: an unknown search, or ``attention`` without a decoder.
    """
    lm = lm if lm_weight else None
    if search == "greedy":
        return ctc_greedy_decode(ctc_log_probs, lengths, blank_index)
    if search == "ctc_beam":
        return ctc_prefix_beam_search(
            ctc_log_probs, lengths, beam_size=beam_size, blank_index=blank_index,
            blank_skip_threshold=blank_skip_threshold, lm=lm, lm_weight=lm_weight, bos_index=bos_index,
            eos_index=eos_index, length_bonus=length_bonus, lexicon=lexicon)  # fmt: skip
    if search == "attention":
        if decoder is None or encoded is None:
            raise HparamsError("decoding 'attention' needs a decoder (and the encoder output)")
        beam_search = AttentionBeamSearch(
            decoder, bos_index, eos_index, beam_size=beam_size, ctc_weight=ctc_weight,
            blank_index=blank_index, lm=lm, lm_weight=lm_weight)  # fmt: skip
        return beam_search(encoded, lengths, ctc_log_probs)
    raise HparamsError(f"decoding must be one of {', '.join(SEARCHES)}, got {search!r}")
