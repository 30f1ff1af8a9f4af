"""SLURM for real: srun tasks, several nodes, an sbatch training job, and preemption with requeue and resume.

Needs a running cluster (`eval "$(/work/shared/slurm/start-local-slurm)"`); skipped when `sinfo` fails.
"""
from __future__ import annotations

import collections
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.processes import slurm_cluster_answers

REPO = Path(__file__).resolve().parents[3]
SCRIPTS = Path(__file__).parent / "scripts"
TOOLS = REPO / "tools" / "slurm"




pytestmark = [pytest.mark.slurm, pytest.mark.slow,
              pytest.mark.skipif(not slurm_cluster_answers(), reason="no SLURM cluster answers (sinfo)")]


@pytest.fixture
def slurm_env(make_env):
    import os

    env = make_env()
    if "SLURM_CONF" in os.environ:
        env["SLURM_CONF"] = os.environ["SLURM_CONF"]
    env["SPEECHKIT_PYTHON"] = sys.executable
    return env


def srun(args: list, env: dict, timeout: float = 180) -> str:
    result = subprocess.run(["srun", "--overcommit", "--immediate=60", *args], env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def sbatch(args: list, env: dict) -> str:
    result = subprocess.run(["sbatch", "--parsable", "--overcommit", "--cpus-per-task=1", *args], env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip().split(";")[0]


def job_state(job_id: str, env: dict) -> tuple:
    text = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=env, capture_output=True,
                          text=True).stdout
    fields = dict(item.split("=", 1) for item in text.split() if "=" in item)
    return fields.get("JobState", "UNKNOWN"), fields.get("ExitCode", "")


def wait_job(job_id: str, env: dict, timeout: float = 300) -> tuple:
    """Poll until the job ends (a requeued job goes back to PENDING and runs again, so it has not ended)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state, code = job_state(job_id, env)
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY",
                     "BOOT_FAIL"):
            return state, code
        time.sleep(0.5)
    subprocess.run(["scancel", job_id], env=env)
    pytest.fail(f"job {job_id} still {job_state(job_id, env)} after {timeout} s")


def wait_for_training(output: Path, job_id: str, env: dict, batches: int, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = sum(len(p.read_text().split()) for p in (output / "seen").glob("epoch1.*")) \
            if (output / "seen").exists() else 0
        if lines >= batches:
            return
        state, _ = job_state(job_id, env)
        assert state in ("PENDING", "RUNNING", "CONFIGURING"), f"job {job_id} ended early: {state}"
        time.sleep(0.5)
    pytest.fail(f"job {job_id} did not start training within {timeout} s")


def write_hparams(folder: Path, **values) -> Path:
    hparams = {"output_folder": str(folder / "out"), "n_train": 24, "n_test": 9, "epochs": 2, "batch_size": 2,
               "mode": "fit", "step_sleep": 0.0, "noprogressbar": True, **values}
    path = folder / "hp.yaml"
    path.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in hparams.items()))
    return path


def seen_per_epoch(output: Path) -> dict:
    counts: dict = collections.defaultdict(collections.Counter)
    for path in (output / "seen").glob("epoch*.txt"):
        counts[int(path.name.split(".")[0][len("epoch"):])].update(path.read_text().split())
    return counts


def assert_every_item_seen_once(output: Path, n_items: int, epochs: int) -> None:
    counts = seen_per_epoch(output)
    expected = collections.Counter(f"tr{i:03d}" for i in range(n_items))
    for epoch in range(1, epochs + 1):
        assert counts[epoch] == expected, f"epoch {epoch}: {counts[epoch] - expected} extra, " \
                                          f"{expected - counts[epoch]} missing"


def starts(output: Path) -> list:
    return [json.loads(line) for line in (output / "starts.jsonl").read_text().splitlines()]


def test_srun_two_tasks_on_one_node(tmp_path, slurm_env, plain_worker):
    srun(["-n", "2", *plain_worker, "c.yaml", "--out_dir", str(tmp_path)], slurm_env)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [(r["rank"], r["local_rank"], r["node_rank"]) for r in records] == [(0, 0, 0), (1, 1, 0)]
    assert {r["launcher"] for r in records} == {"slurm"} and {r["world_size"] for r in records} == {2}
    assert records[0]["weights"] == records[1]["weights"]
    assert records[0]["gathered"] == [{"rank": 0}, {"rank": 1}]


def test_srun_two_nodes_two_tasks_each(tmp_path, slurm_env, plain_worker):
    srun(["-N", "2", "--ntasks-per-node=2", *plain_worker, "c.yaml", "--out_dir", str(tmp_path)], slurm_env)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(4)]
    assert [(r["node_rank"], r["local_rank"]) for r in records] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert {r["world_size"] for r in records} == {4}
    assert len({tuple(r["weights"]) for r in records}) == 1
    assert records[3]["gathered"] == [{"rank": r} for r in range(4)]


def test_sbatch_training_job(tmp_path, slurm_env):
    hparams = write_hparams(tmp_path)
    job = sbatch(["-n", "2", "-o", str(tmp_path / "job.out"), str(TOOLS / "train_single_node.sbatch"),
                  str(SCRIPTS / "tiny_train.py"), str(hparams)], slurm_env)
    state, code = wait_job(job, slurm_env)
    assert state == "COMPLETED", (tmp_path / "job.out").read_text()
    output = tmp_path / "out"
    assert (output / "done.2").exists()
    assert {(s["world_size"], s["launcher"]) for s in starts(output)} == {(2, "slurm")}
    assert_every_item_seen_once(output, 24, 2)
    assert any((output / "save").iterdir())


def test_preemption_saves_requeues_and_resumes(tmp_path, slurm_env):
    hparams = write_hparams(tmp_path, step_sleep=1.0)
    output = tmp_path / "out"
    job = sbatch(["-n", "2", "-o", str(tmp_path / "job.out"), str(TOOLS / "train_requeue.sbatch"),
                  str(SCRIPTS / "tiny_train.py"), str(hparams)], slurm_env)
    wait_for_training(output, job, slurm_env, batches=4)
    subprocess.run(["scancel", "--signal=USR1", job], env=slurm_env, check=True)
    state, _ = wait_job(job, slurm_env)
    log = (tmp_path / "job.out").read_text()
    assert state == "COMPLETED", log
    assert "Exited with exit code 75" in log and "requeueing job" in log
    records = starts(output)
    assert [s["restart"] for s in records].count("1") == 2, records
    resumed = [s for s in records if s["restart"] == "1"]
    assert all(s["epoch"] == 0 and s["train_position"] > 0 for s in resumed), records  # mid-epoch resume
    assert_every_item_seen_once(output, 24, 2)


def test_preempted_job_resumes_on_a_different_number_of_tasks(tmp_path, slurm_env):
    hparams = write_hparams(tmp_path, step_sleep=1.0)
    output = tmp_path / "out"
    env = {**slurm_env, "SPEECHKIT_REQUEUE": "0"}
    first = sbatch(["-n", "2", "-o", str(tmp_path / "first.out"), str(TOOLS / "train_requeue.sbatch"),
                    str(SCRIPTS / "tiny_train.py"), str(hparams)], env)
    wait_for_training(output, first, env, batches=4)
    subprocess.run(["scancel", "--signal=USR1", first], env=env, check=True)
    state, code = wait_job(first, env)
    assert (state, code.split(":")[0]) == ("FAILED", "75"), (tmp_path / "first.out").read_text()
    second = sbatch(["-n", "3", "-o", str(tmp_path / "second.out"), str(TOOLS / "train_requeue.sbatch"),
                     str(SCRIPTS / "tiny_train.py"), str(hparams), "--step_sleep", "0"], env)
    state, _ = wait_job(second, env)
    assert state == "COMPLETED", (tmp_path / "second.out").read_text()
    assert {s["world_size"] for s in starts(output)} == {2, 3}
    assert (output / "done.3").exists()
    assert_every_item_seen_once(output, 24, 2)
