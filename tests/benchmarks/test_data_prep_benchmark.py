"""benchmarks/data_prep.py runs and prints its tables (tiny model; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "data_prep.py"


@pytest.mark.slow
def test_data_prep_benchmark_prints_its_tables(capsys):
    module = load_script(SCRIPT, "data_prep_benchmark")
    assert module.main(["--tiny", "--quality"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert sum("on the fly" in row for row in rows) == 2 and any("(data convert)" in row for row in rows)
    assert any(row.startswith("| 48 kHz stereo MP3 |") for row in rows)  # the convert table
    assert any(row.startswith("| policy: Kaiser") for row in rows)
    assert "adds" in out and "10% budget" in out
