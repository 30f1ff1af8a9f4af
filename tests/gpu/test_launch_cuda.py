"""Launching on GPUs with real processes: DataParallel over the visible GPUs, nccl under torchrun, two
processes on one GPU, and the self-spawning launcher placing one worker per GPU."""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.gpu.conftest import GPUS
from tests.integration.distributed.conftest import Processes, free_port


def run(commands: list, env: dict, timeout: float = 300.0) -> list:
    group = Processes(timeout)
    try:
        for command in commands:
            group.start(command, env)
        return group.wait()
    finally:
        for proc, _ in group.procs:
            if proc.poll() is None:
                proc.kill()


def ranks(out_dir: Path, world_size: int) -> list:
    return [json.loads((out_dir / f"rank{r}.json").read_text()) for r in range(world_size)]


def torchrun() -> str:
    exe = Path(sys.executable).with_name("torchrun")
    return str(exe) if exe.exists() else shutil.which("torchrun")


def test_data_parallel_backend_uses_every_visible_gpu(tmp_path, plain_worker, gpu_env):
    [(code, output, _)] = run([plain_worker + ["c.yaml", "--data_parallel_backend", "--out_dir",
                                               str(tmp_path)]], gpu_env())
    assert code == 0, output
    [record] = ranks(tmp_path, 1)
    assert record["device"] == "cuda:0" and record["world_size"] == 1
    if GPUS > 1:
        assert record["wrapper"] == "DataParallel"
    else:
        assert record["wrapper"] == "Linear"
        assert any("only one GPU" in w for w in record["warnings"]), record["warnings"]


def test_one_process_nccl_group_under_torchrun(tmp_path, plain_worker, gpu_env):
    [(code, output, _)] = run([[torchrun(), "--standalone", "--nproc_per_node=1", plain_worker[1], "--",
                                "c.yaml", "--out_dir", str(tmp_path)]], gpu_env())
    assert code == 0, output
    [record] = ranks(tmp_path, 1)
    assert record["backend"] == "nccl" and record["device"] == "cuda:0" and record["launcher"] == "torchrun"
    assert record["sum"] == 1 and record["gathered"] == [{"rank": 0}]


def _two_on_gpu0(plain_worker, tmp_path, backend: str) -> list:
    return [plain_worker + ["--worker-id", str(worker), "--num-workers", "2", "--device-id", "0",
                            "--distributed_backend", backend, "--", "c.yaml", "--out_dir", str(tmp_path)]
            for worker in (0, 1)]


def test_two_processes_share_one_gpu_with_gloo(tmp_path, plain_worker, gpu_env):
    env = gpu_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    for code, output, _ in run(_two_on_gpu0(plain_worker, tmp_path, "gloo"), env):
        assert code == 0, output
    records = ranks(tmp_path, 2)
    assert {r["device"] for r in records} == {"cuda:0"} and {r["backend"] for r in records} == {"gloo"}
    assert records[0]["weights"] == records[1]["weights"]


def test_two_processes_on_one_gpu_with_nccl_train_or_stop_with_nccls_reason(tmp_path, plain_worker, gpu_env):
    """NCCL refuses two ranks on one device ("Duplicate GPU detected") in the releases that check it; then
    both workers must stop (no hang) and the reason must reach the user."""
    env = gpu_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=free_port())
    results = run(_two_on_gpu0(plain_worker, tmp_path, "nccl"), env, timeout=240.0)
    if all(code == 0 for code, _, _ in results):
        records = ranks(tmp_path, 2)
        assert records[0]["weights"] == records[1]["weights"]
        print("nccl: two processes shared cuda:0 and trained in step")
    else:
        outputs = "\n".join(output for _, output, _ in results)
        assert "Duplicate GPU" in outputs or "same GPU" in outputs or "duplicate" in outputs.lower(), outputs
        print("nccl: two processes on cuda:0 refused by NCCL (Duplicate GPU)")


def test_self_spawning_launcher_places_one_worker_per_gpu(tmp_path, plain_worker, gpu_env):
    [(code, output, _)] = run([plain_worker + ["--num-workers", str(GPUS), "--", "c.yaml", "--out_dir",
                                               str(tmp_path)]], gpu_env())
    assert code == 0, output
    records = ranks(tmp_path, GPUS)
    assert [r["device"] for r in records] == [f"cuda:{i}" for i in range(GPUS)]
    assert {r["backend"] for r in records} == ({"nccl"} if GPUS > 1 else {None})


def test_self_spawning_more_workers_than_gpus_is_refused(tmp_path, plain_worker, gpu_env):
    [(code, output, _)] = run([plain_worker + ["--num-workers", str(GPUS + 1), "--", "c.yaml", "--out_dir",
                                               str(tmp_path)]], gpu_env(), timeout=120.0)
    assert code != 0
    assert f"only {GPUS} GPUs are visible" in output and "--device cpu" in output, output
