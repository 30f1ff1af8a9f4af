"""Checkpointer: complete round trips, selection and retention, and crash safety."""

from __future__ import annotations

import multiprocessing
import os
import signal

import pytest
import torch

from speechkit.checkpoints import Checkpointer, EpochCounter
from speechkit.errors import CheckpointError


class Notes:
    """A custom recoverable with its own file format."""

    def __init__(self, text=""):
        self.text = text

    def save_checkpoint(self, path):
        with open(path, "w") as handle:
            handle.write(self.text)

    def load_checkpoint(self, path):
        with open(path) as handle:
            self.text = handle.read()


def test_round_trip_of_modules_optimizers_custom_objects_and_meta(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    notes = Notes("hello")
    ckpt = Checkpointer(tmp_path, {"model": model, "optimizer": optimizer, "notes": notes})
    saved = ckpt.save_checkpoint(meta={"loss": torch.tensor(0.5)}, epoch=2, step=9)
    weights = {k: v.clone() for k, v in model.state_dict().items()}

    fresh_model = torch.nn.Linear(3, 2)
    fresh_opt = torch.optim.Adam(fresh_model.parameters(), lr=0.1)
    fresh_notes = Notes()
    found = Checkpointer(
        tmp_path, {"model": fresh_model, "optimizer": fresh_opt, "notes": fresh_notes}
    ).recover_if_possible()
    assert found.path == saved.path and found.meta == {"loss": 0.5}
    assert found.info["epoch"] == 2 and found.info["step"] == 9 and found.end_of_epoch
    assert all(torch.equal(weights[k], v) for k, v in fresh_model.state_dict().items())
    assert fresh_opt.state_dict()["state"][0]["step"] == 1
    assert fresh_notes.text == "hello"


def test_keeps_best_by_key_plus_most_recent(tmp_path):
    ckpt = Checkpointer(tmp_path, {"counter": EpochCounter(9)})
    for loss in (0.9, 0.2, 0.5, 0.3, 0.8):
        ckpt.save_and_keep_only(meta={"loss": loss}, min_keys=["loss"], num_to_keep=2)
    kept = sorted(c.meta["loss"] for c in ckpt.list_checkpoints())
    assert kept == [0.2, 0.3, 0.8]  # two best, and the newest
    assert ckpt.find_checkpoint(min_key="loss").meta["loss"] == 0.2
    assert ckpt.find_checkpoint(max_key="loss").meta["loss"] == 0.8
    assert ckpt.find_checkpoint().meta["loss"] == 0.8


def _killed_while_saving(folder):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(2.0)

    class DiesHalfway:
        def save_checkpoint(self, path):
            with open(path, "w") as handle:
                handle.write("partial")
            os.kill(os.getpid(), signal.SIGKILL)  # the job is killed in the middle of the write

        def load_checkpoint(self, path):
            raise AssertionError("a half-written checkpoint must never be loaded")

    Checkpointer(folder, {"model": model, "zz_dies": DiesHalfway()}).save_checkpoint(meta={"loss": 0.0})


def test_checkpoint_write_killed_halfway_leaves_previous_one_recovered(tmp_path):
    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.fill_(1.0)
    first = Checkpointer(tmp_path, {"model": model}).save_checkpoint(meta={"loss": 1.0})

    process = multiprocessing.get_context("fork").Process(target=_killed_while_saving, args=(tmp_path,))
    process.start()
    process.join(60)
    assert process.exitcode == -signal.SIGKILL
    assert any(p.name.startswith(".tmp-") for p in tmp_path.iterdir()), "the killed write left nothing behind"

    fresh = torch.nn.Linear(3, 2)
    ckpt = Checkpointer(tmp_path, {"model": fresh})
    assert ckpt.recover_if_possible().path == first.path
    assert torch.equal(fresh.weight, torch.ones(2, 3))
    assert ckpt.recover_if_possible(min_key="loss").path == first.path
    ckpt.save_checkpoint()  # the next save clears the debris
    assert not any(p.name.startswith(".tmp-") for p in tmp_path.iterdir())


def test_folder_without_meta_is_ignored(tmp_path):
    ckpt = Checkpointer(tmp_path, {"counter": EpochCounter(3)})
    good = ckpt.save_checkpoint()
    (tmp_path / "CKPT+2099-01-01+00-00-00+00").mkdir()
    assert ckpt.find_checkpoint().path == good.path


def test_weights_load_without_unpickling_code(tmp_path):
    model = torch.nn.Linear(3, 2)
    ckpt = Checkpointer(tmp_path, {"model": model})
    saved = ckpt.save_checkpoint()
    torch.save({"weight": Notes("code")}, saved.path / "model.ckpt")  # not plain tensors
    with pytest.raises(CheckpointError, match="model.ckpt.*cannot load 'model'"):
        ckpt.recover_if_possible()


def test_epoch_counter_repeats_an_epoch_saved_mid_way(tmp_path):
    counter = EpochCounter(5)
    ckpt = Checkpointer(tmp_path, {"counter": counter})
    assert next(counter) == 1 and next(counter) == 2
    ckpt.save_checkpoint(end_of_epoch=False)
    resumed = EpochCounter(5)
    Checkpointer(tmp_path, {"counter": resumed}).recover_if_possible()
    assert list(resumed) == [2, 3, 4, 5]
    ckpt.save_checkpoint(end_of_epoch=True)
    resumed = EpochCounter(5)
    Checkpointer(tmp_path, {"counter": resumed}).recover_if_possible()
    assert list(resumed) == [3, 4, 5]


def test_bad_recoverables_and_meta_are_refused(tmp_path):
    with pytest.raises(CheckpointError, match="'thing'.*neither state_dict"):
        Checkpointer(tmp_path, {"thing": object()})
    ckpt = Checkpointer(tmp_path, {"counter": EpochCounter(1)})
    with pytest.raises(CheckpointError, match="already used"):
        ckpt.add_recoverable("counter", EpochCounter(1))
    with pytest.raises(CheckpointError, match="meta"):
        ckpt.save_checkpoint(meta={"loss": object()})
    assert ckpt.list_checkpoints() == []
