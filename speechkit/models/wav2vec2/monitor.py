"""What a wav2vec 2.0 pretraining run logs per stage, and the warning when the codebook collapses.

:class:`PretrainingMonitor` adds up each batch's :class:`~speechkit.models.wav2vec2.PretrainingOutput`;
``summarize`` merges the sums of every process once (docs/design.md, contract 3) and returns the stage's
contrastive loss per masked frame, contrastive accuracy, diversity loss, feature penalty, both code
perplexities and the Gumbel temperature. A code perplexity below ``collapse_fraction`` of the codebook size
means the quantizer uses few codes: targets become easy to tell apart from nothing, and the run is unlikely
to recover, so it is logged as a warning.

Example:
    >>> monitor = PretrainingMonitor(groups=2, entries=320)
    >>> # monitor.update(model(wav, lengths)) for each batch, then:
    >>> monitor.summarize()["accuracy"]
    0.0
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

import torch

from speechkit.metrics.gather import all_gather_object

logger = logging.getLogger(__name__)

_SUMMED = ("contrastive", "masked", "correct", "diversity", "feature_penalty", "prob_perplexity",
           "code_perplexity", "batches")


class PretrainingMonitor:
    """Per-stage sums of the pretraining terms (see the module doc).

    Arguments:
        groups, entries: the quantizer's codebooks, for the collapse check.
        collapse_fraction: warn when the code perplexity falls below this fraction of ``groups * entries``.
    """

    def __init__(self, groups: int, entries: int, collapse_fraction: float = 0.1):
        self.codebook_size = groups * entries
        self.collapse_fraction = collapse_fraction
        self.reset()

    def reset(self) -> None:
        self.sums = dict.fromkeys(_SUMMED, 0.0)
        self.temperature: Optional[float] = None

    def snapshot(self) -> dict:
        """The sums so far, for :meth:`summarize`'s ``since``."""
        return dict(self.sums)

    def update(self, out) -> None:
        """Add one batch's :class:`~speechkit.models.wav2vec2.PretrainingOutput`."""
        self.sums["contrastive"] += float(out.contrastive_loss.detach())
        self.sums["masked"] += float(out.count.detach())
        self.sums["correct"] += float(out.correct.detach())
        self.sums["diversity"] += float(out.diversity_loss.detach())
        self.sums["feature_penalty"] += float(out.feature_penalty.detach())
        self.sums["prob_perplexity"] += float(out.prob_perplexity.detach())
        self.sums["code_perplexity"] += float(out.code_perplexity.detach())
        self.sums["batches"] += 1
        self.temperature = out.temperature

    def summarize(self, gather: Callable = all_gather_object, stage: str = "train",
                  since: Optional[dict] = None) -> dict:
        """The stage's figures over every process (a collective when several run); warns on collapse.

        ``since``: an earlier copy of ``sums``; the figures are then those of the batches added after it
        (a training log's interval, without a second monitor).
        """
        own = {name: self.sums[name] - (since or {}).get(name, 0.0) for name in _SUMMED}
        total = dict.fromkeys(_SUMMED, 0.0)
        for sums in gather(own):
            for name in _SUMMED:
                total[name] += sums[name]
        batches = max(total["batches"], 1.0)
        masked = max(total["masked"], 1.0)
        summary = {
            "contrastive": total["contrastive"] / masked,
            "accuracy": total["correct"] / masked,
            "diversity": total["diversity"] / batches,
            "feature_penalty": total["feature_penalty"] / batches,
            "prob_perplexity": total["prob_perplexity"] / batches,
            "code_perplexity": total["code_perplexity"] / batches,
        }
        if self.temperature is not None:
            summary["temperature"] = self.temperature
        floor = self.collapse_fraction * self.codebook_size
        if total["batches"] and summary["code_perplexity"] < floor:
            logger.warning(
                "%s: code perplexity %.1f is below %.0f%% of the %d codes: the quantizer is collapsing onto "
                "few codes (raise diversity_weight, lower the learning rate, or check the input audio)",
                stage, summary["code_perplexity"], 100 * self.collapse_fraction, self.codebook_size)
        return summary


_MASKED_SUMMED = ("prediction", "masked", "correct", "feature_penalty", "batches")


class MaskedPredictionMonitor:
    """Per-stage sums of a HuBERT or BEST-RQ run (:class:`~speechkit.models.wav2vec2.masked_prediction.
    MaskedPredictionOutput`): cross-entropy per masked frame, accuracy, feature penalty, and the perplexity
    of the targets (``exp`` of the entropy of how often each class is a target over the valid frames: the
    number of classes the targets really use; few means little to learn, e.g. a k-means with empty
    clusters or a quantizer fed silent audio, which is logged as a warning below ``collapse_fraction``).

    Example:
        >>> MaskedPredictionMonitor(num_classes=100).summarize()["accuracy"]
        0.0
    """

    def __init__(self, num_classes: int, collapse_fraction: float = 0.1):
        self.num_classes, self.collapse_fraction = num_classes, collapse_fraction
        self.reset()

    def reset(self) -> None:
        self.sums = dict.fromkeys(_MASKED_SUMMED, 0.0)
        self.target_counts = [0] * self.num_classes

    def update(self, out) -> None:
        self.sums["prediction"] += float(out.prediction_loss.detach())
        self.sums["masked"] += float(out.count.detach())
        self.sums["correct"] += float(out.correct.detach())
        self.sums["feature_penalty"] += float(out.feature_penalty.detach())
        self.sums["batches"] += 1
        targets = out.targets[out.targets >= 0].flatten().cpu()
        for index, count in enumerate(torch.bincount(targets, minlength=self.num_classes).tolist()):
            self.target_counts[index] += count

    def summarize(self, gather: Callable = all_gather_object, stage: str = "train",
                  since: Optional[dict] = None) -> dict:
        """The stage's figures over every process (a collective when several run).

        ``since``: an earlier ``{"sums": ..., "target_counts": ...}`` (:meth:`snapshot`); the figures are
        then those of the batches added after it."""
        since = since or {}
        base_sums, base_counts = since.get("sums", {}), since.get("target_counts", [0] * self.num_classes)
        own = ({name: self.sums[name] - base_sums.get(name, 0.0) for name in _MASKED_SUMMED},
               [now - before for now, before in zip(self.target_counts, base_counts)])
        total, counts = dict.fromkeys(_MASKED_SUMMED, 0.0), [0] * self.num_classes
        for sums, histogram in gather(own):
            for name in _MASKED_SUMMED:
                total[name] += sums[name]
            counts = [a + b for a, b in zip(counts, histogram)]
        masked, batches = max(total["masked"], 1.0), max(total["batches"], 1.0)
        frequencies = torch.tensor(counts, dtype=torch.float64)
        frequencies = frequencies / frequencies.sum().clamp(min=1)
        target_perplexity = float(torch.exp(-torch.xlogy(frequencies, frequencies).sum()))
        summary = {"prediction": total["prediction"] / masked, "accuracy": total["correct"] / masked,
                   "feature_penalty": total["feature_penalty"] / batches,
                   "target_perplexity": target_perplexity}
        if total["batches"] and target_perplexity < self.collapse_fraction * self.num_classes:
            logger.warning("%s: the targets use %.1f of %d classes (below %.0f%%): little to predict "
                           "(check the k-means fit or the input audio)", stage, target_perplexity,
                           self.num_classes, 100 * self.collapse_fraction)
        return summary

    def snapshot(self) -> dict:
        """The sums so far, for :meth:`summarize`'s ``since``."""
        return {"sums": dict(self.sums), "target_counts": list(self.target_counts)}
