"""``speechkit verify``: the decision at the model's threshold or ``--threshold``, a missing file named."""
from __future__ import annotations

from speechkit.cli import main as speechkit_main
from tests.unit.pretrained import speaker_files

# Shared fixtures: pytest finds them under these names.
folder, audio = speaker_files.folder, speaker_files.audio


def test_verify_command(folder, audio, capsys):
    assert speechkit_main(["verify", str(audio[0]), str(audio[0]), "--model", str(folder)]) == 0
    assert "same speaker" in capsys.readouterr().out
    assert speechkit_main(["verify", str(audio[0]), str(audio[1]), "--model", str(folder),
                           "--threshold", "1.0"]) == 0
    assert "different speakers" in capsys.readouterr().out
    assert speechkit_main(["verify", str(audio[0]), "missing.wav", "--model", str(folder)]) == 1
    assert "missing.wav" in capsys.readouterr().err
