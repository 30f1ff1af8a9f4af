"""Preemption signals: SIGTERM / SIGUSR1 (and a first Ctrl-C) ask training to save at the next batch boundary
and stop.

SLURM sends SIGTERM (or, with ``--signal=USR1@90``, SIGUSR1) before it ends a job; torchrun forwards SIGTERM
to its workers. The handler only sets a flag; the training loop asks :meth:`PreemptionHandler.requested` at a
batch boundary, and every rank gets the same answer (an all-reduce MAX when a process group is up), so all
ranks save the same checkpoint and stop together, with exit code :data:`speechkit.errors.EXIT_PREEMPTED`.

Ctrl-C (SIGINT), when listed in ``signals``, works the same way the first time (training exits with
:data:`speechkit.errors.EXIT_INTERRUPTED` after saving); a second Ctrl-C before the save raises
``KeyboardInterrupt`` at once, for a user who does not want to wait.

Example:
    >>> import os
    >>> with PreemptionHandler() as preemption:
    ...     for batch in range(5):
    ...         if batch == 2:
    ...             os.kill(os.getpid(), signal.SIGUSR1)   # what SLURM sends before the time limit
    ...         if preemption.requested():   # at a batch boundary: save, then stop
    ...             print(f"saving after {batch} batches")
    ...             break
    saving after 2 batches
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from typing import Optional

logger = logging.getLogger(__name__)

DEFAULT_SIGNALS = ("SIGTERM", "SIGUSR1")
#: What training catches: the preemption signals and Ctrl-C.
TRAINING_SIGNALS = DEFAULT_SIGNALS + ("SIGINT",)


class PreemptionHandler:
    """Installs handlers that record a preemption request; :meth:`uninstall` restores the previous ones.

    Args:
        signals: names of the signals to catch (those the platform lacks are ignored).
        device: where the agreement tensor lives for the all-reduce ("cpu" for gloo, "cuda:N" for nccl).
    """

    def __init__(self, signals: Sequence[str] = DEFAULT_SIGNALS, device: str = "cpu"):
        self.signals = [getattr(signal, name) for name in signals if hasattr(signal, name)]
        self.device = device
        self.received: Optional[int] = None
        self._previous: dict = {}

    def install(self) -> PreemptionHandler:
        if threading.current_thread() is not threading.main_thread():
            logger.warning("Preemption signals can only be caught in the main thread; not installed")
            return self
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._on_signal)
        return self

    def uninstall(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> PreemptionHandler:
        return self.install()

    def __exit__(self, *exc) -> None:
        self.uninstall()

    def _on_signal(self, signum: int, frame) -> None:
        if signum == signal.SIGINT and self.interrupted:
            # The second Ctrl-C: the user does not want to wait for the save.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt("second Ctrl-C: stopped at once, without saving")
        # Only set a flag: saving inside a signal handler could interrupt a half-done optimizer step.
        if self.received is None or signum == signal.SIGINT:
            self.received = signum
        if signum == signal.SIGINT:
            logger.warning("Ctrl-C: saving a checkpoint at the next batch boundary, then stopping "
                           "(press Ctrl-C again to stop at once without saving)")
            return
        logger.warning(
            "Received %s: saving a checkpoint at the next batch boundary, then stopping",
            signal.Signals(signum).name,
        )

    @property
    def interrupted(self) -> bool:
        """Whether the request came from Ctrl-C (SIGINT) rather than a preemption signal."""
        return self.received == getattr(signal, "SIGINT", None)

    def local_request(self) -> bool:
        return self.received is not None

    def requested(self, also: bool = False) -> bool:
        """Whether any rank received a signal (or passed ``also=True``); the same answer on every rank."""
        return any_rank(self.local_request() or also, self.device)


def any_rank(flag: bool, device: str = "cpu") -> bool:
    """True on every rank when ``flag`` is true on at least one (a no-op without a process group)."""
    import torch
    import torch.distributed as torch_dist

    if not (torch_dist.is_available() and torch_dist.is_initialized()) or torch_dist.get_world_size() == 1:
        return bool(flag)
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    torch_dist.all_reduce(value, op=torch_dist.ReduceOp.MAX)
    return bool(value.item())
