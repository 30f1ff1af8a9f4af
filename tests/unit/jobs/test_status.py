"""`--status` of a running job: shards seen running through their lock, rates from the current run, ETA."""
from __future__ import annotations

import pytest

from speechkit.jobs import format_status, job_status
from speechkit.jobs.ledger import Ledger, ledger_path, read_ledger
from speechkit.jobs.plan import fingerprint, plan_shards, start_or_join


def test_a_running_shard_gives_the_rate_and_eta(tmp_path):
    durations = {f"u{i}": 2.0 for i in range(8)}
    shards = plan_shards(durations, 2)
    spec = {"task": "transcribe", "source": "m", "fingerprint": fingerprint(durations), "num_shards": 2,
            "task_options": {}}
    start_or_join(tmp_path, spec, shards, durations, {})
    with Ledger(ledger_path(tmp_path, 1, 2), flush_every=1) as old:  # an earlier run did one item
        old.open_run()
        old.record(shards[1][0], {"text": ""})
    ledger = Ledger(ledger_path(tmp_path, 1, 2), flush_every=1)
    ledger.open_run()
    for item_id in shards[1][1:3]:
        ledger.record(item_id, {"text": ""})
    started = read_ledger(ledger.path).runs[-1]["started"]
    status = job_status(tmp_path, now=started + 10.0)
    ledger.close()
    assert (status["done"], status["running"], status["finished"]) == (3, 1, 0)
    assert status["items_per_s"] == pytest.approx(0.2) and status["audio_s_per_s"] == pytest.approx(0.4)
    assert status["eta_s"] == pytest.approx((16.0 - 6.0) / 0.4)
    text = format_status(status)
    assert "items 3/8 (37.5%)" in text and "ETA 25 s" in text and "3/4       running (2 runs)" in text
    assert job_status(tmp_path)["running"] == 0  # the lock is released with the process's ledger


def test_a_finished_job_is_done_whatever_order_its_durations_are_added_in(tmp_path):
    # 0.1 + 0.2 + 0.3 (the plan's id order) and 0.3 + 0.2 + 0.1 (the ledger's) differ in the last bit.
    durations = {"a": 0.1, "b": 0.2, "c": 0.3}
    assert sum(durations.values()) != sum(reversed(list(durations.values())))
    spec = {"task": "transcribe", "source": "m", "fingerprint": fingerprint(durations), "num_shards": 1,
            "task_options": {}}
    start_or_join(tmp_path, spec, plan_shards(durations, 1), durations, {})
    with Ledger(ledger_path(tmp_path, 0, 1), flush_every=1) as ledger:
        ledger.open_run()
        for item_id in ("c", "b", "a"):
            ledger.record(item_id, {"text": ""})
    status = job_status(tmp_path)
    assert (status["done"], status["items"], status["running"], status["eta_s"]) == (3, 3, 0, 0.0)
    assert "ETA done" in format_status(status)
