"""A tiny Brain recipe with dropout, for checking that a preempted run resumes every rank's random states.

Usage: ``torchrun --nproc_per_node=2 dropout_train.py OUT_DIR STOP_AT``. Rank 0 sends itself SIGTERM before
its training batch number ``STOP_AT`` (counted over epochs; 0: never) unless ``OUT_DIR/stopped`` exists, as a
preemption notice would. The main process writes the final weights to ``OUT_DIR/final.pt`` and the stage
summaries to ``OUT_DIR/train_log.txt``.

Dropout draws as many numbers as its input has elements, and the ranks' padded batches differ in length, so
the ranks' generators part ways after the first batch: a resume that gives every rank rank 0's states ends
with other weights than a run that never stopped.
"""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from tiny_train import build_dataset  # noqa: E402

import speechkit  # noqa: E402
from speechkit import distributed as dist  # noqa: E402
from speechkit.checkpoints import Checkpointer, EpochCounter  # noqa: E402


class DropoutBrain(speechkit.Brain):
    def compute_forward(self, batch, stage):
        out, stop_at = self.hparams.out, self.hparams.stop_at
        self.batches = getattr(self, "batches", 0) + 1
        marker = out / "stopped"
        if self.context.rank == 0 and self.batches == stop_at and not marker.exists():
            marker.write_text("")
            os.kill(os.getpid(), signal.SIGTERM)
        frames = self.modules.model(batch.x.data).squeeze(-1)  # (batch, time)
        lengths = batch.x.lengths
        valid = torch.arange(frames.shape[1])[None, :] < lengths[:, None]
        return (frames * valid).sum(dim=1) / lengths

    def compute_objectives(self, scores, batch, stage):
        return ((scores - batch.y.data) ** 2).mean()


def main(out: Path, stop_at: int) -> None:
    run_opts = speechkit.RunOptions(noprogressbar=True, distributed_backend="gloo")
    dist.init(run_opts)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, 1))
    epochs = EpochCounter(2)
    checkpointer = Checkpointer(out / "save", {"model": model, "epoch_counter": epochs})
    hparams = {"out": out, "stop_at": stop_at, "train_log": out / "train_log.txt"}
    brain = DropoutBrain({"model": model}, lambda p: torch.optim.Adam(p, lr=0.01), hparams, run_opts,
                         checkpointer)
    brain.fit(epochs, build_dataset(24, "tr"), train_loader_kwargs={"batch_size": 2, "shuffle": True})
    dist.run_on_main(lambda: torch.save(model.state_dict(), out / "final.pt"))


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
