"""Average the weights of the N best checkpoints: a smoother model than any one of them, as the field's
toolkits do at test time.

From the command line::

    speechkit average-checkpoints results/asr/1234/save --num 5 --min-key WER --output results/asr/avg5

The output folder is a checkpoint like those of a run: one averaged ``<module>.ckpt`` per module and a
``meta.json`` (whose ``info.averaged`` names the sources, their metrics and the key; ``averaged.json`` repeats
it), written to a temporary folder and renamed when complete. ``speechkit export --checkpoints
results/asr/avg5`` exports it, and a recipe evaluates it with ``--test_only --eval_checkpoint
results/asr/avg5``. Asking for more checkpoints than the folder holds is an error.

In a recipe, the run option ``--average_checkpoints 5`` (or the YAML key ``average_checkpoints: 5``) makes
``Brain.evaluate`` test the average of the 5 best checkpoints by its key; keep at least that many
(``ckpt_keep: 5``).

Floating-point tensors are averaged (summed in float64, then cast back to their dtype); other tensors (the
step counters of BatchNorm) are taken from the best checkpoint. Files load with ``weights_only=True`` (no
pickled code runs); files holding anything but a flat name -> tensor dict (optimizer states, counters) are
not averaged.

Example:
    >>> from speechkit.checkpoints import Checkpointer
    >>> modules = {"encoder": torch.nn.Linear(3, 2), "ctc_head": torch.nn.Linear(2, 5)}
    >>> for wer in (12.5, 9.8, 11.0):
    ...     _ = Checkpointer("save", modules).save_checkpoint(meta={"WER": wer})
    >>> best = best_checkpoints("save", 2, min_key="WER")
    >>> [checkpoint.meta["WER"] for checkpoint in best]
    [9.8, 11.0]
    >>> averaged = average_checkpoint_files(best)
    >>> sorted(averaged), averaged["encoder"]["weight"].shape
    (['ctc_head', 'encoder'], torch.Size([2, 3]))
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Optional

import torch

from speechkit.checkpoints.checkpointer import META_FILE, SUFFIX, Checkpoint, Checkpointer
from speechkit.errors import CheckpointError

logger = logging.getLogger(__name__)


def best_checkpoints(
    checkpoints_dir, num: int, min_key: Optional[str] = None, max_key: Optional[str] = None
) -> list:
    """Up to ``num`` checkpoints of ``checkpoints_dir``, best first by ``min_key``/``max_key`` (newest first
    without a key).

    Raises:
        CheckpointError: no checkpoint (with that key).
    """
    if min_key and max_key:
        raise CheckpointError("give min_key or max_key, not both")
    if num < 1:
        raise CheckpointError(f"the number of checkpoints to average must be >= 1, got {num}")
    key = min_key or max_key
    found = [c for c in Checkpointer(checkpoints_dir).list_checkpoints() if not key or key in c.meta]
    if not found:
        raise CheckpointError(f"{checkpoints_dir}: no checkpoint" + (f" with the key '{key}'" if key else ""))
    if key:
        found.sort(key=lambda c: c.meta[key], reverse=bool(max_key))
    else:
        found.reverse()
    return found[:num]


def average_state_dicts(state_dicts: Sequence[dict]) -> dict:
    """The element-wise mean of state dicts with the same keys and shapes (the first one's other tensors)."""
    first = state_dicts[0]
    for other in state_dicts[1:]:
        if other.keys() != first.keys():
            raise CheckpointError(f"cannot average state dicts with different keys: "
                                  f"{sorted(set(first) ^ set(other))[:5]}")
    averaged = {}
    for key, value in first.items():
        if not torch.is_floating_point(value):
            averaged[key] = value.clone()
            continue
        total = torch.zeros(value.shape, dtype=torch.float64)
        for state in state_dicts:
            if state[key].shape != value.shape:
                raise CheckpointError(f"cannot average '{key}': shapes {tuple(value.shape)} and "
                                      f"{tuple(state[key].shape)}")
            total += state[key].to(torch.float64)
        averaged[key] = (total / len(state_dicts)).to(value.dtype)
    return averaged


def average_checkpoint_files(
    checkpoints: Sequence[Checkpoint], names: Optional[Sequence[str]] = None
) -> dict:
    """``{name: averaged state dict}`` for every weight file ``<name>.ckpt`` found in all ``checkpoints``
    (only ``names`` when given)."""
    common = None
    for checkpoint in checkpoints:
        stems = {path.stem for path in checkpoint.path.glob(f"*{SUFFIX}")}
        common = stems if common is None else common & stems
    wanted = sorted(common or ()) if names is None else list(names)
    averaged = {}
    for name in wanted:
        try:
            states = [_load(c.path / f"{name}{SUFFIX}") for c in checkpoints]
        except CheckpointError:
            if names is not None:
                raise
            continue  # not a weights file (a counter, a sampler position): nothing to average
        if all(isinstance(s, dict) and not s for s in states):
            continue  # a module without parameters or buffers
        if all(isinstance(s, dict) and s and all(isinstance(v, torch.Tensor) for v in s.values())
               for s in states):
            averaged[name] = average_state_dicts(states)
        elif names is not None:
            path = checkpoints[0].path / f"{name}{SUFFIX}"
            raise CheckpointError(f"{path}: not a name -> tensor weights file")
    return averaged


def load_average(checkpointer: Checkpointer, num: int, min_key: Optional[str] = None,
                 max_key: Optional[str] = None) -> list:
    """Load into the checkpointer's modules the average of its ``num`` best checkpoints; returns them."""
    modules = {n: m for n, m in checkpointer.recoverables.items() if isinstance(m, torch.nn.Module)}
    chosen = best_checkpoints(checkpointer.checkpoints_dir, num, min_key, max_key)
    if len(chosen) < num:
        logger.warning("Averaging %d checkpoints, not %d: keep more (ckpt_keep)", len(chosen), num)
    names = [name for name in modules if (chosen[0].path / f"{name}{SUFFIX}").is_file()]
    for name, state in average_checkpoint_files(chosen, names).items():
        modules[name].load_state_dict(state)
    logger.info("Evaluating the average of %s", ", ".join(c.path.name for c in chosen))
    return chosen


def write_average(chosen: Sequence[Checkpoint], averaged: dict, output,
                  key: Optional[str] = None) -> Checkpoint:
    """Write ``averaged`` (``{name: state dict}``) as the checkpoint folder ``output`` (replacing an earlier
    average there) and return it; ``chosen`` are the sources, best first, ``key`` the metric ranking them.

    Raises:
        CheckpointError: ``output`` exists and is not a checkpoint (nothing of it is touched).
    """
    output = Path(output)
    if output.exists() and any(output.iterdir()) and not (output / META_FILE).is_file():
        raise CheckpointError(f"{output}: exists and is not a checkpoint folder; give another --output")
    untrained = set().union(*(c.info.get("untrained") or [] for c in chosen))
    record = {"checkpoints": [str(c.path) for c in chosen], "meta": [c.meta for c in chosen], "key": key,
              "modules": sorted(averaged)}
    temporary = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        for name, state in averaged.items():
            torch.save(state, temporary / f"{name}{SUFFIX}")
        files = sorted(p.name for p in temporary.iterdir())
        info = {"end_of_epoch": True, "unixtime": time.time(), "epoch": chosen[0].info.get("epoch"),
                "step": chosen[0].info.get("step"), "files": files, "classes": {},
                "untrained": sorted(untrained & set(averaged)), "averaged": record}
        (temporary / META_FILE).write_text(json.dumps({"meta": {}, "info": info}, indent=2))
        (temporary / "averaged.json").write_text(json.dumps(record, indent=2))
        if output.exists():
            shutil.rmtree(output)
        os.replace(temporary, output)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return Checkpoint(output, {}, info)


def _load(path: Path) -> dict:
    if not path.is_file():
        raise CheckpointError(f"{path}: not found")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # pickle raises many unrelated types
        raise CheckpointError(f"{path}: not a weights file ({type(error).__name__})") from None
