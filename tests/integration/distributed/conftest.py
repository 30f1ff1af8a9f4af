"""Fixtures for tests that start real worker processes (torch.distributed gloo on CPU)."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.processes import clean_env

SCRIPTS = Path(__file__).parent / "scripts"
REPO = Path(__file__).resolve().parents[3]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]




class Processes:
    """Start several commands at once and collect (returncode, output, seconds) for each."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.procs: list = []

    def start(self, command: list, env: dict, cwd=None) -> None:
        started = time.monotonic()
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
        self.procs.append((proc, started))

    def wait(self) -> list:
        results = []
        deadline = time.monotonic() + self.timeout
        for proc, started in self.procs:
            try:
                output, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                for other, _ in self.procs:
                    other.kill()
                output, _ = proc.communicate()
                pytest.fail(f"processes still running after {self.timeout} s (a hang); output:\n{output}")
            results.append((proc.returncode, output, time.monotonic() - started))
        return results


@pytest.fixture
def processes():
    started = []

    def make(timeout: float = 120.0) -> Processes:
        group = Processes(timeout)
        started.append(group)
        return group

    yield make
    for group in started:
        for proc, _ in group.procs:
            if proc.poll() is None:
                proc.kill()


@pytest.fixture
def read_ranks():
    def read(out_dir: Path, world_size: int) -> list:
        records = [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world_size)]
        return records
    return read


@pytest.fixture(scope="session")
def torchrun_exe() -> str:
    exe = Path(sys.executable).with_name("torchrun")
    return str(exe) if exe.exists() else shutil.which("torchrun")


@pytest.fixture
def make_env():
    """``make_env(**extra)``: a clean CPU environment for worker processes."""
    return clean_env


@pytest.fixture
def get_port():
    """``get_port()``: a free TCP port on 127.0.0.1."""
    return free_port


@pytest.fixture
def plain_worker() -> list:
    """The command prefix that runs the plain torch worker script."""
    return [sys.executable, str(SCRIPTS / "plain_worker.py")]
