"""benchmarks/gpu_suite.sh --dry-run: every step of the GPU suite runs on CPU with tiny sizes and lands in
its table, so the suite that a GPU machine runs cannot rot unseen."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.processes import clean_env

SUITE = Path(__file__).parents[2] / "benchmarks" / "gpu_suite.sh"
STEPS = ("tests", "asr", "separation", "wav2vec2", "infer")


def run_suite(*args, timeout=900) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(SUITE), *args, "--python", sys.executable], env=clean_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_dry_run_runs_every_step_and_writes_one_table(tmp_path):
    done = run_suite(str(tmp_path), "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    table = (tmp_path / "table.md").read_text()
    for step in STEPS:
        assert f"| {step} | ok |" in table, table
        assert (tmp_path / f"{step}.log").stat().st_size > 0
    assert "skipped" in table and "needs a CUDA device" in table  # the CUDA tests were collected, skipped
    assert "kernels/step" in table and "TFLOP/s" in table  # the profile columns of the ASR rows
    assert table.count("| speechkit |") + table.count("| fp32 |") >= 3


def test_unknown_step_and_option_are_refused(tmp_path):
    done = run_suite(str(tmp_path), "--dry-run", "--only", "asr,gpus", timeout=60)
    assert done.returncode == 2 and "unknown step 'gpus'" in done.stderr
    done = run_suite(str(tmp_path), "--fast", timeout=60)
    assert done.returncode == 2 and "unknown option --fast" in done.stderr


@pytest.mark.slow
def test_only_reruns_the_named_steps_and_a_failure_is_counted(tmp_path):
    done = run_suite(str(tmp_path), "--dry-run", "--only", "infer")
    assert done.returncode == 0, done.stdout + done.stderr
    table = (tmp_path / "table.md").read_text()
    assert "| infer | ok |" in table and "| asr |" not in table
    broken = tmp_path / "broken-python"
    broken.write_text("#!/bin/sh\nexit 7\n")
    broken.chmod(0o755)
    done = subprocess.run(["bash", str(SUITE), str(tmp_path / "again"), "--dry-run", "--only", "infer",
                           "--python", str(broken)], env=clean_env(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    assert "| infer | FAILED (rc 7) |" in (tmp_path / "again" / "table.md").read_text()
