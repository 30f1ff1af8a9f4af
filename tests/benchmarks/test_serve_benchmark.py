"""benchmarks/serve.py runs and prints its table (its figures are not asserted, only that no request
failed)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_serve_benchmark_runs(capsys):
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra")
    benchmark = load_script(REPO / "benchmarks" / "serve.py", name="serve_benchmark")
    results = benchmark.main(["--clients", "1,4", "--requests", "2", "--d-model", "32", "--layers", "1",
                              "--repeats", "1", "--time-limit-s", "60"])
    printed = capsys.readouterr().out
    assert "| batched | 4 |" in printed and "| one-at-a-time | 4 |" in printed
    assert "x the requests/s of one-at-a-time serving" in printed and "the model alone, batch 1:" in printed
    for serving in ("batched", "one-at-a-time"):
        assert all(r["errors"] == 0 and r["answered"] == r["planned"] for r in results[serving].values())


@pytest.mark.slow
def test_serve_stream_benchmark_compares_the_two_recognizers(capsys):
    pytest.importorskip("fastapi", reason="speechkit serve needs the 'serve' extra")
    pytest.importorskip("websockets", reason="the benchmark's client needs 'websockets'")
    benchmark = load_script(REPO / "benchmarks" / "serve_stream.py", name="serve_stream_benchmark")
    results = benchmark.main(["--tiny", "--seconds", "1", "--repeats", "1"])
    printed = capsys.readouterr().out
    for row in ("| greedy | incremental |", "| greedy | redecoding |", "| beam+lm | incremental |",
                "| beam+lm | redecoding |"):
        assert row in printed
    assert results["greedy"]["same_text"] and results["beam+lm"]["same_text"]
