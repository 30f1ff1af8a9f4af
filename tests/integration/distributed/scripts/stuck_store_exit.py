"""A rank whose fail-fast watchdog thread is inside a store call when the script ends.

Usage: ``python stuck_store_exit.py STORE_FILE HOLD_S``. The watchdog runs on a ``FileStore``; this
script then takes the file's lock (what ``FileStore`` takes around every call) from a second descriptor,
so the watchdog thread's next store call blocks in C++. The script ends normally; the lock is released
after ``HOLD_S`` seconds (never if negative). A daemon thread still inside that C++ call when the
interpreter ends would abort the process ("terminate called without an active exception", exit 134).
"""
from __future__ import annotations

import fcntl
import os
import sys
import threading
import time

import torch.distributed as torch_dist

from speechkit.distributed.failfast import FailFast


def main(path: str, hold_s: float) -> None:
    store = torch_dist.FileStore(path, 1)
    watchdog = FailFast(store, rank=0, world_size=1, run_token="t", timeout_s=1.0, poll_s=0.05,
                        heartbeat_s=0.05)
    watchdog.start(intercept_exits=False)
    lock = os.open(path, os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    time.sleep(0.5)  # the watchdog thread now waits for the lock inside a store call
    if hold_s >= 0:
        threading.Timer(hold_s, os.close, args=(lock,)).start()
    print("work done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
