"""``speechkit plot-log``: a run's curves into a PNG."""
from __future__ import annotations

import pytest

from speechkit.cli import main as speechkit_main
from tests.unit.train_log_sample import LOG


def test_plot_log_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "train_log.txt"
    path.write_text(LOG)
    assert speechkit_main(["plot-log", str(path)]) == 0
    png = (tmp_path / "train_log.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
