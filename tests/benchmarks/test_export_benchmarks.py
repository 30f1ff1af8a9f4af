"""benchmarks/export.py, benchmarks/streaming.py and benchmarks/quantize.py run and print their tables (tiny
models or a few training steps; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

pytest.importorskip("onnxruntime")
BENCHMARKS = Path(__file__).parents[2] / "benchmarks"


def _rows(out: str) -> list:
    return [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| ---")]


def test_export_benchmark_prints_a_row_per_backend(capsys):
    benchmark = load_script(BENCHMARKS / "export.py", "export_benchmark")
    assert benchmark.main(["--tiny", "--models", "recognizer", "separator", "--batches", "1", "--threads",
                           "1", "--seconds", "0.5", "--repeats", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("machine: ") and "medians of 3 interleaved rounds" in out
    assert "intra_op_num_threads=N" in out and "graph optimisation level ORT_ENABLE_ALL" in out
    rows = _rows(out)[1:]
    assert [row.split(" | ")[2] for row in rows] == ["eager", "torchscript", "onnxruntime",
                                                     "onnxruntime-int8"] * 2
    assert "int8 graph" in out and "signal-to-error against PyTorch" in out
    spreads = [row.split(" | ")[6].split("-") for row in rows]
    assert all(float(low) <= 1.0 <= float(high) for low, high in spreads)
    assert all(row.split(" | ")[7] == "1.00x" for row in rows[::4])  # eager against itself


def test_streaming_benchmark_prints_a_row_per_decoding_rate_and_chunk_size(capsys):
    benchmark = load_script(BENCHMARKS / "streaming.py", "streaming_benchmark")
    assert benchmark.main(["--tiny", "--seconds", "1", "--chunks-ms", "160", "640"]) == 0
    rows = _rows(capsys.readouterr().out)[1:]
    cells = [[cell.strip() for cell in row.strip("|").split("|")][:3] for row in rows]
    assert cells == [[decoding, rate, chunk] for decoding in ("greedy", "beam+lm", "beam+lm rerun")
                     for rate in ("16000", "48000") for chunk in ("160", "640")]


@pytest.mark.slow
def test_quantize_benchmark_prints_a_row_per_model_and_backend(capsys):
    benchmark = load_script(BENCHMARKS / "quantize.py", "quantize_benchmark")
    assert benchmark.main(["--steps", "2", "--test-items", "4"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)[1:]
    assert [row.split(" | ")[1] for row in rows] == ["PyTorch", "onnxruntime float32", "onnxruntime int8"] * 2
    assert all(row.split(" | ")[3] == "+0.00 |" for row in rows[::3])  # PyTorch against itself
    assert "int8 graph checked" in out
