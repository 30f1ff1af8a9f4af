"""Evaluation metrics: WER/CER (``ErrorRateStats``), per-item ``MetricStats``, SI-SNR, BSS-eval SDR and
``SeparationStats``, speaker verification (EER, minDCF) and diarization error rate (DER); the stats classes
gather per-item
results across processes by id, so a distributed evaluation reports exactly what one process would.

Example:
    >>> from speechkit.metrics import ErrorRateStats
    >>> wer = ErrorRateStats()
    >>> wer.append(["u1"], ["HELLO THERE"], ["HELLO WORLD"])
    >>> wer.summarize("WER")
    50.0
"""
from speechkit.metrics.bss_eval import bss_eval_sdr
from speechkit.metrics.diarization import diarization_error_rate
from speechkit.metrics.error_rate import (
    ErrorRateStats,
    TranscriptErrorRates,
    align,
    summarize_scores,
    worst_first,
)
from speechkit.metrics.separation import SeparationStats
from speechkit.metrics.si_snr import si_snr, si_snr_improvement
from speechkit.metrics.stats import MetricStats, RunningAverage
from speechkit.metrics.verification import equal_error_rate, min_dcf, verification_summary

__all__ = ["ErrorRateStats", "TranscriptErrorRates", "align", "summarize_scores", "worst_first", "si_snr",
           "si_snr_improvement", "MetricStats", "RunningAverage", "SeparationStats", "bss_eval_sdr",
           "diarization_error_rate", "equal_error_rate", "min_dcf", "verification_summary"]
