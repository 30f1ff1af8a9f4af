"""benchmarks/augment.py runs and prints a row per augmentation (tiny sizes; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "augment.py"


def test_augment_benchmark_prints_a_row_per_augmentation(capsys):
    pytest.importorskip("pyroomacoustics")
    module = load_script(SCRIPT, "augment_benchmark")
    assert module.main(["--utterances", "3", "--batch-seconds", "4", "--steps", "1", "--rooms", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + 21 and rows[-2].startswith("| the template's set (SpeedPerturb 1, Equalizer")
    assert rows[-1].startswith("| the template's set and reverb (") and "Reverb 0.3)" in rows[-1]
