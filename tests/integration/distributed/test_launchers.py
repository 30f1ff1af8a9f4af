"""Every launcher starts real gloo workers on CPU that agree on their place and train in step."""
from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.slow


def check_two_workers(records: list, launcher: str) -> None:
    assert [r["rank"] for r in records] == [0, 1]
    for record in records:
        assert record["world_size"] == 2
        assert record["launcher"] == launcher
        assert record["backend"] == "gloo" and record["device"] == "cpu"
        assert record["gathered"] == [{"rank": 0}, {"rank": 1}]
        assert record["broadcast"] == "from 0"
        assert record["sum"] == 3 and record["max"] == 1
        assert record["wrapper"] == "DistributedDataParallel"
    assert [r["is_main"] for r in records] == [True, False]
    assert records[0]["marker"] == "written" and records[1]["marker"] is None
    # Each rank saw different data; DDP averaged the gradients, so the weights stayed identical.
    assert records[0]["weights"] == records[1]["weights"]


def test_torchrun_two_workers(tmp_path, processes, make_env, torchrun_exe, read_ranks):
    group = processes()
    group.start([torchrun_exe, "--standalone", "--nproc_per_node=2",
                 str(_script()), "--", "c.yaml", "--out_dir", str(tmp_path)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    records = read_ranks(tmp_path, 2)
    check_two_workers(records, "torchrun")
    assert [r["local_rank"] for r in records] == [0, 1]


def test_legacy_launch_module_with_legacy_flags(tmp_path, processes, make_env, get_port, read_ranks):
    group = processes()
    group.start([sys.executable, "-m", "torch.distributed.launch", "--nproc_per_node=2",
                 f"--master_port={get_port()}", str(_script()), "c.yaml", "--distributed_launch",
                 "--distributed_backend=gloo", "--out_dir", str(tmp_path)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    check_two_workers(read_ranks(tmp_path, 2), "torch.distributed.launch")


@pytest.mark.parametrize("protocol", ["env", "file"])
def test_explicit_worker_flags(tmp_path, processes, make_env, get_port, plain_worker, read_ranks, protocol):
    env = make_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=get_port())
    sync = "env://" if protocol == "env" else f"file://{tmp_path / 'rendezvous'}"
    group = processes()
    for worker_id in (0, 1):
        group.start(plain_worker + ["--worker-id", str(worker_id), "--num-workers", "2", "--sync-protocol",
                                    sync, "--", "c.yaml", "--out_dir", str(tmp_path)], env)
    for code, output, _ in group.wait():
        assert code == 0, output
    records = read_ranks(tmp_path, 2)
    check_two_workers(records, "explicit")
    assert {r["init_method"] for r in records} == {sync}


def test_self_spawning_launcher(tmp_path, processes, make_env, plain_worker, read_ranks):
    group = processes()
    group.start(plain_worker + ["--num-workers", "2", "--", "c.yaml", "--out_dir", str(tmp_path)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    check_two_workers(read_ranks(tmp_path, 2), "explicit")
    assert "speechkit launcher: worker 0 exited with code 0" in output
    assert "speechkit launcher: worker 1 exited with code 0" in output


def test_two_torchrun_nodes_on_localhost(tmp_path, processes, make_env, torchrun_exe, get_port, read_ranks):
    port = get_port()
    group = processes()
    for node_rank in (0, 1):
        group.start([torchrun_exe, "--nnodes=2", f"--node_rank={node_rank}", "--nproc_per_node=1",
                     "--master_addr=127.0.0.1", f"--master_port={port}", str(_script()), "--", "c.yaml",
                     "--out_dir", str(tmp_path)], make_env())
    for code, output, _ in group.wait():
        assert code == 0, output
    records = read_ranks(tmp_path, 2)
    check_two_workers(records, "torchrun")
    assert sorted(r["node_rank"] for r in records) == [0, 1]
    assert [r["local_rank"] for r in records] == [0, 0]


def test_data_parallel_flag_without_gpus_uses_one_device(tmp_path, processes, make_env, plain_worker,
                                                         read_ranks):
    group = processes()
    group.start(plain_worker + ["c.yaml", "--data_parallel_backend", "--out_dir", str(tmp_path)], make_env())
    [(code, output, _)] = group.wait()
    assert code == 0, output
    [record] = read_ranks(tmp_path, 1)
    assert record["world_size"] == 1 and record["device"] == "cpu" and record["launcher"] == "single"
    assert record["wrapper"] == "Linear"
    assert any("no GPU" in w and "one device (cpu)" in w for w in record["warnings"]), record["warnings"]


def _script():
    from pathlib import Path

    return Path(__file__).parent / "scripts" / "plain_worker.py"
