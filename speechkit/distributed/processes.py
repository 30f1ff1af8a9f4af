"""Facts about processes that the fail-fast watchdog needs: which machine, whether a process has ended, and
torchrun's error file.

A rank stopped because another failed waits until the failed process has ended before it ends itself, so that
a launcher (torchrun, the self-spawning launcher) sees the failed rank first and reports it, with its own exit
code, as the root cause. On the same machine the wait asks the kernel about the process id; across machines it
can only rely on what the failed rank wrote to the store.

Example:
    >>> import os
    >>> process_state(os.getpid())
    'running'
    >>> same = host_identity() == host_identity()
    >>> same
    True
"""
from __future__ import annotations

import json
import os
import socket
import time
from typing import Optional

#: Environment variable in which torchrun names each worker's error file.
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


def host_identity() -> str:
    """Who can see this process's id: the host name, its boot and its pid namespace (containers differ)."""
    parts = [socket.gethostname()]
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            parts.append(boot.read().strip())
    except OSError:
        parts.append("")
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        parts.append("")
    return "|".join(parts)


def process_state(pid: int) -> str:
    """``"gone"`` (reaped by its parent), ``"exited"`` (a zombie: ended, not reaped yet) or ``"running"``."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rpartition(")")[2].split()[0]
        return "exited" if state in ("Z", "X") else "running"
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except OSError:  # exists but belongs to someone else
        return "running"
    return "running"


def write_torchelastic_error_file(message: str, details: str) -> Optional[str]:
    """Write the failure in the format torchrun reads from ``TORCHELASTIC_ERROR_FILE``, if it asks for one.

    torchrun then shows ``message`` and ``details`` (a traceback) in its failure summary, with the time of the
    failure rather than the time it noticed the exit. A file already written (by ``@record``) is kept.

    Returns:
        the path written, or ``None``.
    """
    path = os.environ.get(ERROR_FILE_ENV)
    if not path or os.path.exists(path):
        return None
    data = {"message": {"message": message,
                        "extraInfo": {"py_callstack": details, "timestamp": str(int(time.time()))}}}
    try:
        with open(path, "w") as handle:
            json.dump(data, handle)
    except OSError:
        return None
    return path


def exit_code_of(status) -> int:
    """The exit code the interpreter gives for ``sys.exit(status)`` (``None`` -> 0, a message -> 1).

    Example:
        >>> exit_code_of(None), exit_code_of(3), exit_code_of("bad config")
        (0, 3, 1)
    """
    if status is None:
        return 0
    if isinstance(status, int):
        return int(status)
    return 1
