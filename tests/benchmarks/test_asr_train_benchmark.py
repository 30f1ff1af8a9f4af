"""benchmarks/asr_train.py runs and prints its table on CPU (tiny sizes; the figures are not checked), also
with the step traced whole by torch.compile (fullgraph: a graph break fails), as the GPU runs use it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "asr_train.py"
TINY = ["--device", "cpu", "--d-models", "16", "--layers", "1", "--heads", "2", "--kernel-size", "3",
        "--vocab-size", "8", "--batch-seconds", "4", "--bounds", "1", "2", "--steps", "2", "--warmup", "1"]


def load_benchmark():
    return load_script(SCRIPT, "asr_train_benchmark")


@pytest.mark.parametrize("compile_options", [[], ["--compile", "--compile-backend", "eager"]])
def test_asr_train_benchmark_prints_a_row_per_configuration(capsys, compile_options):
    benchmark = load_benchmark()
    assert benchmark.main(TINY + compile_options) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 3 and "fp32" in rows[1] and "bf16" in rows[2]


def test_buckets_give_a_small_fixed_set_of_aligned_shapes():
    benchmark = load_benchmark()
    batches = benchmark.make_batches(12, 8.0, [4.0, 8.0], vocab_size=8, seed=0, pin=False)
    shapes = {tuple(batch.features.shape) for batch in batches}
    assert len(shapes) <= 2
    for _, frames, _ in shapes:
        assert (frames - 3) % 4 == 0 and ((frames - 3) // 4) % 8 == 0  # encoder frames a multiple of 8
    for batch in batches:
        assert batch.lengths.max() <= batch.features.shape[1]
