"""Exact CTC labeling probabilities of tiny posteriors, by enumerating every path (the reference the
searches are checked against)."""
from __future__ import annotations

import itertools
import math

import torch


def collapse(path, blank=0):
    out, previous = [], None
    for token in path:
        if token != previous and token != blank:
            out.append(token)
        previous = token
    return tuple(out)


def brute_force_labelings(log_probs):
    """log P(labeling) for every labeling of a tiny ``(frames, vocab)`` posterior, by enumerating paths."""
    frames, vocab = log_probs.shape
    totals = {}
    for path in itertools.product(range(vocab), repeat=frames):
        logp = sum(log_probs[t, s].item() for t, s in enumerate(path))
        label = collapse(path)
        totals[label] = torch.logaddexp(
            torch.tensor(totals.get(label, -math.inf)), torch.tensor(logp)
        ).item()
    return totals
