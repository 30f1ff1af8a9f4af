"""Overlapped speech: where two people talk at once, and which second speaker those frames get.

A clustering diarizer gives every frame one speaker, so overlapped speech is a miss for the other talker.
:class:`OverlapDetector` finds overlapped segments with a :class:`~speechkit.diarization.trained_vad.FrameVAD`
trained with ``target="overlap"`` (:func:`~speechkit.diarization.trained_vad.train_frame_vad` on
conversations whose turns name their speakers). :func:`second_speakers` then gives each overlapped frame the
speaker who talks nearest to it in time other than its own: in conversation, overlap happens where one
turn ends and the next begins, so the other voice of an overlap is the previous or the next speaker
(the heuristic of overlap-aware re-segmentation). The :class:`~speechkit.diarization.pipeline.Diarizer`
applies both when given ``overlap=``; the DER with and without it: docs/speaker.md.

Example:
    >>> import numpy as np
    >>> labels = np.array([0, 0, 0, 1, 1, 1])                  # one speaker per frame, from clustering
    >>> overlapped = np.array([False, False, True, True, False, False])
    >>> second_speakers(labels, overlapped).tolist()           # -1: no second speaker
    [-1, -1, 1, 0, -1, -1]
"""
from __future__ import annotations

import numpy as np

from speechkit.diarization.trained_vad import TrainedVAD, overlap_frames
from speechkit.diarization.vad import HOP, smoothed_segments


class OverlapDetector(TrainedVAD):
    """Overlapped-speech segments ``[(start, end), ...]`` of a waveform from a
    :class:`~speechkit.diarization.trained_vad.FrameVAD` trained with ``target="overlap"``: frames whose
    probability passes ``threshold``, runs shorter than ``min_speech`` dropped and gaps shorter than
    ``min_silence`` bridged (overlaps are short: the defaults are a tenth of a second)."""

    def __init__(self, model, threshold: float = 0.5, min_speech: float = 0.1, min_silence: float = 0.1,
                 padding: float = 0.0):
        super().__init__(model, threshold, min_speech=min_speech, min_silence=min_silence, padding=padding)


def overlap_segments(turns, duration: float) -> list:
    """The overlapped segments ``[(start, end), ...]`` of reference ``turns`` ``(start, end, speaker)`` in a
    recording of ``duration`` seconds, at the detector's 10 ms resolution: what a perfect
    :class:`OverlapDetector` would find (the upper bound of overlap-aware re-segmentation)."""
    return smoothed_segments(overlap_frames(turns, int(duration / HOP)), duration, min_speech=0.0,
                             min_silence=0.0, padding=0.0)


def second_speakers(labels: np.ndarray, overlapped: np.ndarray) -> np.ndarray:
    """(frames,) int: for each overlapped frame, the label nearest to it in frame order that differs from
    its own (the previous or the next other speaker, whichever is closer; -1 where there is none), -1 on the
    other frames. ``labels`` (frames,) int holds the speaker of each speech frame in time order."""
    labels = np.asarray(labels)
    second = np.full(labels.shape[0], -1, dtype=np.int64)
    if labels.size == 0:
        return second
    starts = np.flatnonzero(np.r_[True, labels[1:] != labels[:-1]])
    ends = np.r_[starts[1:], labels.shape[0]]  # runs of one label: [starts[r], ends[r])
    for run, (first, last) in enumerate(zip(starts, ends)):
        frames = np.arange(first, last)[np.asarray(overlapped[first:last], dtype=bool)]
        if frames.size == 0:
            continue
        before = labels[first - 1] if run > 0 else -1
        after = labels[last] if last < labels.shape[0] else -1
        if before < 0 and after < 0:
            continue
        closer_before = (frames - (first - 1)) <= (last - frames)
        if before < 0:
            closer_before[:] = False
        elif after < 0:
            closer_before[:] = True
        second[frames] = np.where(closer_before, before, after)
    return second
