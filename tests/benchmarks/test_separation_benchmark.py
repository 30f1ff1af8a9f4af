"""benchmarks/separation.py runs and prints its table (tiny sizes; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "separation.py"


def test_separation_benchmark_prints_a_table(capsys):
    module = load_script(SCRIPT, "separation_benchmark")
    assert module.main(["--presets", "tiny", "--batch", "1", "--seconds", "0.2", "--steps", "1",
                        "--dtypes", "fp32"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| tiny")]
    assert [row.split("|")[3].strip() for row in rows[:2]] == ["speechkit", "conv1d"]
    assert len(rows) == 3 and any("torchaudio" in row for row in rows)
