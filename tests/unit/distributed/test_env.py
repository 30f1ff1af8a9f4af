"""resolve_context is a pure function: each launcher's environment layout resolves to the right place."""
from __future__ import annotations

import dataclasses

import pytest

from speechkit.distributed.env import (
    SLURM_PORT_BASE,
    DistributedContext,
    expand_nodelist,
    is_spawn_request,
    resolve_context,
    slurm_master_port,
)
from speechkit.errors import DistributedError
from speechkit.experiment.run_options import parse_arguments


def opts(*flags):
    return parse_arguments(["hp.yaml", *flags])[1]


TORCHRUN = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1",
            "MASTER_PORT": "29500", "TORCHELASTIC_RUN_ID": "abc", "TORCHELASTIC_RESTART_COUNT": "0"}
SLURM = {"SLURM_PROCID": "2", "SLURM_NTASKS": "4", "SLURM_LOCALID": "0", "SLURM_NODEID": "1",
         "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_JOB_ID": "4242",
         "SLURM_JOB_NODELIST": "gpu[07-08]"}


def test_no_launcher_is_one_process_on_cpu():
    ctx = resolve_context(opts(), {}, cuda_device_count=0)
    assert ctx == DistributedContext(rank=0, world_size=1, device="cpu", backend=None, launcher="single",
                                     timeout_s=300.0)
    assert ctx.is_main and not ctx.is_distributed


def test_one_process_with_cuda_takes_gpu_zero_and_device_flag_wins():
    assert resolve_context(opts(), {}, cuda_device_count=2).device == "cuda:0"
    assert resolve_context(opts("--device", "cpu"), {}, cuda_device_count=2).device == "cpu"
    assert resolve_context(opts("--device", "cuda:1"), {}, cuda_device_count=2).device == "cuda:1"


def test_torchrun_environment():
    ctx = resolve_context(opts(), TORCHRUN, cuda_device_count=0)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.node_rank) == (3, 4, 1, 1)
    assert (ctx.launcher, ctx.backend, ctx.init_method) == ("torchrun", "gloo", "env://")
    assert (ctx.master_addr, ctx.master_port) == ("10.0.0.1", 29500)
    assert not ctx.is_main


def test_torchrun_with_cuda_picks_gpu_of_local_rank_and_nccl():
    ctx = resolve_context(opts(), TORCHRUN, cuda_device_count=2)
    assert (ctx.device, ctx.backend) == ("cuda:1", "nccl")


def test_legacy_launch_flags_and_local_rank_argument():
    env = {k: v for k, v in TORCHRUN.items() if k != "LOCAL_RANK"}
    run_opts = opts("--local-rank=1", "--distributed_launch", "--distributed_backend=gloo")
    ctx = resolve_context(run_opts, env, 0)
    assert (ctx.local_rank, ctx.launcher, ctx.backend) == (1, "torch.distributed.launch", "gloo")


def test_legacy_flags_without_launcher_environment_is_an_error():
    with pytest.raises(DistributedError, match="RANK and WORLD_SIZE"):
        resolve_context(opts("--distributed_launch"), {}, 0)


def test_explicit_flags_take_precedence_over_torchrun_and_slurm():
    env = {**TORCHRUN, **SLURM, "MASTER_PORT": "1234"}
    ctx = resolve_context(opts("--worker-id", "1", "--num-workers", "2"), env, cuda_device_count=0)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.launcher) == (1, 2, 1, "explicit")
    assert ctx.init_method == "env://" and ctx.master_port == 1234


def test_explicit_flags_with_file_protocol_and_device_id():
    run_opts = opts("--worker-id", "0", "--num-workers", "2", "--device-id", "1", "--sync-protocol",
                    "file:///shared/rdv")
    ctx = resolve_context(run_opts, {}, cuda_device_count=2)
    assert (ctx.init_method, ctx.device, ctx.local_rank) == ("file:///shared/rdv", "cuda:1", 1)
    assert ctx.master_port is None


@pytest.mark.parametrize("flags, message", [
    (("--worker-id", "0"), "needs --num-workers"),
    (("--worker-id", "2", "--num-workers", "2"), "outside"),
    (("--worker-id", "0", "--num-workers", "2"), "MASTER_PORT"),
    (("--worker-id", "0", "--num-workers", "2", "--sync-protocol", "nfs://x"), "unknown protocol 'nfs://x'"),
    (("--worker-id", "0", "--num-workers", "2", "--sync-protocol", "file://"), "names no file"),
])
def test_bad_explicit_flags_name_the_flag(flags, message):
    with pytest.raises(DistributedError, match=message):
        resolve_context(opts(*flags), {}, cuda_device_count=0)


