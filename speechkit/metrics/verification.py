"""Speaker verification metrics: equal error rate (EER) and the minimum normalized detection cost (minDCF).

Both read a list of trial scores (higher: more likely the same speaker) and labels (1: target trial, same
speaker; 0: non-target). The ROC is swept over every distinct score; the EER is where the miss and
false-alarm rates cross on the piecewise-linear ROC, and minDCF is the NIST SRE cost
``C_miss * P_miss * p_target + C_fa * P_fa * (1 - p_target)`` minimised over thresholds, divided by the cost
of the best system that looks at no score (``min(C_miss * p_target, C_fa * (1 - p_target))``).

Example:
    >>> scores = [0.9, 0.8, 0.3, 0.7, 0.2, 0.1]
    >>> labels = [1, 1, 1, 0, 0, 0]
    >>> round(equal_error_rate(scores, labels)[0], 4)
    0.3333
    >>> round(min_dcf(scores, labels, p_target=0.01)[0], 4)
    0.3333
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from speechkit.errors import DataError


def _checked(scores: Sequence[float], labels: Sequence[int]) -> tuple:
    scores = np.asarray(scores, dtype=np.float64).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    if scores.shape != labels.shape:
        raise DataError(f"{scores.size} scores for {labels.size} labels")
    if not np.all(np.isfinite(scores)):
        raise DataError(f"trial scores must be finite; {int((~np.isfinite(scores)).sum())} are not")
    if not np.all((labels == 0) | (labels == 1)):
        raise DataError("trial labels must be 1 (same speaker) or 0 (different speakers)")
    labels = labels.astype(bool)
    if labels.all() or not labels.any():
        raise DataError("verification metrics need both target and non-target trials "
                        f"(got {int(labels.sum())} target, {int((~labels).sum())} non-target)")
    return scores, labels


def error_rates(scores: Sequence[float], labels: Sequence[int]) -> tuple:
    """The ROC as ``(p_fa, p_miss, thresholds)``: accepting scores ``>= thresholds[i]`` gives false-alarm rate
    ``p_fa[i]`` and miss rate ``p_miss[i]``; the first point accepts nothing (threshold +inf)."""
    scores, labels = _checked(scores, labels)
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    last_of_value = np.r_[np.flatnonzero(np.diff(scores)), scores.size - 1]  # ties are accepted together
    hits = np.cumsum(labels)[last_of_value]
    false_alarms = np.cumsum(~labels)[last_of_value]
    p_fa = np.r_[0.0, false_alarms / (~labels).sum()]
    p_miss = np.r_[1.0, 1.0 - hits / labels.sum()]
    return p_fa, p_miss, np.r_[np.inf, scores[last_of_value]]


def equal_error_rate(scores: Sequence[float], labels: Sequence[int]) -> tuple:
    """``(eer, threshold)``: the rate where misses equal false alarms (a fraction in [0, 1]), interpolated
    linearly between the two ROC points around the crossing, and the score threshold there."""
    p_fa, p_miss, thresholds = error_rates(scores, labels)
    difference = p_miss - p_fa  # decreases from 1 to -1 along the ROC
    index = int(np.flatnonzero(difference <= 0)[0])
    if difference[index] == 0 or index == 0:
        return float(p_fa[index]), float(thresholds[index])
    before, after = difference[index - 1], difference[index]
    weight = before / (before - after)
    eer = p_fa[index - 1] + weight * (p_fa[index] - p_fa[index - 1])
    low = thresholds[index - 1] if np.isfinite(thresholds[index - 1]) else thresholds[index]
    return float(eer), float(low + weight * (thresholds[index] - low))


def min_dcf(scores: Sequence[float], labels: Sequence[int], p_target: float = 0.01, c_miss: float = 1.0,
            c_fa: float = 1.0) -> tuple:
    """``(min_dcf, threshold)``: the normalized detection cost at the best threshold (0 is perfect, 1 is no
    better than always accepting or always rejecting)."""
    if not 0.0 < p_target < 1.0 or c_miss <= 0 or c_fa <= 0:
        raise DataError(f"need 0 < p_target < 1 and positive costs, got p_target={p_target}, "
                        f"c_miss={c_miss}, c_fa={c_fa}")
    p_fa, p_miss, thresholds = error_rates(scores, labels)
    cost = c_miss * p_target * p_miss + c_fa * (1.0 - p_target) * p_fa
    index = int(np.argmin(cost))
    return float(cost[index] / min(c_miss * p_target, c_fa * (1.0 - p_target))), float(thresholds[index])


def verification_summary(scores: Sequence[float], labels: Sequence[int],
                         p_targets: Sequence[float] = (0.01, 0.05)) -> dict:
    """``{"eer": percent, "min_dcf@0.01": ..., "min_dcf@0.05": ..., "targets": n, "nontargets": n}``."""
    summary = {"eer": 100.0 * equal_error_rate(scores, labels)[0]}
    for p_target in p_targets:
        summary[f"min_dcf@{p_target:g}"] = min_dcf(scores, labels, p_target)[0]
    labels = np.asarray(labels)
    summary["targets"], summary["nontargets"] = int((labels == 1).sum()), int((labels == 0).sum())
    return summary
