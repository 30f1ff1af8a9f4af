"""A sharded job as a real SLURM array (tools/slurm/infer_submit.sh: array + afterok merge), and an array
preempted with SIGUSR1 that requeues itself and finishes. Needs a running cluster
(`eval "$(/work/shared/slurm/start-local-slurm)"`); skipped when `sinfo` fails."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from speechkit.jobs import JobConfig, run_job
from speechkit.jobs.ledger import ledger_path, read_ledger
from tests.helpers.processes import clean_env, slurm_cluster_answers

TOOLS = Path(__file__).resolve().parents[3] / "tools" / "slurm"




pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not slurm_cluster_answers(), reason="no SLURM cluster answers (sinfo)")]


@pytest.fixture
def slurm_env(tmp_path):
    env = clean_env(SPEECHKIT_PYTHON=sys.executable,
                    SPEECHKIT_SBATCH_OPTIONS=f"--overcommit --cpus-per-task=1 -o {tmp_path}/%x-%A_%a.out")
    if "SLURM_CONF" in os.environ:
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    return env


def _state(job_id: str, env: dict) -> str:
    text = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True,
                          text=True).stdout
    states = re.findall(r"JobState=(\S+)", text)  # an array job shows one line per task
    return ",".join(sorted(set(states))) or "UNKNOWN"


def _wait(job_id: str, env: dict, timeout: float = 300) -> str:
    ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL"}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = _state(job_id, env)
        if state != "UNKNOWN" and set(state.split(",")) <= ended:
            return state
        time.sleep(0.5)
    subprocess.run(["scancel", job_id], env=env)
    pytest.fail(f"job {job_id} still {_state(job_id, env)} after {timeout} s")


def _submit(shards: int, model, manifest, out, env: dict, *options) -> tuple:
    done = subprocess.run(["bash", str(TOOLS / "infer_submit.sh"), str(shards), str(shards), str(model),
                           str(manifest), str(out), "--device", "cpu", *map(str, options)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    array, merge = re.fullmatch(r"array job (\d+) .*, merge job (\d+)\n", done.stdout).groups()
    return array, merge


def _logs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()}" for p in sorted(folder.glob("speechkit-*.out")))


def _reference(model, manifest, out) -> str:
    config = JobConfig(str(model), str(manifest), str(out), max_batch_size=5, progress=False)
    run_job(config, environ={})
    return (Path(out) / "transcripts.txt").read_text()


def test_array_job_then_afterok_merge(job_files, slurm_env, tmp_path):
    model, manifest = job_files
    out = tmp_path / "job"
    array, merge = _submit(3, model, manifest, out, slurm_env, "--max-batch-size", 2)
    assert _wait(merge, slurm_env) == "COMPLETED", _logs(tmp_path)
    assert _state(array, slurm_env) == "COMPLETED"
    assert "merged 30 items (transcribe, 3 shards): WER" in _logs(tmp_path)
    assert (out / "transcripts.txt").read_text() == _reference(model, manifest, tmp_path / "reference")
    runs = [read_ledger(ledger_path(out, k, 3)).runs for k in range(3)]
    assert all([r["source"] for r in shard] == ["slurm-array"] for shard in runs), runs


def test_preempted_array_requeues_and_finishes(job_files, held_model, slurm_env, tmp_path):
    model, manifest = job_files
    held, hold = held_model
    out = tmp_path / "job"
    array, merge = _submit(2, held, manifest, out, slurm_env, "--max-batch-size", 2, "--flush-every", 5)
    deadline = time.monotonic() + 240
    while len(list(hold.parent.glob("hold.*"))) < 2:  # both shards wait in their 4th batch
        assert time.monotonic() < deadline, _logs(tmp_path)
        time.sleep(0.2)
    subprocess.run(["scancel", "--signal=USR1", array], env=slurm_env, check=True)
    while _logs(tmp_path).count("Received SIGUSR1") < 2:  # it reaches the tasks within a few seconds
        assert time.monotonic() < deadline, _logs(tmp_path)
        time.sleep(0.2)
    hold.unlink()
    assert _wait(merge, slurm_env, timeout=400) == "COMPLETED", _logs(tmp_path)
    logs = _logs(tmp_path)
    assert logs.count("requeueing") == 2 and logs.count("preempted after 8 items") == 2, logs
    assert (out / "transcripts.txt").read_text() == _reference(model, manifest, tmp_path / "reference")
    for shard in range(2):
        contents = read_ledger(ledger_path(out, shard, 2))
        assert [r["run"] for r in contents.runs] == [1, 2] and contents.duplicates == []
        first = [i for i, r in contents.records.items() if r["run"] == 1]
        assert len(first) == 8 and len(contents.records) == 15
    assert json.loads((out / "summary.json").read_text())["items"] == 30
