"""The default CPU thread count: the cores the process may use (affinity, cgroup quota), shared by the
processes on the machine, less their loader workers and the load of other work; --num_threads and
OMP_NUM_THREADS override it; the count is logged when training starts."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest
import torch

import speechkit
from speechkit.checkpoints import EpochCounter
from speechkit.errors import RunOptionsError
from speechkit.experiment.run_options import parse_arguments
from speechkit.threads import available_cores, cgroup_cpu_quota, choose_threads, local_processes
from tests.helpers.processes import REPO


def test_the_cores_are_shared_by_processes_and_loader_workers():
    assert choose_threads(None, {}, 8, 1, 0, 0.0).threads == 8
    assert choose_threads(None, {}, 8, 2, 0, 0.0).threads == 4
    plan = choose_threads(None, {}, 8, 2, 2, 0.0)
    assert plan.threads == 2 and "2 loader workers each" in plan.reason
    assert choose_threads(None, {}, 2, 4, 3, 0.0).threads == 1  # never fewer than one


def test_other_work_on_the_machine_lowers_the_count():
    # The measured case: 2 cores, another job keeping both busy; 2 threads ran an epoch 12x slower than 1.
    plan = choose_threads(None, {}, 2, 1, 0, 2.3)
    assert plan.threads == 1 and "load 2.3" in plan.reason
    assert choose_threads(None, {}, 16, 1, 0, 4.0).threads == 12
    assert choose_threads(None, {}, 16, 4, 0, 4.0).threads == 3


def test_the_user_s_count_wins():
    assert choose_threads(3, {"OMP_NUM_THREADS": "5"}, 8, 1, 0, 0.0).threads == 3
    assert choose_threads(None, {"OMP_NUM_THREADS": "5"}, 8, 1, 0, 7.0).threads == 5
    assert choose_threads(None, {"OMP_NUM_THREADS": "junk"}, 8, 1, 0, 0.0).threads == 8


def test_cgroup_quota_v2_v1_and_unlimited(tmp_path):
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) == 1.5
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None
    (tmp_path / "cpu.max").unlink()
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("300000\n")
    (tmp_path / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpu_quota(str(tmp_path)) == 3.0
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_cpu_quota(str(tmp_path)) is None


def test_local_processes_from_the_launchers_environment():
    assert local_processes(8, {"LOCAL_WORLD_SIZE": "4"}) == 4
    assert local_processes(8, {"SLURM_NTASKS_PER_NODE": "2(x4)"}) == 2
    assert local_processes(3, {}) == 3


@pytest.mark.slow  # a fresh interpreter imports torch
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_a_process_bound_to_one_core_uses_one_thread():
    first_core = min(os.sched_getaffinity(0))
    script = (f"import os; os.sched_setaffinity(0, {{{first_core}}}); import torch; "
              "from speechkit.threads import available_cores, configure_threads; "
              "plan = configure_threads(None, 1, 0); print(available_cores(), plan.threads, "
              "torch.get_num_threads())")
    env = {key: value for key, value in os.environ.items()
           if key not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1", "1"]
    assert 1 <= available_cores() <= (os.cpu_count() or 1)


def test_fit_logs_the_count_and_num_threads_sets_it(caplog):
    class Regression(speechkit.Brain):
        def compute_forward(self, batch, stage):
            return self.modules.model(batch[0])

        def compute_objectives(self, predictions, batch, stage):
            return torch.nn.functional.mse_loss(predictions, batch[1])

    before = torch.get_num_threads()
    data = torch.utils.data.TensorDataset(torch.randn(4, 2), torch.randn(4, 1))
    brain = Regression({"model": torch.nn.Linear(2, 1)}, lambda p: torch.optim.SGD(p, lr=0.1),
                       {"num_threads": 1, "noprogressbar": True})
    try:
        with caplog.at_level(logging.INFO, logger="speechkit.threads"):
            brain.fit(EpochCounter(1), data,
                      train_loader_kwargs={"batch_size": 2, "collate_fn": torch.utils.data.default_collate})
        assert torch.get_num_threads() == 1
        assert "CPU threads per process: 1 (from --num_threads)" in caplog.text
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("flag, value, says", [
    ("--early_stopping_min_delta", "nan", "must be a finite number"),
    ("--early_stopping_min_delta", "-5", "must be at least 0"),
    ("--max_grad_norm", "inf", "must be a finite number"),
    ("--num_threads", "0", "must be at least 1"),
    ("--ckpt_keep", "0", "must be at least 1"),
])
def test_bad_run_option_values_are_refused_naming_the_option(flag, value, says):
    with pytest.raises(RunOptionsError, match=f"option '{flag[2:]}' {says}"):
        parse_arguments(["hp.yaml", flag, value])
