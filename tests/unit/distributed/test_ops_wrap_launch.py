"""One-process behaviour of the collectives, the module wrappers, the launcher's policy and the watchdog."""
from __future__ import annotations

import io
import sys
import time
import warnings

import pytest
import torch

from speechkit import distributed as dist
from speechkit.distributed import launch
from speechkit.distributed.env import DistributedContext
from speechkit.distributed.failfast import EXIT_PEER_FAILED, FailFast
from speechkit.errors import EXIT_PREEMPTED, DistributedError
from speechkit.experiment.run_options import RunOptions, parse_arguments


@pytest.fixture(autouse=True)
def _no_outer_launcher(monkeypatch):
    """These tests are about one process even if the test run itself sits inside a launcher."""
    for key in ("WORLD_SIZE", "RANK", "SLURM_STEP_ID", "SLURM_PROCID", "SPEECHKIT_SPAWNED_WORKER"):
        monkeypatch.delenv(key, raising=False)


def test_context_before_init_is_one_process():
    ctx = dist.context()
    assert (ctx.rank, ctx.world_size, ctx.is_main, ctx.is_distributed) == (0, 1, True, False)
    assert dist.is_main() and dist.rank() == 0 and dist.world_size() == 1


def test_collectives_in_one_process():
    calls = []
    assert dist.run_on_main(lambda x: calls.append(x) or "done", args=("main",),
                            post_fn=lambda: calls.append("post")) == "done"
    assert calls == ["main", "post"]
    assert dist.broadcast_object({"a": 1}) == {"a": 1}
    assert dist.all_gather_object("x") == ["x"]
    assert dist.all_reduce(3, "max") == 3
    tensor = torch.tensor([1.0, 2.0])
    reduced = dist.all_reduce_sum(tensor)
    assert torch.equal(reduced, tensor) and reduced is not tensor
    dist.barrier()
    with pytest.raises(DistributedError, match="unknown op 'prod'"):
        dist.all_reduce(1, "prod")


def test_wrap_leaves_a_module_alone_in_one_process():
    layer = torch.nn.Linear(2, 2)
    assert dist.wrap_module(layer, DistributedContext(), RunOptions()) is layer
    with dist.no_sync(layer):
        pass


def test_data_parallel_flag_without_gpus_warns_and_keeps_one_device():
    layer = torch.nn.Linear(2, 2)
    with pytest.warns(UserWarning, match=r"no GPU in use; running on one device \(cpu\)"):
        wrapped = dist.wrap_module(layer, DistributedContext(device="cpu"),
                                   RunOptions(data_parallel_backend=True))
    assert wrapped is layer


def test_data_parallel_with_several_processes_is_an_error():
    ctx = DistributedContext(rank=0, world_size=2, backend="gloo", launcher="torchrun")
    with pytest.raises(DistributedError, match="cannot be combined with several processes"):
        dist.wrap_module(torch.nn.Linear(2, 2), ctx, RunOptions(data_parallel_backend=True))


