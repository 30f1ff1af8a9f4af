"""Random number generator states as a recoverable, so a resumed run draws the same numbers.

Example:
    >>> states = RandomStates()
    >>> states.save_checkpoint("rng.ckpt")   # doctest: +SKIP
"""

from __future__ import annotations

import random
from typing import Optional

import numpy as np
import torch


class RandomStates:
    """Python, NumPy, torch CPU and CUDA generator states.

    Loading sets the states at once and also keeps them: a training loop that must draw from the generators
    between recovery and the point where the checkpoint was taken (creating a data iterator, skipping to the
    saved position) calls :meth:`reapply` afterwards to be back on the saved trajectory.
    """

    def __init__(self):
        self._pending: Optional[dict] = None

    @staticmethod
    def capture() -> dict:
        kind, keys, position, has_gauss, gauss = np.random.get_state()
        state = {
            "python": random.getstate(),
            "numpy": (kind, torch.from_numpy(np.asarray(keys, dtype=np.int64)), position, has_gauss, gauss),
            "torch": torch.get_rng_state(),
        }
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    @staticmethod
    def apply(state: dict) -> None:
        version, internal, gauss = state["python"]
        random.setstate((version, tuple(internal), gauss))
        kind, keys, position, has_gauss, gauss_value = state["numpy"]
        np.random.set_state((kind, keys.numpy().astype(np.uint32), position, has_gauss, gauss_value))
        torch.set_rng_state(state["torch"])
        if "cuda" in state and torch.cuda.is_available():
            saved = state["cuda"][: torch.cuda.device_count()]
            torch.cuda.set_rng_state_all(saved)

    def state_dict(self) -> dict:
        return self.capture()

    def load_state_dict(self, state: dict) -> None:
        self.apply(state)
        self._pending = state

    def reapply(self) -> None:
        """Set the generators to the last loaded states again (once); no-op when nothing was loaded."""
        if self._pending is not None:
            self.apply(self._pending)
            self._pending = None

    def forget_pending(self) -> None:
        self._pending = None
