"""``speechkit trim-silence``: the trimmed manifest, and errors naming the file."""
from __future__ import annotations

import json

import pytest

from speechkit import cli
from tests.unit.data import trim_files

recordings = trim_files.recordings  # a shared fixture: pytest finds it under this name


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
