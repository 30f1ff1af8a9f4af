"""Scoring speaker embeddings: cosine similarity, adaptive score normalisation (AS-norm) with a cohort, and
:class:`VerificationStats`, which gathers a test set's embeddings across processes and reports EER and minDCF
per kind of trial.

AS-norm (Matejka et al., Interspeech 2017, "AS-norm1") normalises a trial score ``s(e, t)`` by the scores of
each side against the ``top_k`` cohort embeddings closest to it: ``0.5 * ((s - mu_e) / sigma_e + (s - mu_t) /
sigma_t)``. It makes one threshold fit voices of different kinds (the cohort tells how similar an
enrolment voice is to *any* voice); the cohort comes from training speakers, never from the test speakers.

Example:
    >>> emb = torch.nn.functional.normalize(torch.randn(6, 8), dim=-1)
    >>> cosine_scores(emb[:2], emb[2:4]).shape
    torch.Size([2])
    >>> as_norm(cosine_scores(emb[:2], emb[2:4]), emb[:2], emb[2:4], emb[4:], top_k=2).shape
    torch.Size([2])
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F

from speechkit.errors import DataError
from speechkit.metrics.gather import gather_by_id
from speechkit.metrics.verification import equal_error_rate, verification_summary


def cosine_scores(enrol: torch.Tensor, test: torch.Tensor) -> torch.Tensor:
    """(trials,) cosine similarity of paired rows of ``enrol`` and ``test`` (trials, dim)."""
    return (F.normalize(enrol.float(), dim=-1) * F.normalize(test.float(), dim=-1)).sum(-1)


def _cohort_statistics(embeddings: torch.Tensor, cohort: torch.Tensor, top_k: int) -> tuple:
    scores = F.normalize(embeddings.float(), dim=-1) @ F.normalize(cohort.float(), dim=-1).T
    best = scores.topk(min(top_k, cohort.shape[0]), dim=-1).values
    return best.mean(-1), best.std(-1, unbiased=best.shape[-1] > 1).clamp(min=1e-6)


def as_norm(scores: torch.Tensor, enrol: torch.Tensor, test: torch.Tensor, cohort: torch.Tensor,
            top_k: int = 100) -> torch.Tensor:
    """Adaptive symmetric normalisation of ``scores`` (trials,) of the pairs ``enrol``/``test`` (trials, dim)
    with the ``cohort`` (size, dim) embeddings."""
    if cohort.dim() != 2 or cohort.shape[0] < 2:
        raise DataError(f"AS-norm needs a cohort of two embeddings or more, got shape {tuple(cohort.shape)}")
    mean_e, std_e = _cohort_statistics(enrol, cohort, top_k)
    mean_t, std_t = _cohort_statistics(test, cohort, top_k)
    return 0.5 * ((scores - mean_e) / std_e + (scores - mean_t) / std_t)


class VerificationStats:
    """Embeddings by utterance id, then trial scores and EER/minDCF per kind of trial.

    ``append`` on every process; ``summarize`` (collective) gathers the embeddings, scores ``trials``
    (:class:`speechkit.data.trials.Trial`) with cosine similarity, AS-norm'ed by ``cohort_ids``' embeddings
    when given, and returns the overall figures plus those of the same-engine and cross-engine non-targets
    (each against all targets).
    """

    def __init__(self, top_k: int = 100):
        self.top_k = top_k
        self.embeddings: dict = {}
        self.scores: list = []

    def append(self, ids: Sequence[str], embeddings: torch.Tensor) -> None:
        rows = embeddings.detach().float().cpu().numpy()
        for utt_id, row in zip(ids, rows):
            self.embeddings[utt_id] = row

    def trial_scores(self, trials: Sequence, cohort_ids: Optional[Sequence[str]] = None) -> np.ndarray:
        """One score per trial (gathered embeddings; cosine, then AS-norm with a cohort)."""
        missing = sorted({u for t in trials for u in (t.enrol, t.test)} - set(self.embeddings))
        if missing:
            raise DataError(f"{len(missing)} trial utterance(s) have no embedding, e.g. {missing[:3]}")
        enrol = torch.from_numpy(np.stack([self.embeddings[t.enrol] for t in trials]))
        test = torch.from_numpy(np.stack([self.embeddings[t.test] for t in trials]))
        scores = cosine_scores(enrol, test)
        if cohort_ids:
            absent = [u for u in cohort_ids if u not in self.embeddings]
            if absent:
                raise DataError(f"{len(absent)} cohort utterance(s) have no embedding, e.g. {absent[:3]}")
            cohort = torch.from_numpy(np.stack([self.embeddings[u] for u in cohort_ids]))
            scores = as_norm(scores, enrol, test, cohort, self.top_k)
        return scores.numpy()

    def summarize(self, trials: Sequence, cohort_ids: Optional[Sequence[str]] = None) -> dict:
        """``{"eer", "min_dcf@0.01", "min_dcf@0.05", "threshold", "same_engine_eer", ...}`` (EER in %)."""
        self.embeddings = gather_by_id({k: v.tolist() for k, v in self.embeddings.items()}, "embedding")
        self.embeddings = {k: np.asarray(v, dtype=np.float32) for k, v in self.embeddings.items()}
        scores = self.trial_scores(trials, cohort_ids)
        labels = np.array([t.label for t in trials])
        kinds = np.array([t.kind for t in trials])
        self.scores = list(zip(trials, scores.tolist()))
        summary = verification_summary(scores, labels)
        summary["threshold"] = equal_error_rate(scores, labels)[1]
        for kind in ("same_engine", "cross_engine"):
            chosen = (labels == 1) | (kinds == kind)
            if (kinds == kind).any():
                part = verification_summary(scores[chosen], labels[chosen])
                summary.update({f"{kind}_{key}": value for key, value in part.items() if key != "targets"})
        return summary

    def write_scores(self, path: str) -> None:
        """``label enrol test kind score`` per line, the scores of the last :meth:`summarize`."""
        with open(path, "w", encoding="utf-8") as handle:
            for trial, score in self.scores:
                handle.write(f"{trial.label} {trial.enrol} {trial.test} {trial.kind} {score:.6f}\n")


def format_summary(summary: dict, description: str = "") -> str:
    """The lines of a verification report: EER (%) and minDCF overall, same-engine and cross-engine."""
    lines = [f"speaker verification: {description}" if description else "speaker verification"]
    for prefix, name in (("", "all trials"), ("same_engine_", "same-engine non-targets"),
                         ("cross_engine_", "cross-engine non-targets")):
        if f"{prefix}eer" not in summary:
            continue
        eer, low, high = (summary[f"{prefix}{key}"] for key in ("eer", "min_dcf@0.01", "min_dcf@0.05"))
        lines.append(f"{name:<26} EER {eer:6.2f}%  minDCF(0.01) {low:.4f}  minDCF(0.05) {high:.4f}"
                     f"  ({summary[f'{prefix}nontargets']} non-targets)")
    lines.append(f"targets: {summary['targets']}; threshold at the EER: {summary['threshold']:.4f}")
    return "\n".join(lines) + "\n"
