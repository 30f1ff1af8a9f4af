"""Ctrl-C while training: the first one saves at the next batch boundary and stops (a rerun resumes mid-epoch
and ends where an uninterrupted run ends); a second one stops at once without saving."""

from __future__ import annotations

import os
import runpy
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from speechkit.errors import EXIT_INTERRUPTED

# At batch `pause_at` the script tells the test (a marker file) and waits for the test's Ctrl-C.
TRAIN_SCRIPT = textwrap.dedent("""
    import logging, os, sys, time
    import torch
    import speechkit
    from speechkit.checkpoints import Checkpointer, EpochCounter
    from speechkit.engine.schedulers import WarmupCosineScheduler
    from speechkit.stage import Stage

    logging.basicConfig(level=logging.INFO)
    out, pause_at = sys.argv[1], int(sys.argv[2])
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(40, 6), torch.randn(40, 1))
    model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))

    class Regression(speechkit.Brain):
        def compute_forward(self, batch, stage):
            self.batches_seen = getattr(self, "batches_seen", 0) + (stage == Stage.TRAIN)
            if stage == Stage.TRAIN and self.batches_seen == pause_at and not os.path.exists(out + ".paused"):
                open(out + ".paused", "w").close()
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not os.path.exists(out + ".never"):
                    if self.preemption.local_request() and not os.path.exists(out + ".wait_for_second"):
                        break
                    time.sleep(0.01)
            return self.modules.model(batch[0])

        def compute_objectives(self, predictions, batch, stage):
            return torch.nn.functional.mse_loss(predictions, batch[1])

    hparams = {"lr_scheduler": WarmupCosineScheduler(0.05, warmup_steps=3, total_steps=30),
               "grad_accumulation_factor": 2, "noprogressbar": True}
    brain = Regression({"model": model}, lambda p: torch.optim.Adam(p, lr=0.05), hparams,
                       checkpointer=Checkpointer(out + ".ckpt", {"model": model}))
    collate = torch.utils.data.default_collate
    brain.fit(EpochCounter(3), data, data, train_loader_kwargs={"batch_size": 4, "shuffle": True,
              "collate_fn": collate}, valid_loader_kwargs={"batch_size": 8, "collate_fn": collate})
    torch.save(model.state_dict(), out)
""")


def _start(script: Path, out: Path, pause_at: int, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    with open(log, "w") as stream:
        return subprocess.Popen([sys.executable, str(script), str(out), str(pause_at)], stdout=stream,
                                stderr=subprocess.STDOUT, text=True, env=env)


def _wait_for(path: Path, process: subprocess.Popen, text: str = "", timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return
        assert process.poll() is None, f"the run ended before {path.name} said {text!r}"
        time.sleep(0.02)
    process.kill()
    raise AssertionError(f"{path} never appeared / said {text!r}")


@pytest.mark.slow
def test_first_ctrl_c_saves_mid_epoch_and_a_rerun_matches_an_uninterrupted_run(tmp_path, monkeypatch):
    script = tmp_path / "train.py"
    script.write_text(TRAIN_SCRIPT)
    monkeypatch.setattr(sys, "argv", [str(script), str(tmp_path / "straight.pt"), "0"])
    runpy.run_path(str(script), run_name="__main__")

    out, log = tmp_path / "resumed.pt", tmp_path / "first.log"
    # Batch 15 of 10-batch epochs: epoch 2, in the middle of an accumulation cycle.
    process = _start(script, out, 15, log)
    _wait_for(Path(f"{out}.paused"), process)
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) == EXIT_INTERRUPTED, log.read_text()
    said = log.read_text()
    assert "Traceback" not in said and "KeyboardInterrupt" not in said, said
    assert "Ctrl-C: saving a checkpoint at the next batch boundary" in said, said
    assert "Interrupted (Ctrl-C): checkpoint saved at epoch 2, batch 6" in said, said
    assert not out.exists()
    assert list(Path(f"{out}.ckpt").glob("CKPT+*")), "the interrupted run saved no checkpoint"

    rerun = _start(script, out, 15, tmp_path / "rerun.log")
    assert rerun.wait(timeout=120) == 0, (tmp_path / "rerun.log").read_text()
    expected = torch.load(tmp_path / "straight.pt", weights_only=True)
    actual = torch.load(out, weights_only=True)
    for name in expected:
        assert torch.equal(expected[name], actual[name]), name


@pytest.mark.slow  # an interpreter starts and trains
def test_second_ctrl_c_stops_at_once_without_saving(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN_SCRIPT)
    out, log = tmp_path / "model.pt", tmp_path / "run.log"
    Path(f"{out}.wait_for_second").touch()  # the paused batch stays paused after the first Ctrl-C
    process = _start(script, out, 3, log)
    _wait_for(Path(f"{out}.paused"), process)
    process.send_signal(signal.SIGINT)
    _wait_for(log, process, "press Ctrl-C again")
    process.send_signal(signal.SIGINT)
    returncode = process.wait(timeout=10)
    assert returncode in (-signal.SIGINT, 128 + signal.SIGINT), log.read_text()
    assert "second Ctrl-C" in log.read_text()
    assert not list(Path(f"{out}.ckpt").glob("CKPT+*")), "a second Ctrl-C must not wait for a save"
