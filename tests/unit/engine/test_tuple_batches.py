"""Datasets of tuples (``TensorDataset``) through the default collate, and the epoch in the loaders' logs."""
from __future__ import annotations

import logging

import pytest
import torch

from speechkit.brain import Brain
from speechkit.checkpoints import EpochCounter
from speechkit.data.batch import PaddedBatch
from speechkit.errors import DataError


def toy_set(items: int, seed: int) -> torch.utils.data.TensorDataset:
    """(8,) features whose mean depends on one of 3 labels: a classifier learns it in a few epochs."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (items,), generator=generator)
    features = torch.randn(items, 8, generator=generator) + 2.0 * torch.nn.functional.one_hot(labels, 8)
    return torch.utils.data.TensorDataset(features, labels)


class Classifier(Brain):
    def compute_forward(self, batch, stage):
        features, _ = batch[0]  # a padded field: (data, lengths)
        return self.modules.model(features)

    def compute_objectives(self, logits, batch, stage):
        _, labels = batch  # a batch of tuples unpacks like one
        return torch.nn.functional.cross_entropy(logits, labels)


def make_classifier() -> Classifier:
    torch.manual_seed(0)
    return Classifier({"model": torch.nn.Linear(8, 3)}, lambda p: torch.optim.SGD(p, lr=0.5), None,
                      {"noprogressbar": True})


def test_fit_and_evaluate_take_a_tensor_dataset_with_the_default_collate():
    brain = make_classifier()
    train, valid = toy_set(96, 0), toy_set(32, 1)
    before = brain.evaluate(valid, test_loader_kwargs={"batch_size": 8})
    brain.fit(EpochCounter(3), train, valid, train_loader_kwargs={"batch_size": 8},
              valid_loader_kwargs={"batch_size": 8})
    after = brain.evaluate(valid, test_loader_kwargs={"batch_size": 8})
    assert after < 0.5 * before


def test_a_batch_of_tuples_holds_its_fields_by_position():
    batch = PaddedBatch([(torch.ones(2), torch.tensor(3), "a"), (torch.ones(4), torch.tensor(5), "b")])
    features, labels, names = batch
    assert features.data.shape == (2, 4) and features.lengths.tolist() == [2, 4]
    assert labels.tolist() == [3, 5] and names == ["a", "b"] and batch[1] is labels and len(batch) == 2
    assert list(PaddedBatch([{"x": torch.ones(1)}])) == ["x"]  # named fields iterate like a dict's keys


@pytest.mark.parametrize("items, message", [
    ([torch.ones(3), torch.ones(3)], r"item 0 is a Tensor; an item must be a dict of named fields .* or a "
                                     r"tuple or list of fields .* pass a collate_fn"),
    ([(torch.ones(3), 1), (torch.ones(3),)], r"item 1 is a tuple of 1 fields but item 0 is a tuple of 2"),
    ([{"x": torch.ones(1)}, (torch.ones(1),)], r"item 1 is a tuple of 1 fields; an item must be a dict"),
])
def test_items_of_another_kind_are_refused_saying_what_an_item_must_be(items, message):
    with pytest.raises(DataError, match=message):
        PaddedBatch(items)


def test_the_loaders_log_the_epoch_they_serve(caplog):
    brain = make_classifier()
    with caplog.at_level(logging.INFO, logger="speechkit.data.loader"):
        brain.fit(EpochCounter(2), toy_set(16, 0), toy_set(8, 1), train_loader_kwargs={"batch_size": 8},
                  valid_loader_kwargs={"batch_size": 8})
        brain.evaluate(toy_set(8, 2), test_loader_kwargs={"batch_size": 8})
    lines = [r.getMessage().split(":")[0] for r in caplog.records if r.name == "speechkit.data.loader"]
    assert lines == ["train epoch 1", "valid epoch 1", "train epoch 2", "valid epoch 2", "test"]


def test_fit_and_evaluate_scores_the_test_set_named_by_the_yaml():
    from speechkit.errors import HparamsError
    from speechkit.experiment.recipe import fit_and_evaluate

    brain = make_classifier()
    data = {"train": toy_set(48, 0), "test": toy_set(16, 1), "test_engine": toy_set(16, 2)}
    hparams = {"epoch_counter": EpochCounter(1), "train_loader_kwargs": {"batch_size": 8},
               "eval_loader_kwargs": {"batch_size": 8}}
    engine_loss = fit_and_evaluate(brain, {**hparams, "test_set": "test_engine"}, data)
    assert engine_loss == brain.evaluate(data["test_engine"], test_loader_kwargs={"batch_size": 8})
    assert engine_loss != brain.evaluate(data["test"], test_loader_kwargs={"batch_size": 8})
    with pytest.raises(HparamsError, match=r"test_set: no split 'test_other' \(the splits are \['test', "
                                           r"'test_engine', 'train'\]\)"):
        fit_and_evaluate(brain, {**hparams, "test_set": "test_other"}, data)
