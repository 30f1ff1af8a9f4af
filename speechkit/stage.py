"""The stage of an experiment a batch belongs to."""
from __future__ import annotations

from enum import Enum


class Stage(Enum):
    """TRAIN, VALID or TEST; its ``.value`` is the lower-case name used in logs and loader options."""

    TRAIN = "train"
    VALID = "valid"
    TEST = "test"

    @classmethod
    def of(cls, stage: Stage | str) -> Stage:
        """Accept a Stage or its name ("train", "VALID", ...).

        Example:
            >>> Stage.of("valid") is Stage.VALID
            True
        """
        return stage if isinstance(stage, Stage) else cls(str(stage).lower())
