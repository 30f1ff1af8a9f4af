"""benchmarks/data_import_check.py runs and prints a row per layout (tiny sizes; the figures are not
checked)."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "data_import_check.py"


def test_data_import_check_benchmark_prints_a_row_per_layout(capsys):
    module = load_script(SCRIPT, "data_import_check_benchmark")
    assert module.main(["--clips", "4", "--seconds", "0.5"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 4 and rows[2].startswith("| commonvoice (mp3) | 4 |")
    assert rows[3].startswith("| librispeech (flac) | 4 |")