def test_slurm_step_environment_with_nodelist_and_job_port():
    ctx = resolve_context(opts(), SLURM, cuda_device_count=0)
    assert (ctx.rank, ctx.world_size, ctx.local_rank, ctx.node_rank, ctx.launcher) == (2, 4, 0, 1, "slurm")
    assert (ctx.master_addr, ctx.master_port) == ("gpu07", SLURM_PORT_BASE + 4242)


def test_slurm_batch_shell_without_step_is_one_process():
    batch_shell = {k: v for k, v in SLURM.items() if k not in ("SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS")}
    batch_shell["SLURM_PROCID"] = "0"
    ctx = resolve_context(opts(), batch_shell, cuda_device_count=0)
    assert (ctx.world_size, ctx.launcher) == (1, "single")


def test_slurm_master_from_environment_wins_and_one_gpu_per_task():
    env = {**SLURM, "MASTER_ADDR": "login1", "MASTER_PORT": "3333", "SLURM_LOCALID": "3"}
    ctx = resolve_context(opts(), env, cuda_device_count=1)  # --gpus-per-task=1: each task sees one GPU
    assert (ctx.master_addr, ctx.master_port, ctx.device) == ("login1", 3333, "cuda:0")


def test_torchrun_environment_wins_over_slurm():
    ctx = resolve_context(opts(), {**SLURM, **TORCHRUN}, cuda_device_count=0)
    assert ctx.launcher == "torchrun" and ctx.rank == 3


@pytest.mark.parametrize("env, message", [
    ({"RANK": "4", "WORLD_SIZE": "4", "MASTER_PORT": "1"}, "RANK=4 is outside"),
    ({"RANK": "x", "WORLD_SIZE": "4"}, "RANK='x' is not an integer"),
    ({"RANK": "0", "WORLD_SIZE": "2"}, "MASTER_PORT"),
    ({**SLURM, "SLURM_PROCID": "9"}, "SLURM_PROCID=9 is outside"),
    ({**SLURM, "SLURM_JOB_NODELIST": "gpu[07-"}, "cannot parse"),
])
def test_bad_environment_names_the_variable(env, message):
    with pytest.raises(DistributedError, match=message):
        resolve_context(opts(), env, cuda_device_count=0)


def test_device_and_backend_errors():
    with pytest.raises(DistributedError, match="GPU 3 does not exist"):
        resolve_context(opts("--worker-id", "0", "--num-workers", "1", "--device-id", "3"), {}, 2)
    with pytest.raises(DistributedError, match="CUDA is not available"):
        resolve_context(opts("--device", "cuda"), {}, 0)
    with pytest.raises(DistributedError, match="nccl needs CUDA"):
        resolve_context(opts("--distributed_backend", "nccl"), TORCHRUN, 0)
    with pytest.raises(DistributedError, match="local rank 2: GPU 2 does not exist"):
        resolve_context(opts(), {**TORCHRUN, "LOCAL_RANK": "2"}, cuda_device_count=2)


def test_timeout_comes_from_run_options():
    assert resolve_context(opts("--distributed_timeout_s", "12"), TORCHRUN, 0).timeout_s == 12.0


def test_yaml_num_workers_is_not_a_process_count():
    # e.g. data-loading workers from a recipe's YAML, not set on the command line
    run_opts = dataclasses.replace(opts(), num_workers=4)
    assert run_opts.num_workers == 4 and not is_spawn_request(run_opts)
    assert resolve_context(run_opts, {}, 0).world_size == 1


def test_spawn_request():
    assert is_spawn_request(opts("--num-workers", "2"))
    assert not is_spawn_request(opts("--num-workers", "2", "--worker-id", "0"))
    assert not is_spawn_request(opts("--num-workers", "1"))
    assert resolve_context(opts("--num-workers", "1"), {}, 0).world_size == 1


@pytest.mark.parametrize("nodelist, hosts", [
    ("node1", ["node1"]),
    ("node[1-2]", ["node1", "node2"]),
    ("gpu[01-03,7],cpu1", ["gpu01", "gpu02", "gpu03", "gpu7", "cpu1"]),
    ("a[9-10]-ib", ["a9-ib", "a10-ib"]),
])
def test_expand_nodelist(nodelist, hosts):
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("bad", ["", "node[1-x]", "node[", "x]"])
def test_expand_nodelist_rejects_bad_lists(bad):
    with pytest.raises(DistributedError, match="node list"):
        expand_nodelist(bad)


def test_slurm_port_is_stable_and_in_range():
    assert slurm_master_port("77") == slurm_master_port("77")
    assert SLURM_PORT_BASE <= slurm_master_port("987654321") < 65536
