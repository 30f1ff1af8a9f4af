"""Random number generator states as a recoverable, so a resumed run draws the same numbers.

Every process has its own states (dropout masks and augmentations differ between ranks once their batches
differ), so the checkpoint keeps one entry per process (``checkpoint_per_process``, see
:mod:`speechkit.checkpoints`) and each rank gets its own back. When the world size changed:

- ranks the checkpoint has states for get them back;
- a rank beyond the saved ones seeds its generators from a hash of rank 0's saved state and its own rank, so a
  repeated resume on the same world size draws the same numbers; rank 0 logs which ranks did so;
- saved states of ranks that no longer exist are unused (also logged).

Example:
    >>> sorted(RandomStates().state_dict())[:3]    # this process's generators ("cuda" too once it is used)
    ['numpy', 'python', 'torch']
"""

from __future__ import annotations

import hashlib
import logging
import random
from typing import Optional

import numpy as np
import torch

logger = logging.getLogger(__name__)


class RandomStates:
    """Python, NumPy, torch CPU and CUDA generator states.

    Loading sets the states at once and also keeps them: a training loop that must draw from the generators
    between recovery and the point where the checkpoint was taken (creating a data iterator, skipping to the
    saved position) calls :meth:`reapply` afterwards to be back on the saved trajectory.
    """

    checkpoint_per_process = True  # the checkpointer gathers every process's state_dict()

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

    def load_process_states(self, states: list, rank: int, world_size: int) -> None:
        """Load this process's entry of ``states`` (one per saved process), deriving it past their end."""
        saved = len(states)
        if rank == 0 and world_size > saved:
            logger.warning(
                "The checkpoint holds random states for %d process(es), this run has %d; %s: states derived "
                "from rank 0's saved state and the rank number", saved, world_size,
                _ranks(saved, world_size - 1),
            )
        elif rank == 0 and world_size < saved:
            logger.warning(
                "The checkpoint holds random states for %d processes, this run has %d: the states of %s are "
                "unused", saved, world_size, _ranks(world_size, saved - 1),
            )
        self.load_state_dict(states[rank] if rank < len(states) else derived_state(states[0], rank))

    def reapply(self) -> None:
        """Set the generators to the last loaded states again (once); no-op when nothing was loaded."""
        if self._pending is not None:
            self.apply(self._pending)
            self._pending = None

    def forget_pending(self) -> None:
        self._pending = None


def _ranks(first: int, last: int) -> str:
    return f"rank {first}" if first == last else f"ranks {first}-{last}"


def derived_state(reference: dict, rank: int) -> dict:
    """Generator states for ``rank``, seeded from a hash of ``reference`` (another process's saved states)."""
    digest = hashlib.sha256(reference["torch"].numpy().tobytes() + f"rank{rank}".encode()).digest()
    seed = int.from_bytes(digest[:8], "little")
    saved = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    state = RandomStates.capture()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)
        state["cuda"] = torch.cuda.get_rng_state_all()
    random.setstate(saved[0])
    np.random.set_state(saved[1])
    torch.set_rng_state(saved[2])
    return state
