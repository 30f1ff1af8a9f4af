"""EER and minDCF against scikit-learn's ROC; DER with collar and overlap handling against
pyannote.metrics."""
from __future__ import annotations

import numpy as np
import pytest

from speechkit.errors import DataError
from speechkit.metrics.diarization import diarization_error_rate
from speechkit.metrics.verification import equal_error_rate, min_dcf, verification_summary

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def _trials(seed: int, targets: int = 300, nontargets: int = 3000, separation: float = 2.0,
            ties: bool = False):
    rng = np.random.default_rng(seed)
    scores = np.r_[rng.normal(separation, 1.0, targets), rng.normal(0.0, 1.0, nontargets)]
    if ties:
        scores = np.round(scores, 1)
    return scores, np.r_[np.ones(targets, int), np.zeros(nontargets, int)]


def _reference_eer(scores, labels):
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, scores, drop_intermediate=False)
    fnr = 1 - tpr
    index = np.flatnonzero(fnr - fpr <= 0)[0]
    if fnr[index] == fpr[index]:
        return fpr[index]
    before, after = fnr[index - 1] - fpr[index - 1], fnr[index] - fpr[index]
    return fpr[index - 1] + before / (before - after) * (fpr[index] - fpr[index - 1])


def _reference_min_dcf(scores, labels, p_target):
    fpr, tpr, _ = sklearn_metrics.roc_curve(labels, scores, drop_intermediate=False)
    cost = p_target * (1 - tpr) + (1 - p_target) * fpr
    return cost.min() / min(p_target, 1 - p_target)


@pytest.mark.parametrize("seed,ties", [(0, False), (1, True), (2, False)])
def test_eer_and_min_dcf_match_the_sklearn_roc(seed, ties):
    scores, labels = _trials(seed, separation=1.0 + seed, ties=ties)
    assert equal_error_rate(scores, labels)[0] == pytest.approx(_reference_eer(scores, labels), abs=1e-12)
    for p_target in (0.01, 0.05):
        assert min_dcf(scores, labels, p_target)[0] == pytest.approx(
            _reference_min_dcf(scores, labels, p_target), abs=1e-12)


def test_eer_threshold_splits_the_errors_and_perfect_trials_score_zero():
    scores, labels = _trials(3)
    eer, threshold = equal_error_rate(scores, labels)
    miss = np.mean(scores[labels == 1] < threshold)
    false_alarm = np.mean(scores[labels == 0] >= threshold)
    assert abs(miss - eer) < 0.01 and abs(false_alarm - eer) < 0.01
    assert equal_error_rate([3, 2, 1, 0], [1, 1, 0, 0])[0] == 0.0
    assert min_dcf([3, 2, 1, 0], [1, 1, 0, 0])[0] == 0.0
    summary = verification_summary(scores, labels)
    assert set(summary) == {"eer", "min_dcf@0.01", "min_dcf@0.05", "targets", "nontargets"}


def test_bad_trials_are_refused():
    with pytest.raises(DataError, match="both target and non-target"):
        equal_error_rate([0.1, 0.2], [1, 1])
    with pytest.raises(DataError, match="finite"):
        equal_error_rate([0.1, float("nan")], [1, 0])
    with pytest.raises(DataError, match="3 scores for 2 labels"):
        min_dcf([0.1, 0.2, 0.3], [1, 0])
    with pytest.raises(DataError, match="p_target"):
        min_dcf([0.1, 0.2], [1, 0], p_target=1.5)


def _random_annotation(rng, speakers, duration=60.0, prefix=""):
    """Turns of each speaker with gaps between them (a speaker never overlaps itself, as in RTTM files);
    different speakers overlap at random."""
    segments = []
    for speaker in speakers:
        t = rng.uniform(0, 3)
        while t < duration:
            end = t + rng.uniform(0.3, 6.0)
            segments.append((round(t, 3), round(end, 3), prefix + speaker))
            t = end + rng.uniform(0.2, 8.0)
    return segments


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("collar,skip_overlap", [(0.0, False), (0.25, False), (0.25, True), (0.0, True)])
def test_der_matches_pyannote(seed, collar, skip_overlap):
    core = pytest.importorskip("pyannote.core")
    pyannote_metrics = pytest.importorskip("pyannote.metrics.diarization")
    rng = np.random.default_rng(seed)
    reference = _random_annotation(rng, ["A", "B", "C"])
    hypothesis = _random_annotation(rng, ["1", "2", "3", "4"][: 2 + seed % 3], prefix="s")
    ours = diarization_error_rate(reference, hypothesis, collar=collar, skip_overlap=skip_overlap)

    def annotation(segments):
        result = core.Annotation()
        for index, (start, end, speaker) in enumerate(segments):
            result[core.Segment(start, end), index] = speaker
        return result

    metric = pyannote_metrics.DiarizationErrorRate(collar=2 * collar, skip_overlap=skip_overlap)
    uem = core.Timeline([core.Segment(0, 80)])
    theirs = metric(annotation(reference), annotation(hypothesis), uem=uem, detailed=True)
    assert ours["total"] == pytest.approx(theirs["total"], abs=1e-6)
    assert ours["der"] == pytest.approx(theirs["diarization error rate"], abs=1e-6)
    assert ours["missed"] == pytest.approx(theirs["missed detection"], abs=1e-6)
    assert ours["false_alarm"] == pytest.approx(theirs["false alarm"], abs=1e-6)
    assert ours["confusion"] == pytest.approx(theirs["confusion"], abs=1e-6)


def test_der_by_hand():
    reference = [(0, 4, "A"), (3, 6, "B"), (8, 10, "A")]  # overlap 3-4; 9 s of speaker time
    hypothesis = [(0, 3.5, "x"), (3.5, 7, "y"), (8, 9, "y")]
    result = diarization_error_rate(reference, hypothesis)
    # A->x, B->y. Missed: 3-3.5 (B) + 3.5-4 (A) + 9-10 (A) = 2.0; false alarm 6-7 = 1.0; confusion 8-9 = 1.0
    assert result["mapping"] == {"A": "x", "B": "y"}
    assert (result["missed"], result["false_alarm"], result["confusion"], result["total"]) == \
        pytest.approx((2.0, 1.0, 1.0, 9.0))
    assert result["der"] == pytest.approx(4.0 / 9.0)
    with pytest.raises(DataError, match="reference segment 0"):
        diarization_error_rate([(2.0, 1.0, "A")], hypothesis)
