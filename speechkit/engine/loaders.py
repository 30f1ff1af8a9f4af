"""Turn what a recipe passes to ``fit``/``evaluate`` (a dataset or a ready loader) into a resumable loader.

Datasets go to :func:`speechkit.data.loader.make_dataloader` with this process's rank and world size. A ready
loader without ``state_dict`` is wrapped in
:class:`PositionTracker`, which resumes by skipping the batches already seen (exact when the loader's order
depends only on the epoch).

Example:
    >>> dataset = torch.utils.data.TensorDataset(torch.arange(10))
    >>> loader = build_loader(dataset, "train", {"batch_size": 4}, rank=0, world_size=1, seed=0)
    >>> [len(b) for b in loader]
    [4, 4, 2]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Optional

import torch
from torch.utils.data import DataLoader

from speechkit.data.loader import make_dataloader
from speechkit.stage import Stage

_END = object()


def is_ready_loader(data: Any) -> bool:
    """A loader yields batches; a dataset is indexed (``__getitem__``) by the loader."""
    return isinstance(data, DataLoader) or (hasattr(data, "__iter__") and not hasattr(data, "__getitem__"))


def build_loader(
    data: Any, stage: Stage | str, loader_kwargs: Optional[dict], rank: int, world_size: int, seed: int
) -> Any:
    """A loader for ``data`` (dataset or loader); a train loader always has state_dict/load_state_dict."""
    if data is None:
        return None
    stage = Stage.of(stage)
    kwargs = dict(loader_kwargs or {})
    if is_ready_loader(data):
        loader = data
    else:
        loader = make_dataloader(data, stage.value, rank=rank, world_size=world_size, seed=seed, **kwargs)
    if stage is Stage.TRAIN and not (hasattr(loader, "state_dict") and hasattr(loader, "load_state_dict")):
        loader = PositionTracker(loader)
    return loader


def describe_data(data: Any) -> str:
    """How an error names a data set: its manifest when it was loaded from one, else its type and size.

    Example:
        >>> describe_data([1, 2, 3])
        'list of 3 items'
    """
    source = getattr(data, "source", None) or getattr(getattr(data, "dataset", None), "source", None)
    try:
        size = f" of {len(data.dataset if isinstance(data, DataLoader) else data)} items"
    except TypeError:
        size = ""
    kind = f"{type(data).__name__}{size}"
    return f"'{source}' ({kind})" if source else kind


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


class PositionTracker:
    """Wraps a loader without state: counts batches handed out, and skips that many after recovery."""

    def __init__(self, loader: Any):
        self.loader = loader
        self.position = 0

    def __len__(self) -> int:
        """Batches left in the epoch (all of them unless recovered mid-epoch), like speechkit's loaders."""
        return len(self.loader) - self.position

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


def move_to(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    """Move a batch (object with ``.to``, tensor, or tuple/list/dict of them) to ``device``.

    ``non_blocking`` lets a copy from pinned host memory to a GPU overlap with the work already queued.
    """
    if hasattr(batch, "to") and callable(batch.to):
        return batch.to(device, non_blocking=non_blocking) if non_blocking else batch.to(device)
    if isinstance(batch, (tuple, list)):
        return type(batch)(move_to(item, device, non_blocking) for item in batch)
    if isinstance(batch, dict):
        return {key: move_to(value, device, non_blocking) for key, value in batch.items()}
    return batch
