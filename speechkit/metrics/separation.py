"""Separation scores per mixture: SI-SNR, SI-SNRi, SDR and SDRi, gathered across processes by mixture id.

SI-SNRi is the estimate's SI-SNR minus the unprocessed mixture's, averaged over the sources; SDRi the same
with the BSS-eval SDR (:func:`speechkit.metrics.bss_eval.bss_eval_sdr`). Estimates must already be matched to
the references (apply the permutation of the PIT loss). ``summarize`` is a collective under DDP: every
process's mixtures are merged by id, so the averages equal those of one process over the whole set.

Example:
    >>> stats = SeparationStats(sdr=False)
    >>> refs = torch.randn(1, 2, 4000)
    >>> stats.append(["m1"], refs + 0.1 * torch.randn(1, 2, 4000), refs.sum(1), refs, torch.tensor([4000]))
    >>> round(stats.summarize()["si_snri"]) > 10
    True
"""
from __future__ import annotations

import math
import os
from typing import Optional

import torch

from speechkit.errors import DataError
from speechkit.metrics.bss_eval import bss_eval_sdr
from speechkit.metrics.gather import gather_by_id
from speechkit.metrics.si_snr import si_snr

FIELDS = ("si_snr", "si_snri", "sdr", "sdri")


class SeparationStats:
    """Per-mixture scores; ``sdr=False`` skips the (slower) BSS-eval SDR."""

    def __init__(self, sdr: bool = True, filter_length: int = 512):
        self.sdr, self.filter_length = sdr, filter_length
        self.clear()

    def clear(self) -> None:
        self.scores: dict = {}
        self.summary: dict = {}

    def append(self, ids, estimates: torch.Tensor, mixture: torch.Tensor, targets: torch.Tensor,
               lengths: torch.Tensor) -> None:
        """Score a batch.

        Args:
            ids: one id per mixture.
            estimates, targets: (batch, sources, time), estimates matched to targets.
            mixture: (batch, time).
            lengths: (batch,) valid samples.
        """
        ids = list(ids)
        if estimates.shape != targets.shape or len(ids) != estimates.shape[0]:
            raise DataError(f"{len(ids)} ids for estimates {tuple(estimates.shape)} and targets "
                            f"{tuple(targets.shape)} (first id: {ids[0] if ids else None!r})")
        estimates, targets = estimates.detach().float().cpu(), targets.detach().float().cpu()
        mixture, lengths = mixture.detach().float().cpu(), lengths.detach().cpu()
        for b, utt_id in enumerate(ids):
            n = int(lengths[b])
            est, ref = estimates[b, :, :n], targets[b, :, :n]
            mix = mixture[b, :n].expand_as(ref)
            scores = {"si_snr": si_snr(est, ref).mean().item()}
            scores["si_snri"] = scores["si_snr"] - si_snr(mix, ref).mean().item()
            if self.sdr:
                sdr = bss_eval_sdr(est, ref, self.filter_length).mean().item()
                scores["sdr"] = sdr
                scores["sdri"] = sdr - bss_eval_sdr(mix, ref, self.filter_length).mean().item()
            self.scores[utt_id] = scores

    def summarize(self, field: Optional[str] = None):
        """Averages over every process's mixtures (collective), plus ``count`` and the worst mixture."""
        merged = gather_by_id(self.scores, "separation score")
        self.merged = merged
        summary: dict = {"count": len(merged)}
        for name in FIELDS:
            values = [s[name] for s in merged.values() if name in s]
            if values:
                summary[name] = sum(values) / len(values)
        if merged:
            summary["worst_id"] = min(merged, key=lambda k: merged[k]["si_snri"])
        else:
            summary.update({name: math.nan for name in ("si_snr", "si_snri")})
        self.summary = summary
        return dict(summary) if field is None else summary[field]

    def write_stats(self, path: str) -> None:
        """A report: the averages, then one line per mixture, worst SI-SNRi first. Call after summarize."""
        merged = getattr(self, "merged", None) or gather_by_id(self.scores, "separation score")
        names = [n for n in FIELDS if any(n in s for s in merged.values())]
        lines = [f"mixtures: {len(merged)}"]
        lines += [f"{n}: {self.summary.get(n, math.nan):.2f} dB" for n in names]
        lines += ["", "per mixture, worst SI-SNRi first:", "id " + " ".join(names)]
        for utt_id in sorted(merged, key=lambda k: (merged[k]["si_snri"], k)):
            lines.append(f"{utt_id} " + " ".join(f"{merged[utt_id][n]:.2f}" for n in names))
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
