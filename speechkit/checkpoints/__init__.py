"""Checkpoints: writing, recovering, choosing and averaging a run's saved states.

- :mod:`~speechkit.checkpoints.checkpointer`: :class:`Checkpointer` (atomic saves, retention, recovery) and
  :class:`EpochCounter`; their names are importable from this package, as recipe YAMLs write them
  (``!new:speechkit.checkpoints.Checkpointer``);
- :mod:`~speechkit.checkpoints.lock`: one writer per checkpoints folder;
- :mod:`~speechkit.checkpoints.selection`: the checkpoint a path, a key or an averaged file names;
- :mod:`~speechkit.checkpoints.averaging`: the average of the best checkpoints (``speechkit
  average-checkpoints``);
- :mod:`~speechkit.checkpoints.weights_origin`: where each module's weights came from (trained, loaded, or
  initial), so that an export never ships initial weights.

Example:
    >>> from speechkit.checkpoints import Checkpointer, EpochCounter
    >>> Checkpointer.__module__
    'speechkit.checkpoints.checkpointer'
"""
from speechkit.checkpoints.checkpointer import (
    META_FILE,
    PREFIX,
    SUFFIX,
    Checkpoint,
    Checkpointer,
    EpochCounter,
    note_loaded,
    read_checkpoint,
)

__all__ = ["META_FILE", "PREFIX", "SUFFIX", "Checkpoint", "Checkpointer", "EpochCounter", "note_loaded",
           "read_checkpoint"]
