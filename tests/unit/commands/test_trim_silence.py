"""``speechkit trim-silence``: the trimmed manifest, and errors naming the file."""
from __future__ import annotations

import json

import numpy as np
import pytest

from speechkit import cli
from speechkit.data import audio
from speechkit.data.manifest import write_json_manifest

RATE = 16000


def tone_with_silence(before: int, speech: int, after: int, seed: int = 0) -> np.ndarray:
    """A 300 Hz tone of ``speech`` samples between quiet hiss (-70 dB under the tone), shape (time,)."""
    rng = np.random.default_rng(seed)
    tone = 0.5 * np.sin(2 * np.pi * 300 * np.arange(speech) / RATE)
    wave = np.concatenate([np.zeros(before), tone, np.zeros(after)])
    return (wave + 1e-4 * rng.standard_normal(len(wave))).astype(np.float32)


@pytest.fixture
def recordings(tmp_path):
    """Three FLAC files with known speech positions, and their manifest with a $data_root placeholder."""
    root = tmp_path / "corpus"
    layout = {"a": (4000, 16000, 8000), "b": (0, 8000, 3200), "c": (7200, 4800, 0)}
    rows = {}
    for name, (before, speech, after) in layout.items():
        audio.write(root / f"{name}.flac", tone_with_silence(before, speech, after), RATE)
        rows[name] = {"wav": f"$data_root/{name}.flac", "duration": (before + speech + after) / RATE,
                      "text": name.upper()}
    path = tmp_path / "train.json"
    write_json_manifest(rows, path)
    return root, path, layout


def test_command_writes_the_trimmed_manifest_and_reports_errors(recordings, tmp_path, capsys):
    root, path, _ = recordings
    out = tmp_path / "out" / "train.json"
    code = cli.main(["trim-silence", str(path), str(out), "--replace", f"data_root={root}", "--margin", "0",
                     "--workers", "1"])
    assert code == 0
    written = json.loads(out.read_text())
    assert written["a"]["wav"]["file"] == "$data_root/a.flac"
    assert "3 items" in capsys.readouterr().out
    before = out.read_text()
    assert cli.main(["trim-silence", str(path), str(out), "--replace", f"data_root={tmp_path}"]) == 1
    assert "id 'a'" in capsys.readouterr().err
    assert out.read_text() == before  # a failed run leaves the earlier output as it was
    assert cli.main(["trim-silence", str(path), str(tmp_path / "x.csv")]) == 1
    with pytest.raises(SystemExit):
        cli.main(["trim-silence", str(path), str(out), "--replace", "data_root"])
    assert "--replace: expected NAME=VALUE, got 'data_root'" in capsys.readouterr().err
