"""Fail fast: a failure on any rank ends every rank with a non-zero exit naming the failed rank, never a hang.

torchrun and the self-spawning launcher stop the siblings of a dead worker, but explicit workers and srun
tasks have no such parent, and a rank blocked in a collective waits for the whole collective timeout. Every
rank therefore keeps a watchdog that talks to the process group's own key-value store (the c10d store; we
build no transport of our own):

- an uncaught exception on rank R first records ``"rank R failed: <error>"`` under a ``failed`` key (the first
  record wins), then prints its traceback and exits as usual; ``sys.exit(N)`` and ``os._exit(N)`` with a code
  other than 0 and ``EXIT_PREEMPTED`` record ``"rank R exited with code N"`` the same way;
- each rank's watchdog thread polls the ``failed`` key and, even while the main thread is blocked inside a
  collective, acknowledges the failure, waits (bounded) until the failed process has ended, and leaves
  (``os._exit(EXIT_PEER_FAILED)``) with a message naming the failed rank. The failed rank waits for the
  acknowledgements (so that nobody misses its record when its process hosted the store) and exits first, with
  its own code: torchrun and the self-spawning launcher see it first and report it as the root cause
  (``processes.write_torchelastic_error_file`` also gives torchrun its message and traceback);
- watchdogs bump a heartbeat counter; rank 0 records a failure for a rank whose counter stops moving for the
  collective timeout (a killed or frozen process);
- a rank whose collective breaks because a peer vanished (killed, or crashed in native code, so it recorded
  nothing) records the failure in the name of the rank whose process ended, and stops because of it;
- a store that stops answering means its host (rank 0 or the launcher) died: leave with an error too;
- at a clean exit every rank reports itself done, and rank 0 (which usually hosts the store) waits for the
  others before leaving so that nobody mistakes its normal exit for a failure. The watchdog thread is out of
  every store call before that (see ``_stop_thread``): a daemon thread inside C++ when the interpreter ends
  aborts the process.

Example:
    >>> watchdog = FailFast(store, rank=1, world_size=2, run_token="3f2a", timeout_s=300)  # doctest: +SKIP
    >>> watchdog.start()  # doctest: +SKIP
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import threading
import time
import traceback
from typing import Optional

from speechkit.distributed.processes import (
    exit_code_of,
    host_identity,
    process_state,
    write_torchelastic_error_file,
)
from speechkit.errors import EXIT_PREEMPTED

#: Exit code of a worker stopped because another worker failed (the launcher names the other one).
EXIT_PEER_FAILED = 86
#: Longest wait of a stopped rank for the failed process to end (a failed rank may hang in its own shutdown).
FAILED_RANK_WAIT_S = 60.0
#: Longest wait of a failed rank for the others to acknowledge its failure (a peer may have died too).
ACKNOWLEDGE_WAIT_S = 15.0
#: An ended process whose parent does not reap it (a shell, a test harness) counts as gone after this long.
UNREAPED_GRACE_S = 2.0
#: Across machines only the failed rank's last word in the store is seen; its interpreter still shuts down.
OTHER_HOST_GRACE_S = 5.0
#: Longest look for the rank that died when a collective loses a peer (heartbeats of other machines).
DEAD_PEER_WAIT_S = 8.0

# The real exits: the watchdog's own exit must not go through the interception below.
_real_os_exit = os._exit
_real_sys_exit = sys.exit


class FailFast:
    """The watchdog of one rank. ``start()`` once after the process group exists; ``shutdown()`` at exit."""

    def __init__(self, store, rank: int, world_size: int, run_token: str, timeout_s: float,
                 poll_s: float = 0.5, heartbeat_s: float = 2.0, stream=None,
                 store_host: Optional[int] = None):
        self.store, self.rank, self.world_size = store, rank, world_size
        # The rank whose process serves the store (explicit workers and srun: rank 0), None when a launcher
        # or a file serves it: when the store stops answering, that rank is the one that died.
        self.store_host = store_host
        # Polling only reads; heartbeats write, and a file:// store keeps every write: beat less often.
        self.timeout_s, self.poll_s, self.heartbeat_s = float(timeout_s), poll_s, heartbeat_s
        self.stream = stream
        prefix = f"speechkit/failfast/{run_token}"
        self.failed_key = f"{prefix}/failed"
        self.exited_key = f"{prefix}/exited"
        self.heartbeat_prefix = f"{prefix}/heartbeat/"
        self.done_prefix = f"{prefix}/done/"
        self.seen_prefix = f"{prefix}/seen/"        # "I saw the failure" (the failed rank waits for these)
        self.process_prefix = f"{prefix}/process/"  # host identity and pid of each rank
        self.ended_prefix = f"{prefix}/ended/"      # the exit code a failed rank is about to end with
        self._stop = threading.Event()
        self._stopping = threading.Event()          # this rank is stopping because of another one
        self._stopping_lock = threading.Lock()
        # Held by the watchdog thread around its store calls: at exit, once the main thread holds it, the
        # thread is in no C++ call (a daemon thread inside one when the interpreter ends aborts the process)
        self._store_lock = threading.Lock()
        self.all_done = False                       # rank 0: every rank reported itself done at exit
        self._thread: Optional[threading.Thread] = None
        self._failed_here = False                   # this rank raised or exited with an error code
        self._first_hand = False                    # ... and its record was the first one
        self._exit_status = None                    # what sys.exit was given on this rank, and where
        self._exit_stack = ""
        self._pid = os.getpid()
        self._previous_hook = None
        self._last_beats: dict = {}
        self._shut_down = False

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self, register_atexit: bool = True, intercept_exits: bool = True) -> None:
        self.store.set(f"{self.process_prefix}{self.rank}", f"{host_identity()}\n{self._pid}")
        self._previous_hook = sys.excepthook
        sys.excepthook = self._excepthook
        if intercept_exits:
            sys.exit, os._exit = self._sys_exit, self._os_exit
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
        code = exit_code_of(self._exit_status)
        self._stop_thread(code)
        self._restore_hooks()
        try:
            if not self._failed_here and _is_failure(code):  # sys.exit(N) on this rank
                self._fail_by_exit(code, "sys.exit", self._exit_stack)
            if self._first_hand:
                self._wait_for_acknowledgements()
                self.store.set(f"{self.ended_prefix}{self.rank}", str(code if _is_failure(code) else 1))
                return
            self.store.set(f"{self.done_prefix}{self.rank}", "1")
            self.store.add(self.exited_key, 1)
            if self.rank == 0:
                self._wait_for_others()
            failure = self._failure()
        except Exception:  # the store's host is gone: nothing left to coordinate with
            return
        if failure and not self._first_hand:
            self._stop_because(failure, f"rank {self.rank} exits with an error")

    def _stop_thread(self, code: int) -> None:
        """Stop the watchdog thread and wait until it is out of every store call.

        A daemon thread still inside a C++ store call when the interpreter finalizes is ended by Python
        while it holds C++ frames, and the C++ runtime aborts the whole process ("terminate called without
        an active exception", exit 134) after a successful run. Store calls are bounded by the store's
        timeout; should one still not return, the process leaves now, with its exit code, rather than
        abort in the interpreter's teardown.
        """
        self._stop.set()
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return
        limit = self.timeout_s + 10 * self.poll_s + 5
        if self._store_lock.acquire(timeout=limit):
            self._store_lock.release()  # the thread sees the stop flag before its next store call
            thread.join(timeout=limit)
        if thread.is_alive():
            self._say(f"rank {self.rank}: the watchdog thread did not stop within {limit:.0f} s (a store "
                      "call that does not return); leaving without the interpreter's teardown")
            _flush_standard_streams()
            _real_os_exit(code if code or not self._failed_here else 1)

    def record_failure(self, message: str) -> str:
        """Record ``message`` as the failure unless another rank was first; return the recorded one."""
        self._failed_here = True
        recorded = self.store.compare_set(self.failed_key, "", message)
        recorded = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
        self._first_hand = self._first_hand or recorded == message
        return recorded

    # -- internals --------------------------------------------------------------------------------

    def _excepthook(self, exc_type, exc, tb) -> None:
        summary = "".join(traceback.format_exception_only(exc_type, exc)).strip().splitlines()
        detail = summary[-1] if summary else exc_type.__name__
        if _looks_like_lost_peer(detail) and not self._stopping.is_set():
            self._stop_for_lost_peer(detail)  # returns only when no dead peer can be named
            detail = f"a collective lost a peer, which probably died first ({detail[:200]})"
        message = f"rank {self.rank} failed: {detail}"
        if self._stopping.is_set():  # the watchdog is already ending this rank because of another one,
            # whose end broke what this rank was doing: one line, not a traceback of the consequence.
            self._say(f"rank {self.rank}, while stopping, got: {detail.splitlines()[0][:200]}")
            self._park()
        try:
            recorded = self.record_failure(message)
        except Exception:
            recorded = message
            self._first_hand = True
        (self._previous_hook or sys.__excepthook__)(exc_type, exc, tb)
        if recorded != message:
            self._say(f"{message}; stopped, but the first failure was: {recorded}")
            self._stop_because(recorded, f"rank {self.rank} stops")
        self._say(f"{message}; the other ranks are told to stop")
        write_torchelastic_error_file(f"{message} (exit code 1)",
                                      "".join(traceback.format_exception(exc_type, exc, tb)))

    def _stop_for_lost_peer(self, detail: str) -> None:
        """A collective broke because a peer vanished: name the rank that died, and stop because of it.

        The dead rank reported nothing (killed by a signal, or crashed in native code), so its failure is
        recorded here in its name: every rank then says which rank died, and this one exits with
        ``EXIT_PEER_FAILED`` instead of blaming itself. Returns when no dead rank can be found.
        """
        try:
            dead = [] if self._failure() else self._dead_peers()
            # a rank that fails with an error records it before its process ends: read the record after
            recorded = self._failure()
        except Exception as error:  # noqa: BLE001 - the store is gone with its host
            if self.store_host is None or self.store_host == self.rank:
                return
            self._leave(self._store_lost(str(error)))
        if not recorded:
            if not dead:
                return
            ranks = ", ".join(map(str, dead))
            message = (f"rank {dead[0]} failed: its process ended without reporting an error (killed by "
                       f"a signal, e.g. for lack of memory, or crashed in native code; ended: rank(s) "
                       f"{ranks}); rank {self.rank} lost it in a collective ({detail[:200]})")
            try:
                recorded = self.store.compare_set(self.failed_key, "", message)
                recorded = recorded.decode() if isinstance(recorded, bytes) else str(recorded)
            except Exception:  # noqa: BLE001 - say it anyway
                recorded = message
        self._stop_because(recorded, f"rank {self.rank} stops")

    def _dead_peers(self) -> list:
        """Ranks whose process has ended although they did not report themselves done (none once a
        failure is recorded: a rank that fails with an error records it before it ends).

        On this machine the kernel says so at once; a rank on another machine counts as dead once its
        heartbeat has not moved for ``2.5 x heartbeat_s`` (looked at for up to ``DEAD_PEER_WAIT_S``).
        """
        others = [r for r in range(self.world_size) if r != self.rank]
        # (a rank without a process record is looked at through its heartbeat: get() would wait for it)
        pids = {r: self._local_pid(r) if self.store.check([f"{self.process_prefix}{r}"]) else None
                for r in others}
        first_beats: dict = {}
        deadline = time.monotonic() + DEAD_PEER_WAIT_S
        while not self.store.check([self.failed_key]):
            running = [r for r in others if not self.store.check([f"{self.done_prefix}{r}"])]
            dead = [r for r in running if pids[r] is not None and process_state(pids[r]) != "running"]
            if dead:
                return dead
            now = time.monotonic()
            for other in (r for r in running if pids[r] is None):
                beats = self.store.add(f"{self.heartbeat_prefix}{other}", 0)
                last, since = first_beats.setdefault(other, (beats, now))
                if beats != last:
                    first_beats[other] = (beats, now)
                elif now - since > 2.5 * self.heartbeat_s:
                    dead.append(other)
            if dead or now > deadline:
                return dead
            time.sleep(min(self.poll_s, 0.1))
        return []

    def _sys_exit(self, status=None):
        # Not in a forked child (a data-loading worker sharing the store's socket), nor in a thread, which
        # sys.exit only ends. Acted on at exit (shutdown), where the process really ends.
        if os.getpid() == self._pid and threading.current_thread() is threading.main_thread():
            self._exit_status = status
            self._exit_stack = "".join(traceback.format_stack(sys._getframe(1)))
        _real_sys_exit(status)

    def _os_exit(self, code):
        if os.getpid() == self._pid and not self._failed_here and _is_failure(code):
            try:
                self._fail_by_exit(int(code), "os._exit", "".join(traceback.format_stack(sys._getframe(1))))
                if self._first_hand:
                    self._wait_for_acknowledgements()
                    self.store.set(f"{self.ended_prefix}{self.rank}", str(int(code)))
            except Exception:  # noqa: BLE001 - the exit comes first
                pass
        _real_os_exit(code)

    def _fail_by_exit(self, code: int, how: str, stack: str) -> None:
        message = f"rank {self.rank} exited with code {code} ({how})"
        recorded = self.record_failure(message)
        if recorded != message:
            self._stop_because(recorded, f"rank {self.rank} stops")
        self._say(f"{message}; the other ranks are told to stop")
        write_torchelastic_error_file(message, f"{how}({code}) called from:\n{stack}")

    def _restore_hooks(self) -> None:
        if self._previous_hook is not None and sys.excepthook == self._excepthook:
            sys.excepthook = self._previous_hook
        if sys.exit == self._sys_exit:
            sys.exit = _real_sys_exit
        if os._exit == self._os_exit:
            os._exit = _real_os_exit

    def _watch(self) -> None:
        heartbeat_key = f"{self.heartbeat_prefix}{self.rank}"
        next_check = next_beat = time.monotonic()
        while not self._stop.wait(self.poll_s):
            with self._store_lock:  # see _stop_thread: no store call may start once the stop is set
                if self._stop.is_set():
                    return
                try:
                    if time.monotonic() >= next_beat:
                        self.store.add(heartbeat_key, 1)
                        next_beat = time.monotonic() + self.heartbeat_s
                    failure = self._failure()
                    if failure and not self._failed_here:
                        self._stop_because(failure, f"rank {self.rank} stops")
                    if self.rank == 0 and time.monotonic() >= next_check:
                        next_check = time.monotonic() + self.heartbeat_s
                        self._check_heartbeats()
                except Exception as error:  # noqa: BLE001 - any store error means the rendezvous is gone
                    if self._stop.is_set() or self._failed_here:
                        return
                    self._leave(self._store_lost(str(error)))

    def _store_lost(self, error: str) -> str:
        """What to say when the store stops answering: its host died (named when it is a rank)."""
        if self.store_host is not None and self.store_host != self.rank:
            return (f"rank {self.rank} stops because rank {self.store_host} failed: its process ended "
                    f"without reporting an error (the rendezvous store it served stopped answering: "
                    f"{error[:200]})")
        return (f"rank {self.rank} lost contact with the other workers (the rendezvous store stopped "
                f"answering: {error[:200]}); a worker or its launcher died")

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
        while self.store.add(self.exited_key, 0) < self.world_size and time.monotonic() < deadline:
            failure = self._failure()
            if failure:
                self._stop_because(failure, f"rank {self.rank} exits with an error")
            self._check_heartbeats()
            time.sleep(self.poll_s)
        self.all_done = self.store.add(self.exited_key, 0) >= self.world_size

    def _stop_because(self, failure: str, what: str) -> None:
        """Acknowledge another rank's failure, let its process end first, then leave with EXIT_PEER_FAILED."""
        if not self._stopping_lock.acquire(blocking=False):  # another thread of this rank is doing it
            self._park()
        self._stopping.set()
        self._say(f"{what} because {failure}")  # now: a launcher may terminate this rank while it waits
        try:
            self.store.set(f"{self.seen_prefix}{self.rank}", "1")
        except Exception:  # noqa: BLE001 - the store's host ended: nothing to acknowledge to
            pass
        failed = _failed_rank(failure)
        if failed is not None and failed != self.rank and "no sign of life" not in failure:
            self._wait_until_ended(failed)
        self._leave(None)

    def _wait_until_ended(self, failed: int) -> None:
        """Return once rank ``failed``'s process has ended (bounded by FAILED_RANK_WAIT_S)."""
        deadline = time.monotonic() + FAILED_RANK_WAIT_S
        try:
            pid = self._local_pid(failed)
        except Exception:  # noqa: BLE001 - no record of it, or the store's host (the failed rank) ended
            return
        local = pid is not None
        ended_at = None
        while time.monotonic() < deadline:
            if local:
                state = process_state(pid)
                if state == "gone":  # reaped: its launcher has seen its exit code
                    return
                ended = state == "exited"
            else:
                try:
                    ended = self.store.check([f"{self.ended_prefix}{failed}"])
                except Exception:  # noqa: BLE001 - the store lived in the failed process
                    return
            if ended:
                ended_at = ended_at or time.monotonic()
                if time.monotonic() - ended_at > (UNREAPED_GRACE_S if local else OTHER_HOST_GRACE_S):
                    return
            time.sleep(min(self.poll_s, 0.1))

    def _wait_for_acknowledgements(self) -> None:
        """The failed rank: wait (bounded) until every other rank has seen the failure, is done or is dead."""
        deadline = time.monotonic() + ACKNOWLEDGE_WAIT_S
        waiting = set(range(self.world_size)) - {self.rank}
        while waiting and time.monotonic() < deadline:
            waiting = {r for r in waiting if not self.store.check([f"{self.seen_prefix}{r}"])
                       and not self.store.check([f"{self.done_prefix}{r}"]) and not self._is_dead(r)}
            if waiting:
                time.sleep(min(self.poll_s, 0.1))

    def _local_pid(self, rank: int) -> Optional[int]:
        """The pid of ``rank`` if it runs on this machine (so that the kernel can tell when it ended)."""
        host, _, pid = self.store.get(f"{self.process_prefix}{rank}").decode().rpartition("\n")
        return int(pid) if host == host_identity() else None

    def _is_dead(self, rank: int) -> bool:
        """Whether ``rank`` is known to have ended (only on this machine), e.g. killed with the failure."""
        try:
            pid = self._local_pid(rank)
        except Exception:  # noqa: BLE001 - no record: cannot tell
            return False
        return pid is not None and process_state(pid) != "running"

    def _park(self) -> None:
        """Wait for the thread that is ending this process."""
        while True:
            time.sleep(1.0)

    def _failure(self) -> Optional[str]:
        if not self.store.check([self.failed_key]):
            return None
        value = self.store.get(self.failed_key)
        return value.decode() if isinstance(value, bytes) else str(value)

    def _leave(self, message: Optional[str]) -> None:
        # No last word to the store: whoever waits for this rank (rank 0 at its exit) stops on the failure
        # record, and the store may have died with the failed rank (a failing call prints a C++ trace).
        if message:
            self._say(message)
        _real_os_exit(EXIT_PEER_FAILED)

    def _say(self, message: str) -> None:
        stream = self.stream or sys.stderr
        stream.write(f"speechkit.distributed: {message}\n")
        stream.flush()


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream has nothing to flush
            pass


def _is_failure(code: int) -> bool:
    return code not in (0, EXIT_PREEMPTED)  # a preemption save ends every rank with EXIT_PREEMPTED


def _failed_rank(failure: str) -> Optional[int]:
    """The rank a record names first: records read ``rank R failed: ...`` or ``rank R exited ...``."""
    match = re.match(r"rank (\d+) ", failure)
    return int(match.group(1)) if match else None


def _looks_like_lost_peer(text: str) -> bool:
    """A gloo/nccl error raised because another process vanished, not by this rank's own code."""
    lowered = text.lower()
    return any(sign in lowered for sign in ("connection reset by peer", "connection closed by peer",
                                            "broken pipe", "socket closed"))
