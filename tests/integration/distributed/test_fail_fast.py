"""A failure on one rank ends every rank quickly with a non-zero exit and names the failed rank."""
from __future__ import annotations

import re

import pytest

from speechkit.distributed import EXIT_PEER_FAILED

pytestmark = pytest.mark.slow

# Far below the 300 s collective timeout that a hang would take; generous for a loaded 2-core CI machine.
LIMIT_S = 60


def test_explicit_workers_one_raises_mid_epoch(tmp_path, processes, make_env, get_port, plain_worker):
    env = make_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=get_port())
    group = processes(timeout=LIMIT_S + 30)
    for worker_id in (0, 1):
        group.start(plain_worker + ["--worker-id", str(worker_id), "--num-workers", "2", "--", "c.yaml",
                                    "--out_dir", str(tmp_path), "--steps", "40", "--step_sleep", "0.2",
                                    "--fail_rank", "1", "--fail_step", "3"], env)
    (code0, out0, secs0), (code1, out1, secs1) = group.wait()
    assert code1 != 0 and "injected failure for the test" in out1
    assert code0 != 0, out0
    assert "rank 1 failed" in out0 and "injected failure" in out0, out0
    assert max(secs0, secs1) < LIMIT_S
    assert not (tmp_path / "rank0.json").exists()


@pytest.mark.parametrize("killed", [1, 0])
def test_explicit_workers_one_killed_the_survivor_names_it(tmp_path, processes, make_env, get_port,
                                                           plain_worker, killed):
    env = make_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=get_port())
    group = processes(timeout=LIMIT_S + 30)
    for worker_id in (0, 1):
        group.start(plain_worker + ["--worker-id", str(worker_id), "--num-workers", "2",
                                    "--distributed_timeout_s", "30", "--", "c.yaml", "--out_dir",
                                    str(tmp_path), "--steps", "40", "--step_sleep", "0.2", "--fail_rank",
                                    str(killed), "--fail_step", "3", "--fail_mode", "kill"], env)
    results = group.wait()
    survivor = 1 - killed
    (code, out, secs), (killed_code, _, _) = results[survivor], results[killed]
    assert killed_code == -9
    assert code == EXIT_PEER_FAILED, out
    assert f"rank {survivor} stops because rank {killed} failed: its process ended" in out, out
    assert f"rank {survivor} failed" not in out, out  # the survivor does not blame itself
    assert secs < LIMIT_S


def test_self_spawning_launcher_names_the_failed_worker(tmp_path, processes, make_env, plain_worker):
    group = processes(timeout=LIMIT_S + 30)
    group.start(plain_worker + ["--num-workers", "2", "--", "c.yaml", "--out_dir", str(tmp_path), "--steps",
                                "40", "--step_sleep", "0.2", "--fail_rank", "1", "--fail_step", "3"],
                make_env())
    [(code, output, secs)] = group.wait()
    assert code != 0
    assert "FAILED: worker 1 exited with code 1" in output, output
    assert "[worker 1] " in output and "injected failure" in output
    assert secs < LIMIT_S


def test_torchrun_one_rank_raises(tmp_path, processes, make_env, torchrun_exe, plain_worker):
    group = processes(timeout=LIMIT_S + 30)
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=2", plain_worker[1], "--", "c.yaml",
                 "--out_dir", str(tmp_path), "--steps", "40", "--step_sleep", "0.2", "--fail_rank", "0",
                 "--fail_step", "3"], make_env())
    [(code, output, secs)] = group.wait()
    assert code != 0
    assert "injected failure for the test" in output
    assert secs < LIMIT_S
    # Rank 0 (whose peer is stopped because of it) is torchrun's root cause, with the exception's code.
    cause = root_cause(output)
    assert re.search(r"rank\s*:\s*0 \(local_rank: 0\)", cause), output
    assert re.search(r"exitcode\s*:\s*1 \(pid", cause), output


def root_cause(torchrun_output: str) -> str:
    """The "Root Cause (first observed failure)" section of torchrun's failure summary."""
    assert "Root Cause (first observed failure):" in torchrun_output, torchrun_output
    return torchrun_output.split("Root Cause (first observed failure):", 1)[1].split("=" * 20, 1)[0]


@pytest.mark.parametrize("mode, code, recorded, in_error_file", [
    ("raise", 1, "rank 1 failed: RuntimeError: injected failure for the test", "injected failure for the"),
    ("exit", 3, "rank 1 exited with code 3 (sys.exit)", "sys.exit(3) called from"),
    ("os_exit", 4, "rank 1 exited with code 4 (os._exit)", "os._exit(4) called from"),
])
def test_torchrun_reports_the_failed_rank_with_its_own_code(tmp_path, processes, make_env, torchrun_exe,
                                                            plain_worker, mode, code, recorded,
                                                            in_error_file):
    """The failed rank ends first: torchrun's root cause is rank 1 with its code, not a stopped peer (86)."""
    group = processes(timeout=4 * LIMIT_S)  # only a hang comes near this, even on a loaded machine
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=2", plain_worker[1], "--", "c.yaml",
                 "--out_dir", str(tmp_path), "--steps", "400", "--step_sleep", "0.05", "--fail_rank", "1",
                 "--fail_step", "3", "--fail_mode", mode], make_env())
    [(torchrun_code, output, _)] = group.wait()
    assert torchrun_code != 0, output
    cause = root_cause(output)
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)", cause), output
    assert re.search(rf"exitcode\s*:\s*{code} \(pid", cause), output
    # torchrun read the failure from the error file the failed rank wrote, not only its exit code.
    assert "error.json" in cause and in_error_file in cause, output
    # The survivor named the failed rank and its code (said before acknowledging, so before rank 1 ended).
    assert f"speechkit.distributed: rank 0 stops because {recorded}" in output, output
