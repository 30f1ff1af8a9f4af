"""benchmarks/recurrent_encoder.py runs and prints its table (tiny sizes; the figures are not checked)."""

from __future__ import annotations

from pathlib import Path

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "recurrent_encoder.py"


def test_recurrent_encoder_benchmark_prints_a_table(capsys):
    module = load_script(SCRIPT, "recurrent_encoder_benchmark")
    assert module.main(["--hidden", "8", "--layers", "1", "--d-model", "8", "--batch-seconds", "2",
                        "--steps", "2", "--warmup", "1"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(table) == 4 and "packed" in table[3] and table[3].rstrip().endswith("1.00 |")
