"""Two-worker jobs stopped half-way (SIGKILL of one worker then SIGUSR1 of the other; SIGTERM of torchrun's
group) and rerun give byte-for-byte the outputs of one uninterrupted process, with no item done twice after
the last flush and none missing. 30 items in batches of at most 2, shards of 15: each shard's last batch is
partial. The workers' model waits at its 4th batch until the test lets it go, so every stop is at a known
point: 3 batches (6 items) done, 4 (--flush-every 4) or 5 (--flush-every 5) of them flushed."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from speechkit.errors import EXIT_PREEMPTED
from speechkit.jobs import JobConfig, run_job
from speechkit.jobs.ledger import ledger_path, read_ledger
from tests.helpers.processes import clean_env
from tests.integration.jobs.conftest import infer_command, item_rows

pytestmark = pytest.mark.slow
OPTIONS = ["--max-batch-size", 2]


def _reference(model, manifest, out, task: str) -> None:
    """The same job in this process, one shard, other batches: what every interrupted run must give."""
    config = JobConfig(str(model), str(manifest), str(out), task=task, max_batch_size=5, progress=False)
    assert run_job(config, environ={}).merged["items"] == 30


def _files(folder) -> dict:
    """Every output and merged result, by path in the job folder (the folder's own name taken out)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes().replace(str(folder).encode(), b"JOB")
            for p in sorted(folder.rglob("*"))
            if p.is_file() and (p.parts[len(folder.parts)] == "outputs"
                                or p.name in ("outputs.json", "transcripts.txt", "results.json", "wer.txt"))}


def _runs_of_each_item(out, shard: int, num_shards: int) -> dict:
    runs: dict = {}
    for row in item_rows(ledger_path(out, shard, num_shards)):
        runs.setdefault(row["id"], []).append(row["run"])
    return runs


def _assert_each_item_recorded_once(out, num_shards: int) -> None:
    """Every planned item recorded by exactly one run of its shard: none missing, none redone once flushed."""
    plan = json.loads((out / "plan.json").read_text())
    for shard in range(num_shards):
        runs = _runs_of_each_item(out, shard, num_shards)
        assert sorted(runs) == sorted(plan["shards"][shard])
        twice = {item: r for item, r in runs.items() if len(r) > 1}
        assert not twice, twice
        assert read_ledger(ledger_path(out, shard, num_shards)).duplicates == []


def test_sigkill_of_one_worker_and_sigusr1_of_the_other_then_rerun(job_files, held_model, job, tmp_path):
    model, manifest = job_files
    held, hold = held_model
    _reference(model, manifest, tmp_path / "reference", "encode")
    out = tmp_path / "job"
    options = ["--task", "encode", "--num-shards", 2, "--flush-every", 4, *OPTIONS]
    commands = [infer_command(held, manifest, out, "--shard", k, *options) for k in (0, 1)]
    workers = [job.start(command, clean_env()) for command in commands]
    job.wait_for_files("hold.*", hold.parent, 2, workers)  # both wait in their 4th batch
    workers[1].send_signal(signal.SIGKILL)
    assert job.wait(workers[1])[0] == -signal.SIGKILL
    workers[0].send_signal(signal.SIGUSR1)  # SLURM's warning before a time limit
    job.wait_for_output("Received SIGUSR1", 1, workers[:1])
    hold.unlink()
    code, output = job.wait(workers[0])
    assert code == EXIT_PREEMPTED and "preempted after 8 items" in output, output
    # Shard 0 finished its batch in hand (8 items, all flushed); shard 1 lost the records of its 2 items
    # done after its last flush, though their outputs were written (whole: no temporary file is left).
    assert [len(item_rows(ledger_path(out, k, 2))) for k in (0, 1)] == [8, 4]
    assert len(list((out / "outputs").rglob("*.npy"))) == 8 + 6
    assert not list((out / "outputs").rglob(".*tmp-*"))

    shown = subprocess.run([sys.executable, "-m", "speechkit", "infer", "--status", str(out)],
                           env=clean_env(), capture_output=True, text=True, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "items 12/30 (40.0%)" in shown.stdout and "0 finished, 0 running" in shown.stdout, shown.stdout
    assert "      4/15      stopped (1 run)" in shown.stdout and "ETA unknown" in shown.stdout, shown.stdout

    reruns = [job.start(command, clean_env()) for command in commands]  # the same commands (hold is gone)
    results = [job.wait(proc) for proc in reruns]
    assert [code for code, _ in results] == [0, 0], results
    assert sum("merged 30 items" in output for _, output in results) >= 1, results
    assert _files(out) == _files(tmp_path / "reference")
    _assert_each_item_recorded_once(out, 2)
    assert sorted(r[0] for r in _runs_of_each_item(out, 1, 2).values()) == [1] * 4 + [2] * 11


def test_sigterm_of_the_group_flushes_exits_75_and_reruns(job_files, held_model, job, tmp_path):
    model, manifest = job_files
    held, hold = held_model
    _reference(model, manifest, tmp_path / "reference", "transcribe")
    out = tmp_path / "job"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                "-m", "speechkit"]
    command = torchrun + infer_command(held, manifest, out, "--flush-every", 5, *OPTIONS)[3:]
    group = job.start(command, clean_env(), new_group=True)
    job.wait_for_files("hold.*", hold.parent, 2, [group])  # both workers wait in their 4th batch
    assert [len(item_rows(ledger_path(out, k, 2))) for k in (0, 1)] == [5, 5]
    os.killpg(group.pid, signal.SIGTERM)  # torchrun forwards it to its workers (each in its own session)
    job.wait_for_output("Received SIGTERM: finishing the batch", 2, [group])
    hold.unlink()
    code, output = job.wait(group)
    assert code != 0 and output.count("preempted after 8 items") == 2, output
    # Items 6 to 8 of each shard were flushed only because of the signal (the next flush was due at 10).
    assert [len(item_rows(ledger_path(out, k, 2))) for k in (0, 1)] == [8, 8]
    assert not (out / "transcripts.txt").exists()

    code, output = job.wait(job.start(command, clean_env(), new_group=True))  # the same command
    assert code == 0 and "merged 30 items (transcribe, 2 shards): WER" in output, output
    assert _files(out) == _files(tmp_path / "reference")
    _assert_each_item_recorded_once(out, 2)
    assert json.loads((out / "summary.json").read_text())["WER"] == \
        json.loads((tmp_path / "reference" / "summary.json").read_text())["WER"]
