"""``speechkit data import``: a corpus layout to manifests from the command line."""
from __future__ import annotations

from speechkit.cli import main as speechkit_main
from tests.unit.data.importers import layouts


def test_command_line(tmp_path, capsys):
    source = layouts.librispeech(tmp_path / "LibriSpeech")
    dest = tmp_path / "out"
    assert speechkit_main(["data", "import", "librispeech", str(source), "--dest", str(dest),
                           "--no-progress"]) == 0
    assert "train: 4 utterances" in capsys.readouterr().out
    assert speechkit_main(["data", "import", "kaldi", str(source), "--dest", str(dest)]) == 1
    assert "no wav.scp" in capsys.readouterr().err
