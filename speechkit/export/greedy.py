"""CTC greedy decoding in numpy: what a deployment without PyTorch needs after the exported recognizer.

Example:
    >>> import numpy as np
    >>> scores = np.log(np.array([[[.1, .9, 0], [.1, .9, 0], [.8, .1, .1], [.1, .1, .8]]]) + 1e-9)
    >>> ctc_greedy_numpy(scores, np.array([4]))
    [[1, 2]]
"""
from __future__ import annotations

import numpy as np


def ctc_greedy_numpy(log_probs: np.ndarray, lengths: np.ndarray, blank: int = 0) -> list:
    """Best path per item: argmax per frame, repeats merged, blanks dropped.

    Args:
        log_probs: (batch, frames, vocabulary) scores (the recognizer graph's ``log_probs``).
        lengths: (batch,) valid frames (its ``frame_lengths``).
        blank: the blank token's id.

    Returns:
        One list of token ids per item.
    """
    best = np.asarray(log_probs).argmax(axis=-1)
    out = []
    for row, length in zip(best, np.asarray(lengths)):
        path = row[:int(length)]
        keep = np.ones(len(path), dtype=bool)
        keep[1:] = path[1:] != path[:-1]
        out.append([int(t) for t in path[keep] if t != blank])
    return out
