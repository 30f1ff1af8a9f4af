"""The training loop's counters: batches of the stage, optimizer steps, the position in the training epoch
and the running training loss. Checkpoints keep them as Brain's state (``brain``), with the optimization
step's (an unfinished accumulation cycle, the non-finite guard) and early stopping's, so a resumed run
continues the same count, mid-epoch included.

Each process has its own running loss. Resumed on another number of processes, rank 0 takes the sums of
every saved rank and the others start from zero, so the epoch's average still counts every item once.

Example:
    >>> counters = LoopCounters(optimizer_steps=4, train_position=3)
    >>> states = [counters.state_dict(), counters.state_dict()]
    >>> LoopCounters.process_state(states, rank=1, world_size=3)["train_stats"]["items"]
    0
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from speechkit.engine.progress import StageStats


@dataclass
class LoopCounters:
    """Where the training loop stands.

    Attributes:
        step: batches done in the current stage.
        optimizer_steps: optimizer steps of the whole run.
        train_position: batches of the current training epoch done (0 between epochs).
        train_stats: the running training loss of this process.
        recovered_optimization: the optimization step's recovered state, kept until ``fit`` builds the step
            (recovery comes first).
    """

    step: int = 0
    optimizer_steps: int = 0
    train_position: int = 0
    train_stats: StageStats = field(default_factory=StageStats)
    recovered_optimization: dict = field(default_factory=dict)

    def state_dict(self, optimization: Any = None, early_stopping: Any = None) -> dict:
        """The counters, with the state of ``optimization`` and ``early_stopping`` when there are."""
        return {
            "optimizer_steps": self.optimizer_steps,
            "train_position": self.train_position,
            "train_stats": self.train_stats.state_dict(),
            "optimization": optimization.state_dict() if optimization else {},
            "early_stopping": early_stopping.state_dict() if early_stopping else {},
        }

    def load_state_dict(self, state: dict, optimization: Any = None, early_stopping: Any = None) -> None:
        self.optimizer_steps = int(state["optimizer_steps"])
        self.train_position = int(state["train_position"])
        self.train_stats = StageStats()
        self.train_stats.load_state_dict(state["train_stats"])
        self.recovered_optimization = state.get("optimization", {})
        if early_stopping is not None:
            early_stopping.load_state_dict(state.get("early_stopping", {}))
        if optimization is not None:
            optimization.load_state_dict(self.recovered_optimization)

    @staticmethod
    def process_state(states: list, rank: int, world_size: int) -> dict:
        """This rank's state out of every saved rank's; on another world size rank 0 takes every saved
        rank's loss sums and the others none."""
        own = dict(states[min(rank, len(states) - 1)])
        if len(states) != world_size:
            saved = [state["train_stats"] for state in states]
            merged = {key: sum(stats[key] for stats in saved) for key in ("loss_sum", "items", "batches")}
            merged["elapsed"] = max(stats["elapsed"] for stats in saved)
            empty = {**merged, "loss_sum": 0.0, "items": 0, "batches": 0}
            own["train_stats"] = merged if rank == 0 else empty
        return own


def counter_attribute(name: str) -> property:
    """A property reading and writing ``self.counters.<name>``: the counters keep their documented names on
    the object that owns them (``brain.optimizer_steps``)."""
    return property(lambda self: getattr(self.counters, name),
                    lambda self, value: setattr(self.counters, name, value),
                    doc=f"``self.counters.{name}`` (:class:`LoopCounters`).")
