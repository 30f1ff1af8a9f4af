"""Loaders built by the engine resume mid-epoch at the batch where they stopped."""

from __future__ import annotations

import torch

from speechkit.engine.loaders import PositionTracker, batch_items, build_loader


def test_position_tracker_skips_batches_already_seen():
    batches = [torch.full((2,), i) for i in range(5)]
    tracker = PositionTracker(batches)
    iterator = iter(tracker)
    next(iterator), next(iterator)
    resumed = PositionTracker(batches)
    resumed.load_state_dict(tracker.state_dict())
    assert [int(b[0]) for b in resumed] == [2, 3, 4]
    assert resumed.state_dict() == {"position": 0}  # a finished pass starts the next one from the top


def test_ready_train_loaders_become_resumable_and_items_are_counted():
    loader = build_loader(torch.utils.data.DataLoader(list(range(6)), batch_size=4), "train", None, 0, 1, 0)
    assert hasattr(loader, "state_dict") and len(loader) == 2
    assert batch_items((torch.zeros(3, 2), torch.zeros(3))) == 3
    assert batch_items({"x": torch.zeros(5, 1)}) == 5
