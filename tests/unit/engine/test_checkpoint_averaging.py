"""Checkpoint averaging: the N best by a key, floating tensors averaged, the CLI and Brain's run option."""
from __future__ import annotations

import json

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoint_averaging import average_state_dicts, best_checkpoints
from speechkit.checkpoints import Checkpointer
from speechkit.cli import main as speechkit_main
from speechkit.errors import CheckpointError


def save_three(folder):
    """Three checkpoints of a Linear+BatchNorm with WER 30, 10, 20 and weights filled with 1, 2, 3."""
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    checkpointer = Checkpointer(folder, {"model": model, "counter": torch.nn.Identity()})
    for fill, wer in ((1.0, 30.0), (2.0, 10.0), (3.0, 20.0)):
        with torch.no_grad():
            for p in model.parameters():
                p.fill_(fill)
        model[1].num_batches_tracked.fill_(int(fill))
        checkpointer.save_checkpoint(meta={"WER": wer})
    return model, checkpointer


def test_best_checkpoints_by_key_and_their_average(tmp_path):
    save_three(tmp_path)
    best = best_checkpoints(tmp_path, 2, min_key="WER")
    assert [c.meta["WER"] for c in best] == [10.0, 20.0]
    assert [c.meta["WER"] for c in best_checkpoints(tmp_path, 5, max_key="WER")] == [30.0, 20.0, 10.0]
    states = [torch.load(c.path / "model.ckpt", weights_only=True) for c in best]
    averaged = average_state_dicts(states)
    assert torch.equal(averaged["0.weight"], torch.full((2, 2), 2.5))
    assert int(averaged["1.num_batches_tracked"]) == 2  # an integer counter: the best checkpoint's
    with pytest.raises(CheckpointError, match="no checkpoint with the key 'CER'"):
        best_checkpoints(tmp_path, 2, min_key="CER")
    with pytest.raises(CheckpointError, match="different keys"):
        average_state_dicts([{"a": torch.zeros(1)}, {"b": torch.zeros(1)}])


def test_cli_writes_averaged_weights_and_their_sources(tmp_path, capsys):
    save_three(tmp_path / "save")
    out = tmp_path / "avg"
    assert speechkit_main(["average-checkpoints", str(tmp_path / "save"), "--num", "3", "--min-key", "WER",
                           "--output", str(out)]) == 0
    weights = torch.load(out / "model.ckpt", weights_only=True)
    assert torch.equal(weights["0.bias"], torch.full((2,), 2.0))
    record = json.loads((out / "averaged.json").read_text())
    assert record["modules"] == ["model"] and len(record["checkpoints"]) == 3  # the counter is no weights
    assert speechkit_main(["average-checkpoints", str(tmp_path / "none"), "--output", str(out)]) == 1
    assert "no checkpoint" in capsys.readouterr().err


class Identity(Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0])

    def compute_objectives(self, predictions, batch, stage):
        return predictions.sum() * 0


def test_evaluate_uses_the_average_of_the_best_checkpoints(tmp_path):
    model, checkpointer = save_three(tmp_path)
    brain = Identity({"model": model}, None, None, {"noprogressbar": True, "average_checkpoints": 2},
                     checkpointer)
    data = torch.utils.data.TensorDataset(torch.zeros(4, 2))
    brain.evaluate(data, min_key="WER", test_loader_kwargs={"batch_size": 2,
                                                            "collate_fn": torch.utils.data.default_collate})
    assert torch.equal(model[0].weight, torch.full((2, 2), 2.5))  # WER 10 (2.0) and 20 (3.0)
