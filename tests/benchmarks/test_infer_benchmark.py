"""benchmarks/infer.py runs and prints its tables (its figures are not asserted)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_infer_benchmark_runs(capsys):
    benchmark = load_script(REPO / "benchmarks" / "infer.py", name="infer_benchmark")
    results = benchmark.main(["--items", "6", "--repeats", "1", "--workers", "0", "--d-model", "32",
                              "--layers", "1"])
    printed = capsys.readouterr().out
    assert "| transcribe |" in printed and "| encode |" in printed
    assert set(results["overhead"]) == {"transcribe", "encode"} and results["workers"] == {}
