"""Diarization error rate (DER): missed speech, false alarm and speaker confusion over the reference speech.

Segments are ``(start, end, speaker)`` in seconds. The reference and hypothesis speaker labels are matched
one to one so as to maximise their total co-occurring time (the Hungarian algorithm); then, over every stretch
of time, with ``N_ref`` reference and ``N_hyp`` hypothesis speakers active and ``N_correct`` matched pairs
active together, missed speech is ``max(0, N_ref - N_hyp)``, false alarm ``max(0, N_hyp - N_ref)`` and
confusion ``min(N_ref, N_hyp) - N_correct`` (overlapped speech counts once per speaker), each weighted by
the stretch's duration and divided by the total reference speaker time.

``collar`` seconds on *each side* of every reference segment boundary are not scored (NIST md-eval's
``-c``; pyannote.metrics' ``collar`` is the whole width, twice this). ``skip_overlap`` leaves out the time
where the reference has two speakers or more. The mapping is found on the scored time only.

Example:
    >>> reference = [(0.0, 5.0, "A"), (5.0, 10.0, "B")]
    >>> hypothesis = [(0.0, 6.0, "s1"), (6.0, 10.0, "s2")]
    >>> round(diarization_error_rate(reference, hypothesis)["der"], 4)
    0.1
    >>> diarization_error_rate(reference, hypothesis, collar=1.0)["der"]
    0.0
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from speechkit.errors import DataError


def _merged(segments: Sequence[tuple], what: str) -> dict:
    """speaker -> sorted, non-overlapping [start, end) intervals."""
    by_speaker: dict = {}
    for number, segment in enumerate(segments):
        try:
            start, end, speaker = float(segment[0]), float(segment[1]), str(segment[2])
        except (TypeError, ValueError, IndexError):
            raise DataError(f"{what} segment {number}: expected (start, end, speaker), "
                            f"got {segment!r}") from None
        if not (np.isfinite(start) and np.isfinite(end)) or end < start or start < 0:
            raise DataError(f"{what} segment {number}: bad times {start}..{end} for speaker {speaker!r}")
        if end > start:
            by_speaker.setdefault(speaker, []).append((start, end))
    for speaker, intervals in by_speaker.items():
        intervals.sort()
        merged = [list(intervals[0])]
        for start, end in intervals[1:]:
            if start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        by_speaker[speaker] = [tuple(i) for i in merged]
    return by_speaker


def _activity(intervals: dict, mids: np.ndarray) -> np.ndarray:
    """(speakers, pieces) bool: whether each speaker speaks at each piece's midpoint."""
    active = np.zeros((len(intervals), mids.size), dtype=bool)
    for row, spans in enumerate(intervals.values()):
        for start, end in spans:
            active[row] |= (mids >= start) & (mids < end)
    return active


def optimal_assignment(gain: np.ndarray) -> list:
    """Pairs ``(row, column)`` maximising the summed ``gain`` (rows and columns used at most once).

    The Hungarian algorithm (shortest augmenting paths with potentials), O(n^2 m) for n <= m.
    """
    gain = np.asarray(gain, dtype=np.float64)
    transposed = gain.shape[0] > gain.shape[1]
    cost = -(gain.T if transposed else gain)
    rows, cols = cost.shape
    if rows == 0:
        return []
    u, v = np.zeros(rows + 1), np.zeros(cols + 1)
    match = np.zeros(cols + 1, dtype=np.int64)  # column -> row (1-based; 0: free)
    for row in range(1, rows + 1):
        match[0], column = row, 0
        best = np.full(cols + 1, np.inf)
        previous = np.zeros(cols + 1, dtype=np.int64)
        used = np.zeros(cols + 1, dtype=bool)
        while True:
            used[column] = True
            current = match[column]
            reduced = cost[current - 1] - u[current] - v[1:]
            free = ~used[1:]
            better = free & (reduced < best[1:])
            best[1:][better] = reduced[better]
            previous[1:][better] = column
            candidates = np.where(free, best[1:], np.inf)
            nxt = int(np.argmin(candidates)) + 1
            delta = candidates[nxt - 1]
            u[match[used]] += delta
            v[used] -= delta
            best[1:][free] -= delta
            column = nxt
            if match[column] == 0:
                break
        while column:
            match[column] = match[previous[column]]
            column = previous[column]
    pairs = [(int(match[c]) - 1, c - 1) for c in range(1, cols + 1) if match[c]]
    return sorted((c, r) if transposed else (r, c) for r, c in pairs)


def diarization_error_rate(reference: Sequence[tuple], hypothesis: Sequence[tuple], collar: float = 0.0,
                           skip_overlap: bool = False) -> dict:
    """DER and its parts (seconds) of one recording.

    Returns:
        ``{"der", "missed", "false_alarm", "confusion", "total", "mapping"}``: ``der`` is a fraction (0.1 is
        10%), the others seconds; ``mapping`` maps reference speakers to hypothesis speakers.
    """
    if collar < 0:
        raise DataError(f"collar must be >= 0 seconds, got {collar}")
    ref, hyp = _merged(reference, "reference"), _merged(hypothesis, "hypothesis")
    edges = {0.0}
    for spans in list(ref.values()) + list(hyp.values()):
        for start, end in spans:
            edges.update((start, end))
    boundaries = sorted({t for spans in ref.values() for span in spans for t in span})
    if collar > 0:
        for t in boundaries:
            edges.update((max(0.0, t - collar), t + collar))
    cuts = np.array(sorted(edges))
    if cuts.size < 2:
        return {"der": 0.0, "missed": 0.0, "false_alarm": 0.0, "confusion": 0.0, "total": 0.0, "mapping": {}}
    mids, widths = (cuts[:-1] + cuts[1:]) / 2, np.diff(cuts)
    ref_active, hyp_active = _activity(ref, mids), _activity(hyp, mids)
    scored = np.ones(mids.size, dtype=bool)
    if collar > 0 and boundaries:
        near = np.abs(mids[:, None] - np.array(boundaries)[None, :]) < collar
        scored &= ~near.any(axis=1)
    if skip_overlap:
        scored &= ref_active.sum(axis=0) < 2
    weights = widths * scored
    together = (ref_active[:, None, :] & hyp_active[None, :, :]).astype(np.float64) @ weights
    pairs = [(r, h) for r, h in optimal_assignment(together) if together[r, h] > 0]
    n_ref, n_hyp = ref_active.sum(axis=0), hyp_active.sum(axis=0)
    n_correct = np.zeros(mids.size)
    for r, h in pairs:
        n_correct += ref_active[r] & hyp_active[h]
    missed = float((np.maximum(0, n_ref - n_hyp) * weights).sum())
    false_alarm = float((np.maximum(0, n_hyp - n_ref) * weights).sum())
    confusion = float(((np.minimum(n_ref, n_hyp) - n_correct) * weights).sum())
    total = float((n_ref * weights).sum())
    errors = missed + false_alarm + confusion
    der = errors / total if total > 0 else (0.0 if errors == 0 else float("inf"))
    names_ref, names_hyp = list(ref), list(hyp)
    return {"der": der, "missed": missed, "false_alarm": false_alarm, "confusion": confusion, "total": total,
            "mapping": {names_ref[r]: names_hyp[h] for r, h in pairs}}
