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
    """Started processes of one test, each writing its output to a log file (so that a test can watch it);
    every one is killed at the end of the test."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: list = []
        self.logs: dict = {}

    def start(self, command: list, env: dict, new_group: bool = False) -> subprocess.Popen:
        log = self.folder / f"process-{len(self.procs)}.log"
        with open(log, "w") as handle:
            proc = subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT, text=True,
                                    start_new_session=new_group)
        self.procs.append(proc)
        self.logs[proc.pid] = log
        return proc

    def output(self, proc: subprocess.Popen) -> str:
        return self.logs[proc.pid].read_text()

    def wait(self, proc: subprocess.Popen, timeout: float = 240.0) -> tuple:
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill_all()
            pytest.fail(f"still running after {timeout} s; output:\n{self.output(proc)}")
        return proc.returncode, self.output(proc)

    def _until(self, done, what: str, procs: list, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return
            for proc in procs:
                if proc.poll() is not None:
                    pytest.fail(f"a worker ended before {what}:\n" + self.output(proc))
            time.sleep(0.05)
        pytest.fail(f"not {what} after {timeout} s:\n" + "\n".join(self.output(p) for p in procs))

    def wait_for_files(self, pattern: str, folder: Path, count: int, procs: list, timeout: float = 180.0):
        """Wait until ``count`` files match ``pattern`` in ``folder``; fail with the output if one ends."""
        self._until(lambda: len(list(folder.glob(pattern))) >= count, f"{count} files {pattern}", procs,
                    timeout)

    def wait_for_output(self, text: str, count: int, procs: list, timeout: float = 120.0) -> None:
        """Wait until the processes' output holds ``text`` ``count`` times."""
        self._until(lambda: sum(self.output(p).count(text) for p in procs) >= count,
                    f"{count} x {text!r} in the output", procs, timeout)

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                if proc.pid == os.getpgid(proc.pid):
                    os.killpg(proc.pid, signal.SIGKILL)
                else:
                    proc.kill()
                proc.wait()


@pytest.fixture
def job(tmp_path):
    started = Job(tmp_path)
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
