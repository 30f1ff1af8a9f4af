"""benchmarks/infer_padding.py runs and prints its table (its figures are not asserted)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_infer_padding_benchmark_runs(capsys):
    benchmark = load_script(REPO / "benchmarks" / "infer_padding.py", name="infer_padding_benchmark")
    results = benchmark.main(["--items", "2", "--repeats", "1", "--tasks", "separate"])
    printed = capsys.readouterr().out
    assert "| separate | alone |" in printed and "| separate | padded |" in printed
    assert set(results) == {"separate"} and results["separate"]["difference"] < 1e-3
