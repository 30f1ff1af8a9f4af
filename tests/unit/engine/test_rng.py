"""Random states are kept per process; a run resumed on more or fewer processes gets defined states."""

from __future__ import annotations

import random

import numpy as np
import torch

from speechkit.checkpoints import Checkpointer
from speechkit.engine.rng import RandomStates


def draws() -> tuple:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def state_after(seed: int) -> dict:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return RandomStates.capture()


def test_each_rank_gets_its_own_saved_states_back():
    saved = [state_after(1), state_after(2)]
    for rank in (0, 1):
        RandomStates().load_process_states(saved, rank, world_size=2)
        got = draws()
        RandomStates.apply(saved[rank])
        assert got == draws()


def test_ranks_beyond_the_saved_ones_derive_distinct_repeatable_states(caplog):
    saved = [state_after(1), state_after(2)]
    derived = {}
    for rank in (0, 2, 3, 2):
        RandomStates().load_process_states(saved, rank, world_size=4)
        derived.setdefault(rank, draws())
        RandomStates().load_process_states(saved, rank, world_size=4)
        assert draws() == derived[rank]  # the same on every resume
    assert len(set(derived.values())) == 3
    assert "holds random states for 2 process(es), this run has 4; ranks 2-3: states derived from rank 0's" \
        in caplog.text


def test_fewer_ranks_than_saved_log_the_unused_states(caplog):
    saved = [state_after(1), state_after(2), state_after(3)]
    RandomStates().load_process_states(saved, 0, world_size=2)
    assert "holds random states for 3 processes, this run has 2: the states of rank 2 are unused" \
        in caplog.text


def test_the_checkpoint_file_holds_every_process_and_older_files_still_load(tmp_path):
    torch.manual_seed(5)
    states = RandomStates()
    saved = Checkpointer(tmp_path, {"rng": states}).save_checkpoint()
    content = torch.load(saved.path / "rng.ckpt", weights_only=True)
    assert content["world_size"] == 1 and len(content["states"]) == 1
    expected = draws()
    Checkpointer(tmp_path, {"rng": RandomStates()}).recover_if_possible()
    assert draws() == expected

    torch.save(content["states"][0], saved.path / "rng.ckpt")  # the single-state file of older versions
    Checkpointer(tmp_path, {"rng": RandomStates()}).recover_if_possible()
    assert draws() == expected
