"""PreemptionHandler turns SIGTERM/SIGUSR1 into a flag and gives the old handlers back."""

from __future__ import annotations

import os
import signal

from speechkit.distributed.signals import PreemptionHandler, any_rank


def test_sigterm_and_sigusr1_set_the_flag_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGTERM)
    for signum in (signal.SIGTERM, signal.SIGUSR1):
        with PreemptionHandler() as handler:
            assert not handler.requested()
            os.kill(os.getpid(), signum)
            assert handler.requested() and handler.received == signum
    assert signal.getsignal(signal.SIGTERM) == before


def test_any_rank_without_process_group_is_the_local_flag():
    assert any_rank(True) is True and any_rank(False) is False
