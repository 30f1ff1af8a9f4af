"""A training set that yields no batch stops fit with an error naming the set, before any checkpoint."""
from __future__ import annotations

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.data.dataset import DynamicItemDataset
from speechkit.errors import DataError


class Regression(Brain):
    def compute_forward(self, batch, stage):
        return self.modules.model(batch[0] if isinstance(batch, (list, tuple)) else batch["x"])

    def compute_objectives(self, predictions, batch, stage):
        return predictions.pow(2).mean()


def _brain(tmp_path):
    model = torch.nn.Linear(3, 1)
    checkpointer = Checkpointer(tmp_path / "save", {"model": model})
    return Regression({"model": model}, lambda p: torch.optim.SGD(p, lr=0.1), None, {"noprogressbar": True},
                      checkpointer)


def test_empty_manifest_names_the_manifest_and_writes_no_checkpoint(tmp_path):
    manifest = tmp_path / "train.csv"
    manifest.write_text("id,x\n")
    train = DynamicItemDataset.from_csv(str(manifest))
    brain = _brain(tmp_path)
    with pytest.raises(DataError, match=rf"training set '{manifest}' \(DynamicItemDataset of 0 items\) "
                                        r"yielded no batch in epoch 1"):
        brain.fit(EpochCounter(2), train, None, {"batch_size": 2})
    assert brain.checkpointer.list_checkpoints() == []
    assert not any((tmp_path / "save").glob("CKPT*"))


def test_items_all_dropped_by_the_batching_is_an_error_too(tmp_path):
    data = torch.utils.data.TensorDataset(torch.randn(3, 3))
    brain = _brain(tmp_path)
    with pytest.raises(DataError, match=r"training set TensorDataset of 3 items yielded no batch in epoch 1"):
        brain.fit(EpochCounter(1), data, None, {"batch_size": 4, "drop_last": True})
    assert brain.checkpointer.list_checkpoints() == []
