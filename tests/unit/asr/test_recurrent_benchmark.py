"""benchmarks/recurrent_encoder.py runs and prints its table (tiny sizes; the figures are not checked)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).parents[3] / "benchmarks" / "recurrent_encoder.py"


def test_recurrent_encoder_benchmark_prints_a_table(capsys):
    spec = importlib.util.spec_from_file_location("recurrent_encoder_benchmark", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--hidden", "8", "--layers", "1", "--d-model", "8", "--batch-seconds", "2",
                        "--steps", "2", "--warmup", "1"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(table) == 4 and "packed" in table[3] and table[3].rstrip().endswith("1.00 |")
