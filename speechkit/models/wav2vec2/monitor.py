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
