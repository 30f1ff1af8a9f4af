"""``speechkit export``'s own checks, before anything is read or written (the exports themselves are tested in
tests/integration/pretrained/test_export_*.py)."""
from __future__ import annotations

import pytest

from speechkit.cli import main


@pytest.mark.parametrize("argv, message", [
    (["--output", "{out}"], "give --checkpoints and --hparams (a recipe's checkpoint), or --model"),
    (["--checkpoints", "{tmp}", "--output", "{out}"], "give --checkpoints and --hparams"),
    (["--format", "onnx", "--output", "{out}"], "give --model FOLDER, or --checkpoints and --hparams"),
    (["--model", "{tmp}", "--checkpoints", "{tmp}", "--hparams", "x.yaml", "--format", "onnx",
      "--output", "{out}"], "give either --model, or --checkpoints with --hparams, not both"),
])
def test_a_missing_or_doubled_source_is_an_error_that_writes_nothing(argv, message, tmp_path, capsys):
    out = tmp_path / "model"
    argv = [a.format(tmp=tmp_path, out=out) for a in argv]
    assert main(["export", *argv]) == 1
    assert message in capsys.readouterr().err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
