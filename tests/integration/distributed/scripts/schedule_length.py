"""Fit a tiny model with a schedule whose length comes from the engine; write what it got.

Usage: ``torchrun --nproc_per_node N schedule_length.py OUT_DIR cosine|tristage [run options]``. Each rank
writes ``OUT_DIR/rank<R>.json`` with the accumulation factor, the total optimizer steps Brain counted, the
schedule's ``total_steps`` and last rate, the optimizer steps really made, and the weights: the frozen
module's (under DDP only the trainable one is wrapped) and the head's.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

import speechkit
from speechkit.checkpoints import EpochCounter
from speechkit.engine.schedulers import TriStageScheduler, WarmupCosineScheduler


class Mean(speechkit.Brain):
    def compute_forward(self, batch, stage):
        return self.modules.head(self.modules.frozen(batch[0]))

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])


def main(argv):
    out, schedule = Path(argv[0]), argv[1]
    _, run_opts, _ = speechkit.parse_arguments(["unused.yaml", *argv[2:]])
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(24, 3, generator=generator), torch.randn(24, 1))
    scheduler = (WarmupCosineScheduler(lr_peak=0.1, warmup_steps=2) if schedule == "cosine"
                 else TriStageScheduler(lr_peak=0.1, phase_ratio=(0.25, 0.25, 0.5)))
    torch.manual_seed(0)
    modules = {"frozen": torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Dropout(0.5)),
               "head": torch.nn.Linear(4, 1)}
    frozen_before = [p.clone() for p in modules["frozen"].parameters()]
    brain = Mean(modules, lambda p: torch.optim.SGD(p, lr=0.1), {"noprogressbar": True}, run_opts,
                 lr_scheduler=scheduler, trainable_modules=["head"])
    loader_kwargs = {"batch_size": 2, "collate_fn": torch.utils.data.default_collate}
    brain.fit(EpochCounter(2), data, train_loader_kwargs=loader_kwargs)
    record = {"accumulation": brain.optimization.accumulation, "counted": brain.total_optimizer_steps,
              "schedule_total": scheduler.total_steps, "last_lr": scheduler.current_lr(),
              "made": brain.optimizer_steps,
              "frozen_unchanged": all(torch.equal(a, b) for a, b in zip(frozen_before,
                                                                         modules["frozen"].parameters())),
              "head": [p.tolist() for p in modules["head"].parameters()]}
    (out / f"rank{brain.context.rank}.json").write_text(json.dumps(record))


if __name__ == "__main__":
    main(sys.argv[1:])
