"""The minimal recipe's LR schedule is sized by the engine: the cosine ends with the run however many
optimizer steps each process makes (half as many under torchrun with 2 processes)."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest

from speechkit.engine.schedulers import WarmupCosineScheduler
from tests.helpers.scripts import load_script

RECIPE = Path(__file__).parents[2] / "recipes" / "minimal"


@pytest.mark.parametrize("train_items", [256, 128])  # 64 steps (one process), 32 (each of 2 processes)
def test_the_schedule_ends_with_the_run(tmp_path, train_items, caplog):
    recipe = load_script(RECIPE / "train.py", "minimal_train")
    with caplog.at_level(logging.WARNING):
        brain = recipe.main([str(RECIPE / "hparams" / "train.yaml"), "--output_folder", str(tmp_path),
                             "--train_items", str(train_items), "--noprogressbar"])
    steps = 4 * train_items // 16  # 4 epochs of batches of 16
    assert brain.total_optimizer_steps == steps
    schedule = brain.lr_scheduler  # (evaluate recovered the best checkpoint's schedule position since)
    assert schedule.total_steps == steps + 1
    # The last update's rate is the end of the cosine (lr_min is 0): a few thousandths of the peak, not 64%.
    assert schedule.lr_for(steps - 1) < 0.01 * schedule.lr_peak
    assert "total_steps" not in caplog.text


def test_a_fixed_total_that_does_not_fit_the_run_is_reported(caplog):
    schedule = WarmupCosineScheduler(lr_peak=0.05, warmup_steps=10, total_steps=64)
    with caplog.at_level(logging.WARNING):
        schedule.set_total_steps(32)  # what the recipe's old fixed total met under torchrun
    assert schedule.total_steps == 64  # kept, as written
    assert "total_steps 64 but this run makes 32 optimizer steps" in caplog.text
    assert "64% of lr_peak" in caplog.text
