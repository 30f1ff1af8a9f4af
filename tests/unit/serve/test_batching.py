"""The batching queue on its own: what goes into a batch (items, seconds, wait), a failing request isolated
from its batch-mates, a cancelled caller skipped, a full queue answered at once."""
from __future__ import annotations

import asyncio
import threading

import pytest

from speechkit.serve.batching import Batcher
from speechkit.serve.errors import RequestError
from speechkit.serve.limits import ServeLimits


def run_batcher(items, limits: ServeLimits, run_batch=None, cost=lambda x: 1.0):
    """Submit ``items`` all at once; the batches the model saw and each item's result (or exception)."""
    seen = []

    def default(batch):
        seen.append(list(batch))
        return [x * 10 for x in batch]

    async def main():
        batcher = Batcher(run_batch or default, cost, limits, "test")
        batcher.start()
        results = await asyncio.gather(*(batcher.submit(x) for x in items), return_exceptions=True)
        await batcher.stop()
        return results

    return seen, asyncio.run(main())


def test_requests_arriving_together_share_a_batch_up_to_the_item_limit():
    seen, results = run_batcher(list(range(7)), ServeLimits(max_batch_items=3, max_wait_ms=50))
    assert seen == [[0, 1, 2], [3, 4, 5], [6]]
    assert [r.output for r in results] == [0, 10, 20, 30, 40, 50, 60]
    assert [r.batch_items for r in results] == [3, 3, 3, 3, 3, 3, 1]


def test_a_batch_holds_at_most_max_batch_seconds_and_keeps_the_order():
    seen, _ = run_batcher([4, 3, 2, 5, 1], ServeLimits(max_batch_seconds=6, max_wait_ms=50), cost=float)
    assert seen == [[4], [3, 2], [5, 1]]


def test_one_request_that_breaks_the_model_fails_alone():
    def run_batch(batch):
        if 13 in batch:
            raise ValueError("unlucky")
        return [x + 1 for x in batch]

    _, results = run_batcher([1, 13, 2], ServeLimits(max_wait_ms=50), run_batch=run_batch)
    assert results[0].output == 2 and results[2].output == 3
    assert isinstance(results[1], ValueError)


def test_a_full_queue_answers_503_at_once():
    release = threading.Event()

    def run_batch(batch):
        release.wait(30)  # the model is busy until the test says so
        return batch

    async def main():
        batcher = Batcher(run_batch, lambda x: 1.0, ServeLimits(queue_size=1, max_batch_items=1), "q")
        batcher.start()
        running = asyncio.ensure_future(batcher.submit(1))
        while batcher.running == 0:  # the first request is in the model
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(batcher.submit(2))
        await asyncio.sleep(0.01)
        with pytest.raises(RequestError) as busy:
            await batcher.submit(3)
        release.set()
        answers = [(await running).output, (await queued).output]
        await batcher.stop()
        return busy.value, answers

    error, answers = asyncio.run(main())
    assert error.status == 503 and "1 requests waiting" in error.message
    assert answers == [1, 2]


def test_a_cancelled_caller_is_not_computed():
    seen = []

    async def main():
        batcher = Batcher(lambda batch: seen.append(list(batch)) or batch, lambda x: 1.0,
                          ServeLimits(max_wait_ms=100), "c")
        batcher.start()
        gone = asyncio.ensure_future(batcher.submit("gone"))
        kept = asyncio.ensure_future(batcher.submit("kept"))
        await asyncio.sleep(0.01)  # both queued, the batch still waiting for more
        gone.cancel()
        result = await kept
        await batcher.stop()
        return result

    assert asyncio.run(main()).output == "kept"
    assert seen == [["kept"]]


def test_a_lone_request_does_not_wait_for_company():
    """With a wait of a minute, a request that finds the queue empty still runs at once; requests that
    arrive together still share a batch."""
    seen = []

    async def main():
        batcher = Batcher(lambda batch: seen.append(list(batch)) or batch, lambda x: 1.0,
                          ServeLimits(max_wait_ms=60_000, max_batch_items=3), "lone")
        batcher.start()
        alone = await asyncio.wait_for(batcher.submit("alone"), timeout=30)  # would take 60 s if it waited
        together = await asyncio.gather(*(batcher.submit(x) for x in "abc"))
        await batcher.stop()
        return alone, together

    alone, together = asyncio.run(main())
    assert alone.output == "alone" and alone.batch_items == 1
    assert [r.output for r in together] == ["a", "b", "c"] and seen[-1] == ["a", "b", "c"]
