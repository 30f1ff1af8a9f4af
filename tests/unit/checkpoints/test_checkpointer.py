"""Checkpointer: complete round trips, selection and retention, and crash safety."""

from __future__ import annotations

import multiprocessing
import os
import re
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


def _hold_the_folder(folder, ready, release):
    checkpointer = Checkpointer(folder, {"counter": EpochCounter(3)})
    checkpointer.save_checkpoint()  # takes the lock, held while the object lives
    ready.set()
    release.wait(60)


def test_a_second_writer_is_refused_naming_the_folder_and_the_holder(tmp_path):
    from speechkit.brain import Brain

    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    holder = context.Process(target=_hold_the_folder, args=(tmp_path, ready, release))
    holder.start()
    try:
        assert ready.wait(60)
        ckpt = Checkpointer(tmp_path, {"counter": EpochCounter(3)})
        refusal = rf"{tmp_path} is in use by another run \(pid {holder.pid} on host"
        with pytest.raises(CheckpointError, match=refusal):
            ckpt.save_checkpoint()
        with pytest.raises(CheckpointError, match=f"pid {holder.pid}"):
            ckpt.acquire_writer_lock()
        assert len(ckpt.list_checkpoints()) == 1  # reading needs no lock

        class Never(Brain):
            def compute_forward(self, batch, stage):
                raise AssertionError("a refused run must not train")

        model = torch.nn.Linear(3, 1)
        brain = Never({"model": model}, lambda p: torch.optim.SGD(p, lr=0.1), {"noprogressbar": True},
                      checkpointer=Checkpointer(tmp_path, {"model": model}))
        with pytest.raises(CheckpointError, match="in use by another run"):
            brain.fit(EpochCounter(1), [torch.zeros(3)], train_loader_kwargs={"batch_size": 1})
    finally:
        os.kill(holder.pid, signal.SIGKILL)  # the lock dies with its process: nothing stale is left
        holder.join(60)
    assert ckpt.save_checkpoint() is not None
    assert len(ckpt.list_checkpoints()) == 2


def test_checkpointers_of_one_process_share_the_folder(tmp_path):
    first = Checkpointer(tmp_path, {"counter": EpochCounter(3)})
    second = Checkpointer(tmp_path, {"counter": EpochCounter(3)})
    first.save_checkpoint()
    second.save_and_keep_only(num_to_keep=1)
    assert len(first.list_checkpoints()) == 1


def test_a_checkpoint_without_a_registered_file_is_an_error_unless_partial(tmp_path, caplog):
    model = torch.nn.Linear(3, 2)
    saved = Checkpointer(tmp_path, {"model": model}).save_checkpoint()
    fresh, optimizer = torch.nn.Linear(3, 2), torch.optim.SGD(model.parameters(), lr=0.1)
    ckpt = Checkpointer(tmp_path, {"model": fresh, "optimizer": optimizer})
    with pytest.raises(CheckpointError, match=re.escape(str(saved.path)) + r" holds no file for 'optimizer' "
                                              r"\(expected optimizer.ckpt\).*allow_partial=True"):
        ckpt.recover_if_possible()
    assert not torch.equal(fresh.weight, model.weight)  # nothing loaded
    assert ckpt.recover_if_possible(allow_partial=True).path == saved.path
    assert torch.equal(fresh.weight, model.weight)
    assert "holds nothing for 'optimizer'" in caplog.text


def test_an_optimizer_of_another_class_is_refused_naming_both_classes(tmp_path):
    model = torch.nn.Linear(3, 2)
    adam = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.randn(4, 3)).sum().backward()
    adam.step()
    saved = Checkpointer(tmp_path, {"model": model, "optimizer": adam}).save_checkpoint()
    sgd = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    refusal = r": 'optimizer' was saved from torch.optim.adam.Adam but this run's 'optimizer' is " \
              r"torch.optim.sgd.SGD"
    with pytest.raises(CheckpointError, match=re.escape(str(saved.path)) + refusal):
        Checkpointer(tmp_path, {"model": model, "optimizer": sgd}).recover_if_possible()


def test_leftovers_of_killed_writers_are_removed_and_never_listed(tmp_path, caplog):
    ckpt = Checkpointer(tmp_path, {"counter": EpochCounter(3), "model": torch.nn.Linear(2, 2)})
    reader = Checkpointer(tmp_path, {"counter": EpochCounter(3), "model": torch.nn.Linear(2, 2)})
    good = ckpt.save_checkpoint()
    ckpt.release_writer_lock()
    incomplete = tmp_path / "CKPT+2099-01-01+00-00-00+00"  # a removal killed half-way, before renames
    incomplete.mkdir()
    (incomplete / "meta.json").write_text((good.path / "meta.json").read_text())
    (incomplete / "counter.ckpt").write_text('{"current": 0}')
    empty = tmp_path / "CKPT+2099-01-01+00-00-00+01"
    empty.mkdir()
    foreign = tmp_path / "CKPT+2099-01-01+00-00-00+02"  # no meta.json of ours: not ours to delete
    foreign.mkdir()
    (foreign / "CKPT.yaml").write_text("end-of-epoch: true\n")
    debris = [tmp_path / ".tmp-CKPT+2099-01-01+00-00-00+03", tmp_path / ".trash-CKPT+2099-01-01+00-00-00+04"]
    for folder in debris:
        folder.mkdir()
        (folder / "model.ckpt").write_text("partial")
    for _ in range(3):
        assert [c.path for c in reader.list_checkpoints()] == [good.path]
    assert caplog.text.count(str(incomplete)) == 1 and caplog.text.count(str(empty)) == 1  # warned once

    reader.acquire_writer_lock()  # a writer taking the folder cleans up
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".lock")) == sorted(
        [good.path.name, foreign.name]
    )
    assert reader.recover_if_possible().path == good.path


def test_a_holder_that_has_ended_is_named_as_such(tmp_path):
    import json
    import socket

    from speechkit.checkpoints.lock import HOLDER_FILE, describe_holder, read_holder

    ended = 2**22 + 1  # above Linux's largest pid_max: no process has it
    record = {"host": socket.gethostname(), "pid": int(ended), "started": "2026-01-01 00:00:00",
              "command": "train.py hp.yaml"}
    (tmp_path / HOLDER_FILE).write_text(json.dumps(record))
    text = describe_holder(read_holder(tmp_path))
    assert text.startswith(f"pid {ended} on host {socket.gethostname()}, since 2026-01-01 00:00:00")
    assert "that process has ended but a child process of it still holds the lock" in text
    assert text.endswith(": train.py hp.yaml")
    record["pid"] = os.getpid()
    (tmp_path / HOLDER_FILE).write_text(json.dumps(record))
    assert "has ended" not in describe_holder(read_holder(tmp_path))
