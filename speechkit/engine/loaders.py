"""Turn what a recipe passes to ``fit``/``evaluate`` (a dataset or a ready loader) into a resumable loader.

Datasets go to :func:`speechkit.data.loader.make_dataloader` with this process's rank and world size. Until
that module is installed, :class:`EpochShuffledLoader` stands in: a seeded per-epoch permutation whose
mid-epoch
position is part of its state. A ready loader without ``state_dict`` is wrapped in :class:`PositionTracker`,
which resumes by skipping the batches already seen (exact when the loader's order depends only on the epoch).

Example:
    >>> loader = build_loader(list(range(10)), "train", {"batch_size": 4}, rank=0, world_size=1, seed=0)
    >>> [len(b) for b in loader]
    [4, 4, 2]
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Optional

import torch
from torch.utils.data import DataLoader, default_collate

from speechkit.errors import DataError
from speechkit.stage import Stage

_END = object()


def is_ready_loader(data: Any) -> bool:
    """A loader yields batches; a dataset is indexed (``__getitem__``) by the loader."""
    return isinstance(data, DataLoader) or (hasattr(data, "__iter__") and not hasattr(data, "__getitem__"))


def build_loader(
    data: Any, stage: Stage | str, loader_kwargs: Optional[dict], rank: int, world_size: int, seed: int
) -> Any:
    """A loader for ``data`` (dataset or loader); train loaders always have
    ``state_dict``/``load_state_dict``."""
    if data is None:
        return None
    stage = Stage.of(stage)
    kwargs = dict(loader_kwargs or {})
    if is_ready_loader(data):
        loader = data
    else:
        make_dataloader = _find_make_dataloader()
        if make_dataloader is not None:
            loader = make_dataloader(data, stage.value, rank=rank, world_size=world_size, seed=seed, **kwargs)
        else:
            loader = EpochShuffledLoader(data, stage, rank=rank, world_size=world_size, seed=seed, **kwargs)
    if stage is Stage.TRAIN and not (hasattr(loader, "state_dict") and hasattr(loader, "load_state_dict")):
        loader = PositionTracker(loader)
    return loader


def _find_make_dataloader() -> Any:
    try:
        module = importlib.import_module("speechkit.data.loader")
    except ImportError:
        return None
    return getattr(module, "make_dataloader", None)


def batch_items(batch: Any) -> int:
    """Number of items in a batch: ``len`` of a batch object, else the first tensor's leading size."""
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() else 1
    if isinstance(batch, (tuple, list)) and batch:
        return batch_items(batch[0])
    if isinstance(batch, dict) and batch:
        return batch_items(next(iter(batch.values())))
    try:
        return len(batch)
    except TypeError:
        return 1


class EpochShuffledLoader:
    """A resumable loader over an indexable dataset: a seeded permutation per epoch, split across ranks.

    Training ranks get equally many batches (the shorter shards repeat nothing: the permutation is cut to a
    multiple of the world size); valid/test ranks get disjoint strided shards covering every item.

    Args:
        dataset: anything with ``__len__`` and ``__getitem__``.
        stage: the stage (train shuffles by default).
        batch_size, shuffle, drop_last, collate_fn: as in ``torch.utils.data.DataLoader``.
    """

    def __init__(
        self,
        dataset: Any,
        stage: Stage | str = Stage.TRAIN,
        *,
        rank: int = 0,
        world_size: int = 1,
        seed: int = 0,
        batch_size: int = 1,
        shuffle: Optional[bool] = None,
        drop_last: bool = False,
        collate_fn: Any = None,
        **unused: Any,
    ):
        if unused.get("num_workers"):
            unused.pop("num_workers")
        if unused:
            raise DataError(f"loader options not understood without speechkit.data.loader: {sorted(unused)}")
        self.dataset = dataset
        self.stage = Stage.of(stage)
        self.rank, self.world_size, self.seed = rank, world_size, seed
        self.batch_size = int(batch_size)
        self.shuffle = self.stage is Stage.TRAIN if shuffle is None else bool(shuffle)
        self.drop_last = drop_last
        self.collate_fn = collate_fn or default_collate
        self.epoch = 0
        self.position = 0  # batches of the current epoch already handed out

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch, self.position = epoch, 0

    def _indices(self) -> list:
        count = len(self.dataset)
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
            order = torch.randperm(count, generator=generator).tolist()
        else:
            order = list(range(count))
        if self.stage is Stage.TRAIN:
            order = order[: count - count % self.world_size] if self.world_size > 1 else order
        return order[self.rank :: self.world_size]

    def _batches(self) -> list:
        indices = self._indices()
        batches = [indices[i : i + self.batch_size] for i in range(0, len(indices), self.batch_size)]
        if self.drop_last and batches and len(batches[-1]) < self.batch_size:
            batches.pop()
        return batches

    def __len__(self) -> int:
        return len(self._batches())

    def __iter__(self) -> Iterator:
        batches = self._batches()
        while self.position < len(batches):
            chosen = batches[self.position]
            self.position += 1
            yield self.collate_fn([self.dataset[i] for i in chosen])
        self.position = 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])


class PositionTracker:
    """Wraps a loader without state: counts batches handed out, and skips that many after recovery."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.position = 0

    def __len__(self) -> int:
        return len(self.loader)

    def set_epoch(self, epoch: int) -> None:
        if hasattr(self.loader, "set_epoch"):
            self.loader.set_epoch(epoch)

    def __iter__(self) -> Iterator:
        iterator = iter(self.loader)
        for _ in range(self.position):  # skip now, not lazily: the caller re-aligns the RNG right after
            if next(iterator, _END) is _END:
                break
        return self._rest(iterator)

    def _rest(self, iterator: Iterator) -> Iterator:
        for batch in iterator:
            self.position += 1
            yield batch
        self.position = 0

    def state_dict(self) -> dict:
        return {"position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.position = int(state["position"])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def move_to(batch: Any, device: Any) -> Any:
    """Move a batch (object with ``.to``, tensor, or tuple/list/dict of them) to ``device``."""
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(move_to(item, device) for item in batch)
    if isinstance(batch, dict):
        return {key: move_to(value, device) for key, value in batch.items()}
    return batch
