"""Merging per-utterance results from every process, keyed by utterance id.

Evaluation shards the test set across processes; each process scores its own utterances and the results are
gathered once at the end. Merging by id (and dropping duplicates, e.g. items a sampler repeated to even out
shards) makes the merged result equal to that of a single process over the whole set.
"""
from __future__ import annotations

from speechkit.errors import DistributedError


def process_group_running() -> bool:
    """Whether a torch.distributed process group of more than one process is running."""
    try:
        import torch.distributed as torch_dist
    except ImportError:  # a torch build without distributed support
        return False
    return torch_dist.is_available() and torch_dist.is_initialized() and torch_dist.get_world_size() > 1


def all_gather_object(obj) -> list:
    """Every process's ``obj`` in rank order (``[obj]`` without a running process group). Collective.

    Goes through ``speechkit.distributed`` when it set up the process group (its failure handling then
    applies), else straight to torch.distributed (a group started by other code).
    """
    if not process_group_running():
        return [obj]
    try:
        from speechkit import distributed as dist

        if dist.context().is_distributed:
            return dist.all_gather_object(obj)
    except ImportError:
        pass
    import torch.distributed as torch_dist

    gathered = [None] * torch_dist.get_world_size()
    torch_dist.all_gather_object(gathered, obj)
    return gathered


def merge_by_id(shards: list, what: str = "result") -> dict:
    """Merge ``{id: value}`` dicts, ordered by id; an id seen twice must carry equal values.

    Raises DistributedError naming the id when two processes scored one utterance differently.
    """
    merged: dict = {}
    for shard in shards:
        for key, value in shard.items():
            if key in merged and merged[key] != value:
                raise DistributedError(f"utterance {key!r} has two different {what}s across processes: "
                                       f"{merged[key]!r} and {value!r}")
            merged[key] = value
    try:
        order = sorted(merged)
    except TypeError:  # ids of mixed types
        order = sorted(merged, key=str)
    return {key: merged[key] for key in order}


def gather_by_id(local: dict, what: str = "result") -> dict:
    """All processes' ``{id: value}`` results merged by :func:`merge_by_id`. Collective when distributed."""
    return merge_by_id(all_gather_object(local), what)
