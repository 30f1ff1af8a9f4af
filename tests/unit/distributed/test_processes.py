"""Process facts for the fail-fast watchdog, and its handling of exits, on real processes and a real store."""
from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
import torch
from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

from speechkit.distributed import failfast
from speechkit.distributed.failfast import FailFast
from speechkit.distributed.processes import (
    ERROR_FILE_ENV,
    exit_code_of,
    host_identity,
    process_state,
    write_torchelastic_error_file,
)


def _ended_child() -> subprocess.Popen:
    """A child that has exited but is not reaped yet (waitid with WNOWAIT leaves it a zombie)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
    return child


def test_process_state_running_exited_gone():
    assert process_state(os.getpid()) == "running"
    child = _ended_child()
    assert process_state(child.pid) == "exited"
    child.wait()
    assert process_state(child.pid) == "gone"


def test_host_identity_is_stable():
    assert host_identity() == host_identity() and host_identity().split("|")[0]


def test_error_file_is_read_by_torchrun(tmp_path, monkeypatch):
    path = tmp_path / "error.json"
    monkeypatch.setenv(ERROR_FILE_ENV, str(path))
    assert write_torchelastic_error_file("rank 1 exited with code 3 (sys.exit)", "stack here") == str(path)
    failure = ProcessFailure(local_rank=1, pid=4242, exitcode=3, error_file=str(path))
    assert failure.message["message"] == "rank 1 exited with code 3 (sys.exit)"
    assert failure.message["extraInfo"]["py_callstack"] == "stack here"
    assert failure.timestamp > 0
    # A file the script wrote itself (torch's @record) is kept; without the variable nothing is written.
    assert write_torchelastic_error_file("other", "") is None
    assert "sys.exit" in path.read_text()
    monkeypatch.delenv(ERROR_FILE_ENV)
    assert write_torchelastic_error_file("other", "") is None


def test_exit_code_of():
    assert [exit_code_of(s) for s in (None, 0, 3, "message", True)] == [0, 0, 3, 1, 1]


def _watchdog(tmp_path, rank: int) -> FailFast:
    store = torch.distributed.FileStore(str(tmp_path / "store"), 2)
    return FailFast(store, rank=rank, world_size=2, run_token="t", timeout_s=30, stream=io.StringIO())


def test_a_stopped_rank_waits_until_the_failed_process_has_ended(tmp_path):
    peer = _watchdog(tmp_path, 0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1)"])
    peer.store.set(f"{peer.process_prefix}1", f"{host_identity()}\n{child.pid}")
    try:
        peer._wait_until_ended(1)
        assert child.poll() is not None  # ended before the peer would leave, whoever reaps it
    finally:
        child.kill()
        child.wait()


def test_sys_exit_with_an_error_code_is_recorded_at_shutdown(tmp_path, monkeypatch):
    monkeypatch.setattr(failfast, "ACKNOWLEDGE_WAIT_S", 5.0)
    rank1 = _watchdog(tmp_path, 1)
    rank1.store.set(f"{rank1.seen_prefix}0", "1")  # rank 0 has acknowledged
    rank1.start(register_atexit=False)
    try:
        with pytest.raises(SystemExit):
            sys.exit(0)  # caught and followed by a clean end: no failure
        with pytest.raises(SystemExit):
            sys.exit(3)
    finally:
        rank1.shutdown()
    assert sys.exit is failfast._real_sys_exit and os._exit is failfast._real_os_exit
    assert rank1._failure() == "rank 1 exited with code 3 (sys.exit)"
    assert rank1.store.get(f"{rank1.ended_prefix}1") == b"3"
    assert "the other ranks are told to stop" in rank1.stream.getvalue()


def test_a_clean_sys_exit_is_no_failure(tmp_path):
    rank1 = _watchdog(tmp_path, 1)
    rank1.start(register_atexit=False)
    try:
        with pytest.raises(SystemExit):
            sys.exit(3)
        with pytest.raises(SystemExit):
            sys.exit(None)  # the last word counts
    finally:
        rank1.shutdown()
    assert rank1._failure() is None
    assert rank1.store.check([f"{rank1.done_prefix}1"])


def test_failure_records_name_their_rank():
    assert failfast._failed_rank("rank 12 exited with code 3 (os._exit)") == 12
    assert failfast._failed_rank("something else") is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's SystemExit
def test_sys_exit_in_a_thread_ends_only_the_thread_and_is_no_failure(tmp_path):
    import threading

    rank1 = _watchdog(tmp_path, 1)
    rank1.start(register_atexit=False)
    try:
        thread = threading.Thread(target=sys.exit, args=(5,))
        thread.start()
        thread.join()
    finally:
        rank1.shutdown()
    assert rank1._failure() is None
