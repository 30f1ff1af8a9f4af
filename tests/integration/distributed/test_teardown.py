"""A successful run never aborts at exit: the fail-fast watchdog thread is out of every store call before the
interpreter ends (a daemon thread inside a C++ call at that moment aborts the process with "terminate called
without an active exception", exit 134), and many short two-process runs end with 0."""
from __future__ import annotations

import sys

import pytest

from tests.integration.distributed.conftest import SCRIPTS

pytestmark = pytest.mark.slow

STUCK = [sys.executable, str(SCRIPTS / "stuck_store_exit.py")]


def test_exit_waits_for_the_watchdog_store_call_to_return(tmp_path, processes, make_env):
    # the lock is held 3 s, longer than the watchdog thread was ever waited for before
    group = processes(timeout=90)
    group.start(STUCK + [str(tmp_path / "store"), "3"], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0 and "work done" in output, output
    assert "terminate called" not in output


def test_a_store_call_that_never_returns_ends_the_process_with_its_code(tmp_path, processes, make_env):
    group = processes(timeout=90)
    group.start(STUCK + [str(tmp_path / "store"), "-1"], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    assert "the watchdog thread did not stop" in output and "terminate called" not in output, output


def test_short_two_process_runs_never_abort_at_exit(tmp_path, processes, make_env, get_port, plain_worker):
    # several pairs at once: the load under which an exit abort was seen (1 run in 17)
    runs, at_once = 6, 3
    for start in range(0, runs, at_once):
        group = processes(timeout=240)
        for run in range(start, start + at_once):
            out_dir = tmp_path / str(run)
            out_dir.mkdir()
            env = make_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=get_port())
            for worker_id in (0, 1):
                group.start(plain_worker + ["--worker-id", str(worker_id), "--num-workers", "2", "--",
                                            "c.yaml", "--out_dir", str(out_dir), "--steps", "1"], env)
        for code, output, _ in group.wait():
            assert code == 0 and "terminate called" not in output, output
