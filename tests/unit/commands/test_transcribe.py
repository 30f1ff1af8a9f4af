"""``speechkit transcribe``: values refused up front, naming the option."""
from __future__ import annotations

import pytest

from speechkit.cli import main as speechkit_main


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-20"])
def test_chunk_ms_must_be_a_positive_number(value, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        speechkit_main(["transcribe", str(tmp_path), str(tmp_path / "a.wav"), "--stream", "--chunk-ms",
                        value])
    assert exit_info.value.code == 2
    assert "--chunk-ms" in capsys.readouterr().err


def test_a_backend_a_whisper_folder_cannot_run_is_refused_before_fetching(tmp_path, capsys):
    # --backend reaches the Whisper path too (it used to be dropped there, running torch silently).
    code = speechkit_main(["transcribe", "--whisper", str(tmp_path / "whisper"), str(tmp_path / "a.wav"),
                           "--backend", "torchscript"])
    assert code == 1
    assert "backend 'torchscript': a Whisper folder runs with 'torch' or 'onnx'" in capsys.readouterr().err
