"""benchmarks/diarization.py runs on tone conversations with a tiny random speaker model, prints its six rows
and reuses the detector it trained (tiny sizes; the figures are not checked)."""
from __future__ import annotations

import json
from pathlib import Path

from speechkit.corpus.conversations import write_conversations
from tests.helpers import job_models
from tests.helpers.scripts import load_script
from tests.unit.diarization.tone_speakers import write_tone_rows

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "diarization.py"


def test_diarization_benchmark_prints_six_rows_and_reuses_its_detector(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rows = write_tone_rows(corpus)
    (corpus / "train.json").write_text(json.dumps(rows))
    write_conversations(rows, str(corpus / "conversations"), count=2, seed=3)
    model = job_models.write_speaker_model(tmp_path / "model")
    module = load_script(SCRIPT, "diarization_benchmark")
    args = [str(corpus), "--model", str(model), "--work", str(tmp_path / "work"), "--train-count", "3",
            "--steps", "5"]
    module.main(args)
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("| ") and "DER" not in line]
    assert len(table) == 6 and all(line.count("|") == 8 and " of 2 |" in line for line in table)
    assert "5 steps in" in out and (tmp_path / "work" / "overlap-3-5.safetensors").exists()
    module.main(args)
    assert "loaded from" in capsys.readouterr().out
