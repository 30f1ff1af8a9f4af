"""Early stopping: patience on a validation value, the best checkpoint kept, resumable, clear errors."""

from __future__ import annotations

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.engine.early_stopping import EarlyStopping
from speechkit.errors import RunOptionsError
from speechkit.experiment.run_options import parse_arguments
from speechkit.stage import Stage

COLLATE = torch.utils.data.default_collate
LOADER = {"batch_size": 4, "shuffle": False, "collate_fn": COLLATE}


def dataset(items=8):
    generator = torch.Generator().manual_seed(1)
    return torch.utils.data.TensorDataset(torch.randn(items, 3, generator=generator),
                                          torch.randn(items, 1, generator=generator))


class Scripted(Brain):
    """A regression whose validation 'score' follows a script, one value per epoch."""

    script: list = []

    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return torch.nn.functional.mse_loss(predictions, batch[1])

    def on_stage_end(self, stage, stage_loss, epoch=None):
        if stage is Stage.VALID:
            self.valid_epochs.append(epoch)
            return {"score": self.script[epoch - 1]}
        return None


def make_brain(tmp_path, argv, script):
    _, run_opts, _ = parse_arguments(["hp.yaml", "--noprogressbar", *argv])
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    checkpointer = Checkpointer(tmp_path / "save", {"model": model})
    brain = Scripted({"model": model}, lambda p: torch.optim.SGD(p, lr=0.01), {}, run_opts, checkpointer)
    brain.script, brain.valid_epochs = script, []
    return brain


def test_training_stops_after_patience_epochs_without_improvement_and_keeps_the_best_epoch(tmp_path):
    # The score improves until epoch 3, then not by more than 0.5 for two epochs: stop after epoch 5.
    script = [9.0, 7.0, 5.0, 4.7, 5.3, 1.0, 1.0, 1.0, 1.0, 1.0]
    argv = ["--early_stopping_patience", "2", "--early_stopping_key", "score", "--early_stopping_min_delta",
            "0.5"]
    brain = make_brain(tmp_path, argv, script)
    brain.fit(EpochCounter(10), dataset(), dataset(), LOADER, LOADER)
    assert brain.valid_epochs == [1, 2, 3, 4, 5]
    assert (brain.early_stopping.best_epoch, brain.early_stopping.best) == (3, 5.0)
    kept = {c.info["epoch"] for c in brain.checkpointer.list_checkpoints()}
    assert 3 not in kept and 4 in kept  # the lowest score (4.7, though not lower by min_delta), the newest
    assert brain.checkpointer.find_checkpoint(min_key="score").info["epoch"] == 4


def test_without_the_option_training_runs_to_the_epoch_limit(tmp_path):
    brain = make_brain(tmp_path, [], [5.0, 6.0, 7.0, 8.0])
    brain.fit(EpochCounter(4), dataset(), dataset(), LOADER, LOADER)
    assert brain.valid_epochs == [1, 2, 3, 4] and brain.early_stopping is None


def test_max_mode_and_a_resumed_run_counts_the_epochs_of_the_first(tmp_path):
    script = [0.1, 0.5, 0.4, 0.3, 0.2, 0.9]
    argv = ["--early_stopping_patience", "3", "--early_stopping_key", "score", "--early_stopping_mode", "max"]
    first = make_brain(tmp_path, argv, script)
    first.fit(EpochCounter(3), dataset(), dataset(), LOADER, LOADER)  # stopped by the epoch limit at 3
    assert first.early_stopping.epochs_without_improvement == 1
    resumed = make_brain(tmp_path, argv, script)
    resumed.fit(EpochCounter(6), dataset(), dataset(), LOADER, LOADER)
    assert resumed.valid_epochs == [4, 5]  # epochs 3, 4, 5 did not beat epoch 2's 0.5
    assert resumed.checkpointer.find_checkpoint(max_key="score").meta["score"] == 0.5


def test_an_unknown_key_and_a_missing_validation_set_are_named(tmp_path):
    brain = make_brain(tmp_path, ["--early_stopping_patience", "1", "--early_stopping_key", "WER"], [1.0])
    with pytest.raises(RunOptionsError, match=r"early_stopping_key.*no value 'WER' \(it gives: loss, score"):
        brain.fit(EpochCounter(2), dataset(), dataset(), LOADER, LOADER)
    brain = make_brain(tmp_path / "b", ["--early_stopping_patience", "1"], [1.0])
    with pytest.raises(RunOptionsError, match="needs a valid_set"):
        brain.fit(EpochCounter(2), dataset(), None, LOADER)
    with pytest.raises(RunOptionsError, match="at least 1"):
        EarlyStopping(0)
