"""CTC decoding: greedy (best path) and prefix beam search, with absolute frame lengths.

Each item is decoded from its own valid frames only, so results never depend on batch composition.

Example:
    >>> probs = [[0.1, 0.8, 0.1], [0.1, 0.8, 0.1], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]
    >>> log_probs = torch.tensor([probs]).log()
    >>> ctc_greedy_decode(log_probs, torch.tensor([4]))
    [[1, 2]]
    >>> ctc_prefix_beam_search(log_probs, torch.tensor([4]), beam_size=4)
    [[1, 2]]
"""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch

from speechkit.nn.masks import check_lengths, length_mask


def ctc_greedy_decode(
    log_probs: torch.Tensor, lengths: torch.Tensor, blank_index: int = 0
) -> list[list[int]]:
    """Best-path decoding: argmax per frame, merge repeats, drop blanks.

    Args:
        log_probs: ``(batch, frames, vocab)`` (log-)probabilities (any monotonic score works).
        lengths: ``(batch,)`` valid frames per item.
        blank_index: the blank id.

    Returns:
        One list of token ids per item.
    """
    batch, frames, _ = log_probs.shape
    check_lengths(lengths, frames, batch, "CTC decoding lengths")
    best = log_probs.argmax(dim=-1)
    previous = torch.nn.functional.pad(best[:, :-1], (1, 0), value=blank_index)
    keep = (best != blank_index) & (best != previous) & length_mask(lengths, frames)
    best, keep = best.cpu(), keep.cpu()
    return [best[i][keep[i]].tolist() for i in range(batch)]


def _logaddexp(a: float, b: float) -> float:
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


def _prefix_beam_search_one(
    frames: np.ndarray, beam_size: int, blank_index: int, token_beam: int, blank_skip: Optional[float]
) -> list[tuple[tuple[int, ...], float]]:
    """Prefix beam search over one utterance's ``(frames, vocab)`` log-probs: (prefix, logp), best first."""
    neg_inf = -math.inf
    # prefix -> (log P(prefix, path ends in blank), log P(prefix, path ends in a label))
    beam: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, neg_inf)}
    for frame in frames:
        blank_logp = float(frame[blank_index])
        if blank_skip is not None and blank_logp > blank_skip:
            # A near-certain blank only merges the two path endings of each prefix.
            beam = {p: (_logaddexp(b, nb) + blank_logp, neg_inf) for p, (b, nb) in beam.items()}
            continue
        candidates = np.argpartition(-frame, min(token_beam, frame.shape[0] - 1))[:token_beam]
        next_beam: dict[tuple[int, ...], list[float]] = {}

        def add(prefix, blank_part, label_part, _next=next_beam):
            entry = _next.setdefault(prefix, [neg_inf, neg_inf])
            entry[0] = _logaddexp(entry[0], blank_part)
            entry[1] = _logaddexp(entry[1], label_part)

        for prefix, (p_blank, p_label) in beam.items():
            total = _logaddexp(p_blank, p_label)
            add(prefix, total + blank_logp, neg_inf)
            last = prefix[-1] if prefix else None
            for token in candidates:
                token = int(token)
                if token == blank_index:
                    continue
                token_logp = float(frame[token])
                if token == last:
                    # Repeating the label without a blank in between stays on the same prefix...
                    add(prefix, neg_inf, p_label + token_logp)
                    # ...while a blank in between starts a new occurrence.
                    add(prefix + (token,), neg_inf, p_blank + token_logp)
                else:
                    add(prefix + (token,), neg_inf, total + token_logp)
        scored = sorted(next_beam.items(), key=lambda item: (-_logaddexp(item[1][0], item[1][1]), item[0]))[
            :beam_size
        ]
        # Impossible prefixes (e.g. a repeat with no frame left for the blank between) leave the beam.
        beam = {prefix: (b, nb) for prefix, (b, nb) in scored if max(b, nb) > neg_inf}
        beam = beam or {(): (neg_inf, neg_inf)}
    results = [(prefix, _logaddexp(b, nb)) for prefix, (b, nb) in beam.items()]
    return sorted(results, key=lambda item: (-item[1], item[0]))


def ctc_prefix_beam_search(
    log_probs: torch.Tensor,
    lengths: torch.Tensor,
    beam_size: int = 10,
    blank_index: int = 0,
    token_beam: Optional[int] = None,
    blank_skip_threshold: Optional[float] = None,
    return_nbest: bool = False,
):
    """CTC prefix beam search: keeps the ``beam_size`` prefixes with the highest total path probability.

    Args:
        log_probs: ``(batch, frames, vocab)`` log-probabilities.
        lengths: ``(batch,)`` valid frames per item.
        beam_size: prefixes kept after each frame.
        blank_index: the blank id.
        token_beam: labels tried per frame (the most likely ones; default ``beam_size``, plus the blank).
        blank_skip_threshold: frames whose blank probability exceeds this (e.g. 0.999) only merge paths,
            which is faster and nearly exact; ``None`` disables it.
        return_nbest: return, per item, ``(tokens, log_prob)`` best first.

    Returns:
        ``list[list[int]]`` (best hypothesis per item) or, with ``return_nbest``,
        ``list[list[(list[int], float)]]``.
    """
    batch, frames, _ = log_probs.shape
    check_lengths(lengths, frames, batch, "CTC decoding lengths")
    token_beam = token_beam or beam_size
    threshold = None if blank_skip_threshold is None else math.log(blank_skip_threshold)
    array = log_probs.detach().float().cpu().numpy()
    outputs = []
    for i, length in enumerate(lengths.tolist()):
        nbest = _prefix_beam_search_one(
            array[i, :length], beam_size, blank_index, token_beam + 1, threshold
        )
        outputs.append([(list(p), s) for p, s in nbest] if return_nbest else list(nbest[0][0]))
    return outputs
