"""Fail fast: a failure on any rank ends every rank with a non-zero exit naming the failed rank, never a hang.

torchrun and the self-spawning launcher stop the siblings of a dead worker, but explicit workers and srun
tasks have no such parent, and a rank blocked in a collective waits for the whole collective timeout. Every
rank therefore keeps a watchdog that talks to the process group's own key-value store (the c10d store; we
build no transport of our own):

- an uncaught exception on rank R first records ``"rank R failed: <error>"`` under a ``failed`` key (the first
  record wins), then prints its traceback and exits as usual;
- each rank's watchdog thread polls the ``failed`` key and leaves at once (``os._exit(EXIT_PEER_FAILED)``)
  with a message naming the failed rank, even while the main thread is blocked inside a collective;
- watchdogs bump a heartbeat counter; rank 0 records a failure for a rank whose counter stops moving for the
  collective timeout (a killed or frozen process);
- a store that stops answering means its host (rank 0 or the launcher) died: leave with an error too;
- at a clean exit every rank reports itself done, and rank 0 (which usually hosts the store) waits for the
  others before leaving so that nobody mistakes its normal exit for a failure.

Example:
    >>> watchdog = FailFast(store, rank=1, world_size=2, run_token="3f2a", timeout_s=300)  # doctest: +SKIP
    >>> watchdog.start()  # doctest: +SKIP
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import traceback
from typing import Optional

#: Exit code of a worker stopped because another worker failed (the launcher names the other one).
EXIT_PEER_FAILED = 86


class FailFast:
    """The watchdog of one rank. ``start()`` once after the process group exists; ``shutdown()`` at exit."""

    def __init__(self, store, rank: int, world_size: int, run_token: str, timeout_s: float,
                 poll_s: float = 0.5, heartbeat_s: float = 2.0, stream=None):
        self.store, self.rank, self.world_size = store, rank, world_size
        # Polling only reads; heartbeats write, and a file:// store keeps every write: beat less often.
        self.timeout_s, self.poll_s, self.heartbeat_s = float(timeout_s), poll_s, heartbeat_s
        self.stream = stream
        prefix = f"speechkit/failfast/{run_token}"
        self.failed_key = f"{prefix}/failed"
        self.exited_key = f"{prefix}/exited"
        self.heartbeat_prefix = f"{prefix}/heartbeat/"
        self.done_prefix = f"{prefix}/done/"
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._failed_here = False
        self._previous_hook = None
        self._last_beats: dict = {}
        self._shut_down = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, register_atexit: bool = True) -> None:
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        now = time.monotonic()
        self._last_beats = {r: (-1, now) for r in range(self.world_size)}
        self._thread = threading.Thread(target=self._watch, name="speechkit-failfast", daemon=True)
        self._thread.start()
        if register_atexit:
            atexit.register(self.shutdown)

    def shutdown(self) -> None:
        """Leave cleanly: stop watching, say this rank is done, and on rank 0 wait for the other ranks."""
        if self._shut_down:
            return
        self._shut_down = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 * self.poll_s + 1)
        try:
            self.store.set(f"{self.done_prefix}{self.rank}", "1")
            self.store.add(self.exited_key, 1)
            if self.rank == 0:
                self._wait_for_others()
            failure = self._failure()
        except Exception:  # the store's host is gone: nothing left to coordinate with
            return
        finally:
            if self._previous_hook is not None and sys.excepthook == self._excepthook:
                sys.excepthook = self._previous_hook
        if failure and not self._failed_here:
            self._leave(f"rank {self.rank} exits with an error because {failure}")

    def record_failure(self, message: str) -> str:
        """Record ``message`` as the failure unless another rank was first; return the recorded one."""
        self._failed_here = True
        recorded = self.store.compare_set(self.failed_key, "", message)
        return recorded.decode() if isinstance(recorded, bytes) else str(recorded)

    # -- internals --------------------------------------------------------------------------------

    def _excepthook(self, exc_type, exc, tb) -> None:
        summary = "".join(traceback.format_exception_only(exc_type, exc)).strip().splitlines()
        detail = summary[-1] if summary else exc_type.__name__
        if _looks_like_lost_peer(detail):
            detail = f"a collective lost a peer, which probably died first ({detail[:200]})"
        message = f"rank {self.rank} failed: {detail}"
        try:
            recorded = self.record_failure(message)
        except Exception:
            recorded = message
        (self._previous_hook or sys.__excepthook__)(exc_type, exc, tb)
        if recorded != message:
            self._say(f"{message}; stopped, but the first failure was: {recorded}")
        else:
            self._say(f"{message}; the other ranks are told to stop")

    def _watch(self) -> None:
        heartbeat_key = f"{self.heartbeat_prefix}{self.rank}"
        next_check = next_beat = time.monotonic()
        while not self._stop.wait(self.poll_s):
            try:
                if time.monotonic() >= next_beat:
                    self.store.add(heartbeat_key, 1)
                    next_beat = time.monotonic() + self.heartbeat_s
                failure = self._failure()
                if failure and not self._failed_here:
                    self._leave(f"rank {self.rank} stops because {failure}")
                if self.rank == 0 and time.monotonic() >= next_check:
                    next_check = time.monotonic() + self.heartbeat_s
                    self._check_heartbeats()
            except Exception as error:  # noqa: BLE001 - any store error means the rendezvous is gone
                if self._stop.is_set() or self._failed_here:
                    return
                self._leave(f"rank {self.rank} lost contact with the other workers (the rendezvous store "
                            f"stopped answering: {error}); a worker or its launcher died")

    def _check_heartbeats(self) -> None:
        now = time.monotonic()
        for other in range(self.world_size):
            if other == self.rank or self.store.check([f"{self.done_prefix}{other}"]):
                continue
            beats = self.store.add(f"{self.heartbeat_prefix}{other}", 0)
            last, since = self._last_beats[other]
            if beats != last:
                self._last_beats[other] = (beats, now)
            elif now - since > max(self.timeout_s, 5 * self.heartbeat_s):
                recorded = self.record_failure(
                    f"rank {other} failed: no sign of life for {now - since:.0f} s (killed or frozen)")
                self._leave(f"rank {self.rank} stops because {recorded}")

    def _wait_for_others(self) -> None:
        deadline = time.monotonic() + self.timeout_s
        failure_seen_at = None
        while self.store.add(self.exited_key, 0) < self.world_size and time.monotonic() < deadline:
            if failure_seen_at is None and self._failure():
                failure_seen_at = time.monotonic()
            if failure_seen_at is not None and time.monotonic() - failure_seen_at > 10 * self.poll_s + 2:
                return  # the others were told; do not wait for ranks that may be dead
            self._check_heartbeats()
            time.sleep(self.poll_s)

    def _failure(self) -> Optional[str]:
        if not self.store.check([self.failed_key]):
            return None
        value = self.store.get(self.failed_key)
        return value.decode() if isinstance(value, bytes) else str(value)

    def _leave(self, message: str) -> None:
        self._say(message)
        try:
            self.store.add(self.exited_key, 1)
        except Exception:  # noqa: BLE001 - leaving anyway
            pass
        os._exit(EXIT_PEER_FAILED)

    def _say(self, message: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"speechkit.distributed: {message}\n")
        stream.flush()


def _looks_like_lost_peer(text: str) -> bool:
    """A gloo/nccl error raised because another process vanished, not by this rank's own code."""
    lowered = text.lower()
    return any(sign in lowered for sign in ("connection reset by peer", "connection closed by peer",
                                            "broken pipe", "socket closed"))
