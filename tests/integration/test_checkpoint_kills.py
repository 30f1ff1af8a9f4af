"""A writer SIGKILLed at random points of saving and retention leaves no incomplete checkpoint listed."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch

from speechkit.checkpoints import Checkpointer

PARTS = 16  # files per checkpoint: removing one takes long enough for kills to land in the middle
KILLS = 24


class Part:
    """A recoverable holding one tensor; every part of a checkpoint holds the checkpoint's step number."""

    def __init__(self):
        self.value = torch.zeros(4096)

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def parts() -> dict:
    return {f"part{i:02d}": Part() for i in range(PARTS)}


def _save_forever(folder) -> None:
    recoverables = parts()
    checkpointer = Checkpointer(folder, recoverables)
    found = checkpointer.recover_if_possible()
    step = int(found.meta["step"]) if found else 0
    while True:
        step += 1
        for part in recoverables.values():
            part.value.fill_(step)
        checkpointer.save_and_keep_only(meta={"step": step}, num_to_keep=2)


def check_listed(folder) -> int:
    """Load every listed checkpoint and check it whole; returns how many are listed."""
    reader = parts()
    checkpointer = Checkpointer(folder, reader)
    listed = checkpointer.list_checkpoints()
    for checkpoint in listed:
        checkpointer.load_checkpoint(checkpoint)  # an error if a part's file is missing
        step = checkpoint.meta["step"]
        assert all(torch.all(part.value == step) for part in reader.values()), checkpoint.path
    return len(listed)


def _save_until_paused(folder, where: str, paused) -> None:
    """``_save_forever``, stopping for good in the middle of a save (half of a checkpoint's parts written) or
    of a retention (half of an old checkpoint's files removed), after setting ``paused``: the parent kills it
    there. Random kills alone land in retention rarely when the machine is loaded."""
    import speechkit.checkpoints.checkpointer as checkpoints

    save, remove, calls = checkpoints._torch_save, checkpoints.shutil.rmtree, {"saves": 0}

    def pause():
        paused.set()
        time.sleep(600)

    def pausing_save(obj, path):
        save(obj, path)
        calls["saves"] += 1
        if where == "save" and calls["saves"] == 2 * PARTS + PARTS // 2:  # in the third checkpoint
            pause()

    def pausing_rmtree(path, *args, **kwargs):
        trash = Path(path)
        if where == "retention" and trash.name.startswith(".trash-") and trash.is_dir():
            for file in sorted(trash.iterdir())[: PARTS // 2]:
                file.unlink()
            pause()
        remove(path, *args, **kwargs)

    checkpoints._torch_save, checkpoints.shutil.rmtree = pausing_save, pausing_rmtree
    _save_forever(folder)


@pytest.mark.slow
def test_kills_during_save_and_retention_leave_only_complete_checkpoints(tmp_path):
    context = multiprocessing.get_context("fork")
    chance = random.Random(13)
    for _ in range(KILLS):  # kills at random points
        writer = context.Process(target=_save_forever, args=(tmp_path,))
        writer.start()
        time.sleep(chance.uniform(0.2, 0.8))
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(60)
        assert writer.exitcode == -signal.SIGKILL
        assert check_listed(tmp_path) >= 1

    for where, debris in (("save", ".tmp-"), ("retention", ".trash-")):  # and one surely inside each
        paused = context.Event()
        writer = context.Process(target=_save_until_paused, args=(tmp_path / where, where, paused))
        writer.start()
        assert paused.wait(120), f"the writer never reached the middle of a {where}"
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(60)
        assert any(p.name.startswith(debris) for p in (tmp_path / where).iterdir()), where
        assert check_listed(tmp_path / where) == 2
        next_writer = Checkpointer(tmp_path / where, parts())
        assert next_writer.recover_if_possible() is not None
        next_writer.save_and_keep_only(meta={"step": 0}, num_to_keep=2)  # the next writer clears the debris
        assert not any(p.name.startswith(debris) for p in (tmp_path / where).iterdir())
