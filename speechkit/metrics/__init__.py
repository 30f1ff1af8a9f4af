"""Evaluation metrics: WER/CER (``ErrorRateStats``), per-item ``MetricStats``, SI-SNR, BSS-eval SDR and
``SeparationStats``; all gather per-item
results across processes by id, so a distributed evaluation reports exactly what one process would.

Example:
    >>> from speechkit.metrics import ErrorRateStats
    >>> wer = ErrorRateStats()
    >>> wer.append(["u1"], ["HELLO THERE"], ["HELLO WORLD"])
    >>> wer.summarize("WER")
    50.0
"""
from speechkit.metrics.bss_eval import bss_eval_sdr
from speechkit.metrics.error_rate import ErrorRateStats, align, summarize_scores, worst_first
from speechkit.metrics.separation import SeparationStats
from speechkit.metrics.si_snr import si_snr, si_snr_improvement
from speechkit.metrics.stats import MetricStats, RunningAverage

__all__ = ["ErrorRateStats", "align", "summarize_scores", "worst_first", "si_snr", "si_snr_improvement",
           "MetricStats", "RunningAverage", "SeparationStats", "bss_eval_sdr"]
