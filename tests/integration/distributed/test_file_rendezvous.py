"""Explicit workers meeting through a ``file://`` rendezvous: a bad folder, a garbage file, the file of a
crashed run and a missing worker each end with a clear error within 30 s; a clean run removes its file, so
the same command runs again."""
from __future__ import annotations

import signal
import time

import pytest

pytestmark = pytest.mark.slow

# torch's FileStore alone waits 300 s in each of these cases; a clear error must come well before.
LIMIT_S = 30


def start_workers(group, plain_worker, env, rdv, out_dir, ranks=(0, 1), timeout_s=60, steps=2):
    for worker_id in ranks:
        group.start(plain_worker + ["--worker-id", str(worker_id), "--num-workers", "2", "--sync-protocol",
                                    f"file://{rdv}", "--distributed_timeout_s", str(timeout_s), "--",
                                    "c.yaml", "--out_dir", str(out_dir), "--steps", str(steps)], env)


def test_a_missing_folder_is_refused_at_once(tmp_path, processes, make_env, plain_worker):
    group = processes(timeout=LIMIT_S + 30)
    start_workers(group, plain_worker, make_env(), tmp_path / "no" / "such" / "rdv", tmp_path, ranks=(1,))
    [(code, output, secs)] = group.wait()
    assert code != 0 and secs < LIMIT_S, output
    assert f"the folder {tmp_path / 'no' / 'such'} does not exist" in output, output


def test_a_garbage_file_is_refused_at_once(tmp_path, processes, make_env, plain_worker):
    rdv = tmp_path / "rdv"
    rdv.write_bytes(b"\xff\xff\xff\x7fnot a store at all")
    group = processes(timeout=LIMIT_S + 30)
    start_workers(group, plain_worker, make_env(), rdv, tmp_path, ranks=(0,))
    [(code, output, secs)] = group.wait()
    assert code != 0 and secs < LIMIT_S, output
    assert "is not a rendezvous file" in output and f"rm {rdv}" in output, output


def test_a_missing_worker_ends_the_rendezvous_after_the_timeout(tmp_path, processes, make_env, plain_worker):
    rdv = tmp_path / "rdv"
    group = processes(timeout=LIMIT_S + 30)
    start_workers(group, plain_worker, make_env(), rdv, tmp_path, ranks=(0,), timeout_s=5)
    [(code, output, secs)] = group.wait()
    assert code != 0 and secs < LIMIT_S, output
    assert "rank(s) 1 did not join" in output and "within --distributed_timeout_s 5 s" in output, output
    # it withdrew: both workers started now meet through the same file
    group = processes(timeout=120)
    start_workers(group, plain_worker, make_env(), rdv, tmp_path)
    assert [code for code, _, _ in group.wait()] == [0, 0]


def test_the_file_of_a_killed_run_is_refused_with_what_to_do(tmp_path, processes, make_env, plain_worker):
    rdv = tmp_path / "rdv"
    group = processes(timeout=120)
    start_workers(group, plain_worker, make_env(), rdv, tmp_path, steps=10_000)
    deadline = time.monotonic() + 90
    while not (tmp_path / "main_ran").exists():  # written after the rendezvous
        assert time.monotonic() < deadline and all(p.poll() is None for p, _ in group.procs)
        time.sleep(0.2)
    for proc, _ in group.procs:
        proc.send_signal(signal.SIGKILL)
    group.wait()
    assert rdv.exists()
    group = processes(timeout=LIMIT_S + 30)
    start_workers(group, plain_worker, make_env(), rdv, tmp_path, timeout_s=LIMIT_S)
    for code, output, secs in group.wait():
        assert code != 0 and secs < LIMIT_S, output
        assert "left by an earlier run that did not end cleanly" in output and f"rm {rdv}" in output, output


def test_the_same_command_runs_twice(tmp_path, processes, make_env, plain_worker, read_ranks):
    rdv = tmp_path / "rdv"
    for attempt in range(2):
        group = processes(timeout=120)
        start_workers(group, plain_worker, make_env(), rdv, tmp_path)
        results = group.wait()
        assert [code for code, _, _ in results] == [0, 0], results
        assert not rdv.exists(), f"attempt {attempt}: the rendezvous file was left behind"
        assert [r["init_method"] for r in read_ranks(tmp_path, 2)] == [f"file://{rdv}"] * 2
