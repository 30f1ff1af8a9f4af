"""benchmarks/speaker.py runs and prints its table (tiny sizes; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "speaker.py"


def test_speaker_benchmark_prints_a_table(capsys):
    pytest.importorskip("onnxruntime")
    module = load_script(SCRIPT, "speaker_benchmark")
    assert module.main(["--preset", "tiny", "--seconds", "0.5", "--batch", "2", "--conversation-seconds", "6",
                        "--repeats", "1"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| torch")
            or line.startswith("| onnx")]
    assert [row.split("|")[1].strip() for row in rows] == ["torch", "onnx"]
