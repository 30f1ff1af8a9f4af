"""speechkit plot-log: a train_log.txt becomes curves per stage, then a PNG; bad lines are named."""
from __future__ import annotations

import pytest

from speechkit.cli import main as speechkit_main
from speechkit.errors import DataError
from speechkit.plot_log import parse_train_log
from tests.unit.train_log_sample import LOG


def test_parse_train_log(tmp_path):
    path = tmp_path / "train_log.txt"
    path.write_text(LOG)
    curves = parse_train_log(path)
    assert curves["train"]["loss"] == [(1, 2.5), (2, 1.5)]
    assert curves["train"]["lr"] == [(1, 0.001), (2, 0.0005)]
    assert curves["valid"]["WER"] == [(1, 80.5), (2, 50.25)]
    assert curves["test"] == {"loss": [(None, 1.3)], "WER": [(None, 52.0)], "CER": [(None, 21.0)]}
    assert set(curves) == {"train", "valid", "test"}  # per-update lines are not epoch curves


def test_bad_lines_are_named(tmp_path, capsys):
    path = tmp_path / "train_log.txt"
    path.write_text(LOG + "Traceback (most recent call last)\n")
    with pytest.raises(DataError, match=r"train_log.txt, line 7: not a stage summary"):
        parse_train_log(path)
    assert speechkit_main(["plot-log", str(tmp_path / "missing.txt")]) == 1
    assert "no such train log" in capsys.readouterr().err
