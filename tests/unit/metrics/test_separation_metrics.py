"""SI-SNR and BSS-eval SDR against maintained reference implementations, and SeparationStats reports."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from speechkit.metrics import SeparationStats, bss_eval_sdr, si_snr


def _signals(seed: int = 0, time: int = 4000):
    rng = np.random.default_rng(seed)
    reference = rng.standard_normal((2, time))
    estimate = reference + 0.4 * rng.standard_normal((2, time))
    estimate[0] += 0.5 * np.convolve(reference[0], [0.0, 0.3, 0.2], mode="same")  # a filtered copy
    estimate[1] += 0.3 * reference[0]  # interference
    return estimate, reference


def test_sdr_equals_mir_eval_bss_eval_sources():
    separation = pytest.importorskip("mir_eval.separation")
    estimate, reference = _signals()
    with pytest.warns(FutureWarning):  # deprecated in mir_eval 0.8, still the BSS Eval v3 reference
        expected, _, _, _ = separation.bss_eval_sources(reference, estimate, compute_permutation=False)
    ours = bss_eval_sdr(torch.from_numpy(estimate), torch.from_numpy(reference)).numpy()
    np.testing.assert_allclose(ours, expected, atol=1e-6)


def test_sdr_and_si_snr_against_torchmetrics():
    audio = pytest.importorskip("torchmetrics.functional.audio")
    estimate, reference = (torch.from_numpy(a) for a in _signals(1))
    expected = audio.scale_invariant_signal_noise_ratio(estimate, reference)
    torch.testing.assert_close(si_snr(estimate, reference), expected, atol=1e-5, rtol=1e-6)
    expected_sdr = audio.signal_distortion_ratio(estimate, reference, filter_length=512)
    # torchmetrics solves the same projection without padding the error by the filter length: close, not equal
    torch.testing.assert_close(bss_eval_sdr(estimate, reference), expected_sdr.double(), atol=0.05, rtol=0)


def test_filtered_copy_scores_high_sdr_but_not_si_snr():
    reference = torch.randn(1, 4000, dtype=torch.float64)
    filtered = torch.from_numpy(np.convolve(reference[0].numpy(), [1.0, -0.6, 0.3])[:4000]).unsqueeze(0)
    assert float(bss_eval_sdr(filtered, reference)) > 40.0  # only the cut tail is unexplained
    assert float(si_snr(filtered, reference)) < 10.0


def test_stats_report_worst_first(tmp_path):
    torch.manual_seed(0)
    refs = torch.randn(3, 2, 2000)
    noise = torch.tensor([0.05, 1.0, 0.3]).view(3, 1, 1) * torch.randn(3, 2, 2000)
    stats = SeparationStats()
    stats.append(["good", "bad", "mid"], refs + noise, refs.sum(1), refs, torch.tensor([2000, 2000, 1500]))
    summary = stats.summarize()
    assert summary["count"] == 3 and summary["worst_id"] == "bad"
    assert summary["si_snri"] > 0 and summary["sdri"] > 0
    stats.write_stats(str(tmp_path / "report.txt"))
    lines = (tmp_path / "report.txt").read_text().splitlines()
    order = [line.split()[0] for line in lines if line.split() and line.split()[0] in ("good", "bad", "mid")]
    assert order == ["bad", "mid", "good"]
