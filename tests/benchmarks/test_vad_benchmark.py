"""benchmarks/vad.py runs and prints its table (a tiny corpus and 2 training steps; the figures are not
checked)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.helpers.scripts import load_script

SCRIPT = Path(__file__).parents[2] / "benchmarks" / "vad.py"


def write_corpus(root: Path) -> Path:
    """train.json and test.json of a few harmonic "utterances" by three speakers each, as a corpus has."""
    rng = np.random.default_rng(0)
    for split, speakers in (("train", ("anna", "ben", "carl")), ("test", ("dora", "emil", "finn"))):
        rows = {}
        for index in range(6):
            speaker = speakers[index % 3]
            t = np.arange(int(rng.uniform(0.6, 1.2) * 16000)) / 16000
            pitch = 120 + 40 * (index % 3)
            wave = np.zeros(len(t) + 3200, dtype=np.float32)
            wave[1600:1600 + len(t)] = 0.2 * sum(np.sin(2 * math.pi * k * pitch * t) / k for k in range(1, 8))
            path = root / split / f"{speaker}-{index}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            soundfile.write(path, wave, 16000)
            rows[f"{speaker}-{index}"] = {"wav": f"$data_root/{split}/{path.name}", "spk": speaker,
                                          "duration": len(wave) / 16000}
        (root / f"{split}.json").write_text(json.dumps(rows))
    return root


@pytest.mark.slow  # trains for 2 steps and scores 7 conditions (about 10 s)
def test_vad_benchmark_prints_a_table(tmp_path, capsys):
    module = load_script(SCRIPT, "vad_benchmark")
    corpus = write_corpus(tmp_path / "corpus")
    module.main([str(corpus), "--work", str(tmp_path / "work"), "--train-count", "2", "--test-count", "1",
                 "--steps", "2"])
    rows = [line.split("|")[1:3] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [(noise.strip(), snr.strip()) for noise, snr in rows[1:]] == [
        ("none", "-"), ("white", "20"), ("white", "10"), ("pink", "10"), ("pink", "5"), ("brown", "10"),
        ("brown", "5")]
