"""Resuming with other hparams: the optimizer follows --resume_optimizer_hparams; its class must match."""

from __future__ import annotations

import re

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.engine.resume import optimizer_hyperparameters, reconcile_optimizers
from speechkit.errors import CheckpointError, RunOptionsError
from speechkit.experiment.run_options import parse_arguments


class Regression(Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])


DATA = torch.utils.data.TensorDataset(torch.randn(8, 3), torch.randn(8, 1))
LOADER = {"batch_size": 4, "collate_fn": torch.utils.data.default_collate}


def run(folder, epochs, make_optimizer, run_opts=None) -> Brain:
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    brain = Regression({"model": model}, make_optimizer, None, {"noprogressbar": True, **(run_opts or {})},
                       Checkpointer(folder, {"model": model}))
    brain.fit(EpochCounter(epochs), DATA, train_loader_kwargs=LOADER)
    return brain


def adamw(lr, weight_decay=0.01):
    return lambda params: torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def test_by_default_the_checkpoint_values_are_kept_and_every_difference_is_logged_once(tmp_path, caplog):
    run(tmp_path, 1, adamw(0.1))
    resumed = run(tmp_path, 2, adamw(0.05, weight_decay=0.2))
    group = resumed.optimizer.param_groups[0]
    assert (group["lr"], group["weight_decay"]) == (0.1, 0.01)
    lines = [r.getMessage() for r in caplog.records if "other optimizer hyperparameters" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "optimizer lr: checkpoint 0.1, hparams 0.05" in lines[0]
    assert "optimizer weight_decay: checkpoint 0.01, hparams 0.2" in lines[0]
    assert "the checkpoint's values are kept (--resume_optimizer_hparams checkpoint)" in lines[0]
    assert re.search(r"Resuming from \S*CKPT\+", lines[0])


def test_the_hparams_values_apply_when_asked(tmp_path, caplog):
    run(tmp_path, 1, adamw(0.1))
    resumed = run(tmp_path, 2, adamw(0.05), {"resume_optimizer_hparams": "hparams"})
    assert resumed.optimizer.param_groups[0]["lr"] == 0.05
    assert resumed.optimizer.state_dict()["state"][0]["step"] == 4  # the moments were still recovered
    assert "the hparams' values apply (--resume_optimizer_hparams hparams)" in caplog.text


def test_same_hyperparameters_log_nothing(tmp_path, caplog):
    run(tmp_path, 1, adamw(0.1))
    run(tmp_path, 2, adamw(0.1))
    assert "other optimizer hyperparameters" not in caplog.text


def test_the_option_is_a_checked_run_option():
    assert parse_arguments(["hp.yaml", "--resume_optimizer_hparams", "hparams"])[1].resume_optimizer_hparams \
        == "hparams"
    with pytest.raises(RunOptionsError, match="resume_optimizer_hparams' must be one of checkpoint, hparams"):
        parse_arguments(["hp.yaml", "--resume_optimizer_hparams", "yaml"])


def test_another_optimizer_class_stops_at_recovery_naming_the_checkpoint_and_both_classes(tmp_path):
    run(tmp_path, 1, adamw(0.1))
    refusal = r"CKPT\+\S+: 'optimizer' was saved from torch.optim.adamw.AdamW but this run's 'optimizer' is "
    with pytest.raises(CheckpointError, match=refusal + "torch.optim.sgd.SGD") as refused:
        run(tmp_path, 2, lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9))
    assert str(tmp_path) in str(refused.value)


def test_reconcile_handles_several_groups_and_tuples():
    weights, bias = torch.nn.Parameter(torch.zeros(2)), torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([{"params": [weights]}, {"params": [bias], "lr": 0.5}], lr=0.1)
    wanted = optimizer_hyperparameters({"optimizer": optimizer})
    optimizer.param_groups[1]["betas"] = (0.8, 0.9)
    reconcile_optimizers({"optimizer": optimizer}, wanted, "hparams", "CKPT+x")
    assert optimizer.param_groups[1]["betas"] == (0.9, 0.999) and optimizer.param_groups[1]["lr"] == 0.5


def test_the_running_loss_of_every_saved_rank_survives_a_world_size_change():
    def saved(loss_sum, items):
        stats = {"loss_sum": loss_sum, "items": items, "batches": 2, "elapsed": items / 4}
        return {"optimizer_steps": 3, "train_position": 3, "train_stats": stats, "optimization": {}}

    states = [saved(2.0, 4), saved(4.0, 4)]
    brains = [Regression({"model": torch.nn.Linear(3, 1)}) for _ in range(3)]
    for rank, brain in enumerate(brains):
        brain.load_process_states(states, rank, world_size=3)
        assert brain.train_position == 3
    parts = [(b.train_stats.loss_sum, b.train_stats.items) for b in brains]
    assert parts == [(6.0, 8), (0.0, 0), (0.0, 0)]  # the epoch's average over all items is unchanged
    brains[1].load_process_states(states, 1, world_size=2)
    assert (brains[1].train_stats.loss_sum, brains[1].train_stats.items) == (4.0, 4)


def test_under_a_scheduler_lr_is_left_to_it(tmp_path, caplog):
    from speechkit.engine.schedulers import WarmupCosineScheduler

    def scheduled(folder, epochs, peak, weight_decay):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1)
        hparams = {"lr_scheduler": WarmupCosineScheduler(peak, warmup_steps=1, total_steps=8)}
        brain = Regression({"model": model}, adamw(peak, weight_decay), hparams, {"noprogressbar": True},
                           Checkpointer(folder, {"model": model}))
        brain.fit(EpochCounter(epochs), DATA, train_loader_kwargs=LOADER)

    scheduled(tmp_path, 1, 0.1, 0.01)
    scheduled(tmp_path, 2, 0.1, 0.01)  # the saved lr is the scheduled one, not 0.1: no difference to report
    assert "other optimizer hyperparameters" not in caplog.text
    scheduled(tmp_path, 3, 0.1, 0.02)
    assert "(optimizer weight_decay: checkpoint 0.01, hparams 0.02)" in caplog.text
