"""A writer SIGKILLed at random points of saving and retention leaves no incomplete checkpoint listed."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import time

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


@pytest.mark.slow
def test_kills_during_save_and_retention_leave_only_complete_checkpoints(tmp_path):
    context = multiprocessing.get_context("fork")
    chance = random.Random(13)
    debris = {".tmp-": 0, ".trash-": 0}
    for _ in range(KILLS):
        writer = context.Process(target=_save_forever, args=(tmp_path,))
        writer.start()
        time.sleep(chance.uniform(0.2, 0.8))
        os.kill(writer.pid, signal.SIGKILL)
        writer.join(60)
        assert writer.exitcode == -signal.SIGKILL
        for prefix in debris:
            debris[prefix] += any(p.name.startswith(prefix) for p in tmp_path.iterdir())
        assert check_listed(tmp_path) >= 1

    # Where the kills landed (a kill between two saves leaves no debris).
    print(f"{KILLS} kills: {debris['.tmp-']} during a save, {debris['.trash-']} during retention")
    assert debris[".tmp-"] > 0 and debris[".trash-"] > 0

    # A writer taking the folder again removes every leftover; only the kept checkpoints remain.
    survivor = Checkpointer(tmp_path, parts())
    survivor.acquire_writer_lock()
    remaining = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".lock"))
    assert remaining == sorted(c.path.name for c in survivor.list_checkpoints())
    assert 1 <= check_listed(tmp_path) <= 2
