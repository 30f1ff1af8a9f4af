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
    rows = [[cell.strip() for cell in line.split("|")[1:-1]] for line in table[2:]]
    assert [(row[0], row[3]) for row in rows] == [
        (objective, dtype) for objective in ("wav2vec2", "hubert", "hubert+targets", "wavlm", "bestrq")
        for dtype in ("fp32", "bf16")]
    for row in rows:  # a transformers peer (and a ratio) exactly where it has the model
        has_peer = row[0] in ("wav2vec2", "hubert", "wavlm")
        assert (row[5] != "-") == has_peer and float(row[4]) > 0, row
        if has_peer:
            assert float(row[6]) > 0
