"""A training run stopped by SIGTERM mid-epoch and started again ends exactly where an unstopped run ends."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from speechkit.errors import EXIT_PREEMPTED

# Dropout, shuffling, Adam, a per-batch schedule and accumulation all carry state that a resume must restore.
TRAIN_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    import torch
    import speechkit
    from speechkit.checkpoints import Checkpointer, EpochCounter
    from speechkit.engine.schedulers import WarmupCosineScheduler

    out, stop_at = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(40, 6), torch.randn(40, 1))
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
    counter = EpochCounter(3)

    class Regression(speechkit.Brain):
        def compute_forward(self, batch, stage):
            self.batches_seen = getattr(self, "batches_seen", 0) + 1
            if self.batches_seen == stop_at and not os.path.exists(out + ".stopped"):
                open(out + ".stopped", "w").close()
                os.kill(os.getpid(), signal.SIGTERM)  # a preemption notice arriving mid-epoch
            return self.modules.model(batch[0])

        def compute_objectives(self, predictions, batch, stage):
            return torch.nn.functional.mse_loss(predictions, batch[1])

    hparams = {"lr_scheduler": WarmupCosineScheduler(0.05, warmup_steps=3, total_steps=30),
               "grad_accumulation_factor": 2, "noprogressbar": True}
    brain = Regression({"model": model}, lambda p: torch.optim.Adam(p, lr=0.05), hparams,
                       checkpointer=Checkpointer(out + ".ckpt", {"model": model}))
    collate = torch.utils.data.default_collate
    train_kwargs = {"batch_size": 4, "shuffle": True, "collate_fn": collate}
    brain.fit(counter, data, data, train_loader_kwargs=train_kwargs,
              valid_loader_kwargs={"batch_size": 8, "collate_fn": collate})
    torch.save(model.state_dict(), out)
""")


def _run(script: Path, out: Path, stop_at: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    return subprocess.run(
        [sys.executable, str(script), str(out), str(stop_at)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


@pytest.mark.slow
def test_sigterm_mid_epoch_then_rerun_matches_uninterrupted_run(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(TRAIN_SCRIPT)

    # The reference run happens in this process (one interpreter start less); same code, same seeds.
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "straight.pt"), "0"])
    runpy.run_path(str(script), run_name="__main__")

    # Batch 15 of 10-batch epochs: epoch 2, in the middle of an accumulation cycle.
    stopped = _run(script, tmp_path / "resumed.pt", stop_at=15)
    assert stopped.returncode == EXIT_PREEMPTED, stopped.stderr
    assert not (tmp_path / "resumed.pt").exists()
    checkpoints = list((tmp_path / "resumed.pt.ckpt").glob("CKPT+*"))
    assert checkpoints, "the preempted run saved no checkpoint"

    resumed = _run(script, tmp_path / "resumed.pt", stop_at=15)
    assert resumed.returncode == 0, resumed.stderr

    expected = torch.load(tmp_path / "straight.pt", weights_only=True)
    actual = torch.load(tmp_path / "resumed.pt", weights_only=True)
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name
