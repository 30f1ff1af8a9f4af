"""benchmarks/sampler_scale.py runs and prints its table, with a baseline revision beside (tiny sizes; the
figures are not checked beyond the table's shape)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "benchmarks" / "sampler_scale.py"


def table_rows(output: str) -> list:
    return [line for line in output.splitlines() if line.startswith("| ") and "---" not in line]


def test_sampler_scale_prints_one_row_per_world_size(capsys):
    module = load_script(SCRIPT, "sampler_scale_benchmark")
    assert module.main(["--items", "3000", "--world-sizes", "1,4,64", "--max-batch-length", "60"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 4 and rows[0].startswith("| world size")
    assert [row.split("|")[1].strip() for row in rows[1:]] == ["1", "4", "64"]


@pytest.mark.skipif(shutil.which("git") is None, reason="the baseline is read from git")
def test_sampler_scale_measures_a_baseline_revision_alongside(capsys):
    inside = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True)
    if inside.returncode != 0:
        pytest.skip("not a git checkout")
    module = load_script(SCRIPT, "sampler_scale_benchmark")
    assert module.main(["--items", "2000", "--world-sizes", "1,8", "--baseline", "HEAD"]) == 0
    rows = table_rows(capsys.readouterr().out)
    assert len(rows) == 3 and "HEAD: steps" in rows[0]
    assert all(row.rstrip(" |").endswith("x") for row in rows[1:])  # the fill ratio against HEAD
