"""benchmarks/wav2vec2.py runs and prints its table (a tiny model; the figures are not checked)."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "wav2vec2.py"


def test_wav2vec2_benchmark_prints_a_table(capsys):
    pytest.importorskip("transformers")
    module = load_script(SCRIPT, "wav2vec2_benchmark")
    assert module.main(["--tiny", "--configs", "small", "--dtypes", "fp32,bf16", "--batch-seconds", "1",
                        "--utterance-seconds", "0.5", "--steps", "1", "--warmup", "1"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(table) == 4 and table[2].startswith("| small |") and "| bf16 |" in table[3]
