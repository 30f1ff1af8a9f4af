"""``speechkit prepare-librispeech``: manifests of a LibriSpeech-layout tree from the command line."""
from __future__ import annotations

import json

import torch

from speechkit import cli
from speechkit.data import audio

UTTERANCES = {  # split -> speaker -> chapter -> [(utterance number, words, samples)]
    "dev-clean": {"84": {"121123": [(0, "GO DO YOU HEAR", 1600), (1, "BUT IN LESS THAN FIVE MINUTES", 3200)]},
                  "174": {"50561": [(5, "FORGOTTEN TOO", 800)]}},
    "test-clean": {"61": {"70968": [(0, "HE BEGAN A CONFUSED COMPLAINT", 2400)]}},
}


def make_librispeech(root):
    for split, speakers in UTTERANCES.items():
        for speaker, chapters in speakers.items():
            for chapter, utterances in chapters.items():
                folder = root / split / speaker / chapter
                lines = []
                for number, words, samples in utterances:
                    data_id = f"{speaker}-{chapter}-{number:04d}"
                    audio.write(folder / f"{data_id}.flac", torch.zeros(samples), 16000)
                    lines.append(f"{data_id} {words}")
                (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    (root / "README.TXT").write_text("not a split")
    return root


def test_command_line(tmp_path, capsys):
    root = make_librispeech(tmp_path / "LibriSpeech")
    code = cli.main(["prepare-librispeech", str(root), "--dest", str(tmp_path / "m"), "--splits", "dev-clean",
                     "--placeholder", "data_root", "--workers", "1"])
    assert code == 0
    assert "dev-clean" in capsys.readouterr().out
    assert json.loads((tmp_path / "m" / "dev-clean.json").read_text())["174-50561-0005"]["spk"] == "174"
    assert cli.main(["prepare-librispeech", str(tmp_path / "nowhere"), "--dest", str(tmp_path / "m")]) == 1
    assert "not found" in capsys.readouterr().err
