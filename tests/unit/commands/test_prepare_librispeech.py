"""``speechkit prepare-librispeech``: manifests of a LibriSpeech-layout tree from the command line."""
from __future__ import annotations

import json

from speechkit import cli
from tests.unit.data.librispeech_tree import make_librispeech


def test_command_line(tmp_path, capsys):
    root = make_librispeech(tmp_path / "LibriSpeech")
    code = cli.main(["prepare-librispeech", str(root), "--dest", str(tmp_path / "m"), "--splits", "dev-clean",
                     "--placeholder", "data_root", "--workers", "1"])
    assert code == 0
    assert "dev-clean" in capsys.readouterr().out
    assert json.loads((tmp_path / "m" / "dev-clean.json").read_text())["174-50561-0005"]["spk"] == "174"
    assert cli.main(["prepare-librispeech", str(tmp_path / "nowhere"), "--dest", str(tmp_path / "m")]) == 1
    assert "not found" in capsys.readouterr().err
