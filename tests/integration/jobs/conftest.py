"""Real `speechkit infer` processes on a tiny exact ASR model: start them, stop them, read their folders."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.job_models import write_manifest, write_model

REPO = Path(__file__).resolve().parents[3]


def clean_env(**extra) -> dict:
    """The environment without an outer launcher's or SLURM's variables; CPU only; this repository first."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "TORCHELASTIC_", "PET_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")}
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def infer_command(model, manifest, out, *options) -> list:
    return [sys.executable, "-m", "speechkit", "infer", str(model), str(manifest), "--output", str(out),
            "--no-progress", *map(str, options)]


def item_rows(ledger: Path) -> list:
    """The item rows of a ledger file (complete lines only)."""
    if not ledger.exists():
        return []
    lines = ledger.read_text().split("\n")[:-1]
    return [row for row in map(json.loads, lines) if "id" in row]


class Job:
    """Started processes of one test, with their output; every one is killed at the end of the test."""

    def __init__(self):
        self.procs: list = []

    def start(self, command: list, env: dict, new_group: bool = False) -> subprocess.Popen:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=new_group)
        self.procs.append(proc)
        return proc

    def wait(self, proc: subprocess.Popen, timeout: float = 240.0) -> tuple:
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            output, _ = proc.communicate()
            pytest.fail(f"still running after {timeout} s; output:\n{output}")
        return proc.returncode, output

    def wait_for_rows(self, ledger: Path, count: int, procs: list, timeout: float = 180.0) -> None:
        """Wait until ``ledger`` holds ``count`` flushed items; fail with the output if a process ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(item_rows(ledger)) >= count:
                return
            for proc in procs:
                if proc.poll() is not None:
                    pytest.fail(f"a worker ended before {count} items of {ledger.name} were flushed:\n"
                                + self.wait(proc)[1])
            time.sleep(0.05)
        pytest.fail(f"{ledger} did not reach {count} items in {timeout} s")

    def wait_for_files(self, pattern: str, folder: Path, count: int, procs: list, timeout: float = 180.0):
        """Wait until ``count`` files match ``pattern`` in ``folder``; fail with the output if one ends."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(list(folder.glob(pattern))) >= count:
                return
            for proc in procs:
                if proc.poll() is not None:
                    pytest.fail(f"a worker ended before {count} files {pattern}:\n" + self.wait(proc)[1])
            time.sleep(0.05)
        pytest.fail(f"no {count} files {pattern} in {folder} after {timeout} s")

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                if proc.pid == os.getpgid(proc.pid):
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
                proc.communicate()


@pytest.fixture
def job():
    started = Job()
    yield started
    started.kill_all()


@pytest.fixture(scope="module")
def job_files(tmp_path_factory):
    """(model folder, manifest of 30 items)."""
    folder = tmp_path_factory.mktemp("job-files")
    return write_model(folder / "model"), write_manifest(folder / "data", count=30)


@pytest.fixture
def held_model(tmp_path):
    """A model folder with the same weights whose 4th and later batches wait while ``hold`` exists (each
    waiting process writes ``hold.<pid>``): a job started with it stops at a known point, however loaded the
    machine; removing ``hold`` lets it go on."""
    hold = tmp_path / "hold"
    hold.touch()
    return write_model(tmp_path / "held-model", hold_file=str(hold), hold_at_batch=4), hold