def test_unwrap_removes_wrappers():
    layer = torch.nn.Linear(2, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wrapped = torch.nn.DataParallel(layer)
    assert dist.unwrap(wrapped) is layer and dist.unwrap(layer) is layer


def test_sync_batchnorm_in_one_process_warns():
    with pytest.warns(UserWarning, match="no effect in one process"):
        dist.wrap_module(torch.nn.BatchNorm1d(3), DistributedContext(), RunOptions(sync_batchnorm=True))


def test_worker_command_keeps_the_separator_and_parses_back():
    command = ["python", "train.py", "--num-workers", "2", "--", "hp.yaml", "--lr", "0.1"]
    worker = launch.worker_command(command, 1, device_id=1)
    hparams_file, run_opts, overrides = parse_arguments(worker[2:])
    assert (hparams_file, run_opts.worker_id, run_opts.device_id, overrides) == ("hp.yaml", 1, 1, {"lr": 0.1})
    assert launch.worker_command(["python", "t.py", "hp.yaml"], 0)[-2:] == ["--worker-id", "0"]


def test_describe_exit():
    assert launch.describe_exit(-9) == "was killed by signal SIGKILL"
    assert "another worker failed" in launch.describe_exit(EXIT_PEER_FAILED)


@pytest.mark.parametrize("codes, verdict, named", [
    ({0: 0, 1: 0}, 0, None),
    ({0: EXIT_PREEMPTED, 1: EXIT_PREEMPTED}, EXIT_PREEMPTED, None),
    ({0: EXIT_PEER_FAILED, 1: 1}, 1, "worker 1 exited with code 1"),
    ({0: -9, 1: EXIT_PEER_FAILED}, 1, "worker 0 was killed by signal SIGKILL"),
])
def test_launcher_verdict_names_the_first_hand_failure(codes, verdict, named):
    err = io.StringIO()
    launcher = launch._Launcher(io.StringIO(), err)
    assert launcher._verdict(codes) == verdict
    if named:
        assert f"FAILED: {named}" in err.getvalue()


CHILD = """
import sys, time
worker = int(sys.argv[sys.argv.index('--worker-id') + 1])
print(f'hello from {worker}', flush=True)
if worker == 1:
    sys.exit(3)
time.sleep(60)
"""


def test_spawn_stops_the_others_after_a_failure_and_names_it():
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    code = launch.spawn_local_workers(RunOptions(num_workers=2, device="cpu"), [sys.executable, "-c", CHILD],
                                      out=out, err=err, grace_s=0.5)
    assert code == 3
    assert time.monotonic() - started < 30
    assert "[worker 0] hello from 0" in out.getvalue() and "[worker 1] hello from 1" in out.getvalue()
    assert "FAILED: worker 1 exited with code 3" in err.getvalue()
    assert "worker 0 was killed by signal SIGTERM" in err.getvalue()


def test_spawn_reports_success():
    out, err = io.StringIO(), io.StringIO()
    code = launch.spawn_local_workers(RunOptions(num_workers=2), [sys.executable, "-c", "print('ok')"],
                                      out=out, err=err)
    assert code == 0 and out.getvalue().count("ok") == 2
    assert "worker 1 exited with code 0" in err.getvalue()


class _Left(Exception):
    pass


def _watchdog(tmp_path, rank, timeout_s=0.2):
    store = torch.distributed.FileStore(str(tmp_path / "store"), 2)
    watchdog = FailFast(store, rank=rank, world_size=2, run_token="t", timeout_s=timeout_s, heartbeat_s=0.04,
                        stream=io.StringIO())

    def leave(message):
        raise _Left(message)

    watchdog._leave = leave
    return watchdog


def test_first_recorded_failure_wins(tmp_path):
    first, second = _watchdog(tmp_path, 0), _watchdog(tmp_path, 1)
    assert first.record_failure("rank 0 failed: A") == "rank 0 failed: A"
    assert second.record_failure("rank 1 failed: B") == "rank 0 failed: A"
    assert second._failure() == "rank 0 failed: A"


def test_main_rank_declares_a_silent_rank_failed(tmp_path):
    main = _watchdog(tmp_path, 0, timeout_s=0.2)
    main._last_beats = {0: (-1, time.monotonic()), 1: (-1, time.monotonic())}
    main._check_heartbeats()  # rank 1 has never beaten: remembered now
    time.sleep(0.3)
    with pytest.raises(_Left, match="rank 1 failed: no sign of life"):
        main._check_heartbeats()


def test_heartbeats_keep_a_rank_alive(tmp_path):
    main, other = _watchdog(tmp_path, 0, timeout_s=0.3), _watchdog(tmp_path, 1)
    main._last_beats = {0: (-1, time.monotonic()), 1: (-1, time.monotonic())}
    for _ in range(5):
        other.store.add(f"{other.heartbeat_prefix}1", 1)
        main._check_heartbeats()
        time.sleep(0.1)
    assert main._failure() is None


@pytest.mark.parametrize("env", [{"WORLD_SIZE": "2", "RANK": "1"}, {"SPEECHKIT_SPAWNED_WORKER": "1"},
                                 {"SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "4", "SLURM_PROCID": "2"}])
def test_run_on_main_under_a_launcher_without_init_or_parsed_options_is_an_error(monkeypatch, env):
    from speechkit.distributed import runtime

    monkeypatch.setattr(runtime._Runtime, "context", None)  # other tests of this process may have run init
    monkeypatch.setattr(runtime._Runtime, "run_opts", None)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(DistributedError, match=r"before speechkit.distributed.init\(run_opts\).*parse_argum"):
        dist.run_on_main(print)


def test_parse_arguments_hands_only_the_process_command_line_to_the_runtime(monkeypatch):
    from speechkit.distributed import runtime

    monkeypatch.setattr(runtime._Runtime, "run_opts", None)
    monkeypatch.setattr(sys, "argv", ["train.py", "hp.yaml", "--device", "cpu", "--lr", "0.1"])
    parse_arguments(["other.yaml", "--device", "cpu"])  # some other command line: not this process's options
    assert runtime._Runtime.run_opts is None
    _, run_opts, _ = parse_arguments(sys.argv[1:])
    assert runtime._Runtime.run_opts is run_opts
    _, again, _ = parse_arguments()
    assert runtime._Runtime.run_opts is again and again.device == "cpu"


def test_parsed_options_initialise_the_context_implicitly_under_a_launcher(monkeypatch, tmp_path):
    """One worker of a one-process explicit launch: the first ``is_main`` joins the group, no init call."""
    from speechkit.distributed import runtime

    monkeypatch.setattr(runtime._Runtime, "context", None)
    monkeypatch.setattr(runtime._Runtime, "run_opts", None)
    monkeypatch.setenv("SPEECHKIT_SPAWNED_WORKER", "1")
    argv = ["--worker-id", "0", "--num-workers", "1", "--device", "cpu", "--", "hp.yaml"]
    monkeypatch.setattr(sys, "argv", ["train.py", *argv])
    parse_arguments(argv)
    assert not runtime.initialized()
    assert dist.run_on_main(lambda: "ran") == "ran"
    assert runtime.initialized() and dist.context().launcher == "explicit"  # from the parsed --worker-id
    runtime.shutdown()


def test_a_spawn_request_on_another_command_line_starts_nothing(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["pytest"])
    _, run_opts, _ = parse_arguments(["--num-workers", "2", "--", "hp.yaml"])
    assert run_opts.num_workers == 2 and run_opts.worker_id is None


PREEMPTIBLE_CHILD = """
import signal, sys, time
signal.signal(signal.SIGUSR1, lambda *a: sys.exit(75))
print('ready', flush=True)
time.sleep(60)
"""


def test_spawn_forwards_a_preemption_signal_and_exits_preempted():
    import os
    import signal
    import threading

    out, err = io.StringIO(), io.StringIO()

    def preempt_when_ready():
        deadline = time.monotonic() + 30
        while out.getvalue().count("ready") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGUSR1)

    threading.Thread(target=preempt_when_ready, daemon=True).start()
    previous = signal.getsignal(signal.SIGUSR1)
    code = launch.spawn_local_workers(RunOptions(num_workers=2), [sys.executable, "-c", PREEMPTIBLE_CHILD],
                                      out=out, err=err)
    assert code == EXIT_PREEMPTED, err.getvalue()
    assert "forwarding SIGUSR1 to the workers" in err.getvalue()
    assert signal.getsignal(signal.SIGUSR1) is previous  # the launcher's handler is gone afterwards


def test_a_later_init_with_other_options_warns_that_the_group_stays(monkeypatch, caplog):
    from speechkit.distributed import runtime

    env = {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    joined = DistributedContext(rank=0, world_size=2, backend="gloo", launcher="env", init_method="env://",
                                master_addr="127.0.0.1", master_port=29500, timeout_s=300.0)
    monkeypatch.setattr(runtime._Runtime, "context", joined)
    with caplog.at_level("WARNING", logger="speechkit.distributed.runtime"):
        assert dist.init(RunOptions(device="cpu"), environ=env) is joined
        assert not caplog.records
        assert dist.init(RunOptions(device="cpu", distributed_timeout_s=600), environ=env) is joined
    assert "timeout_s=600.0" in caplog.text and "command line" in caplog.text
