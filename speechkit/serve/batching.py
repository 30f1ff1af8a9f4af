"""Dynamic batching: requests for one model that arrive together go through one forward pass.

The wait is adaptive: a request that finds nobody else queued runs at once (a lone client is served as
fast as one-at-a-time serving would); when others are queued, clients are arriving together, and the batch
waits at most ``max_wait_ms`` for more to join it. A batch holds at most
``max_batch_items`` requests and ``max_batch_seconds`` of audio; at most ``queue_size`` requests wait, and
the next one is told the server is busy (503) rather than made to wait behind a long queue. The model runs in
a thread of its own, so the event loop keeps accepting requests (and filling the next batch) meanwhile.

Batching is safe because every interface is batch-invariant (docs/design.md, contract 2): an item's answer
is the same alone or padded in any batch. When a batch raises, each of its requests is run again alone, so
one bad request fails by itself and never takes its batch-mates down with it.

Example:
    >>> async def main():
    ...     batcher = Batcher(lambda items: [x * 2 for x in items], cost=lambda x: 1.0,
    ...                       limits=ServeLimits(), name="double")
    ...     batcher.start()
    ...     results = await asyncio.gather(*(batcher.submit(i) for i in range(3)))
    ...     await batcher.stop()
    ...     return [r.output for r in results]
    >>> asyncio.run(main())
    [0, 2, 4]
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import logging
import time
from typing import Any, Callable, Optional

from speechkit.serve.errors import RequestError
from speechkit.serve.limits import ServeLimits

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class BatchResult:
    """One request's output and how it was served."""

    output: Any
    queue_ms: float  # from submission to the start of its batch's forward pass
    compute_ms: float  # the batch's forward pass
    batch_items: int  # requests in its batch


@dataclasses.dataclass
class _Pending:
    item: Any
    seconds: float
    future: asyncio.Future
    submitted: float


class Batcher:
    """Collects requests into batches and runs ``run_batch`` on them in a worker thread.

    Args:
        run_batch: list of inputs -> list of outputs (same order, same length).
        cost: an input's audio seconds (what ``max_batch_seconds`` counts).
        limits: the server's limits.
        name: the model's name, for messages.
    """

    def __init__(self, run_batch: Callable[[list], list], cost: Callable[[Any], float], limits: ServeLimits,
                 name: str):
        self.run_batch, self.cost, self.limits, self.name = run_batch, cost, limits, name
        self._queue: Optional[asyncio.Queue] = None
        self._carry: Optional[_Pending] = None  # taken from the queue but did not fit the last batch
        self._task: Optional[asyncio.Task] = None
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=f"model-{name}")
        self.batches = 0  # forward passes run (for logs and tests)
        self.running = 0  # requests in the forward pass now

    def start(self) -> None:
        """Start the worker on the running event loop."""
        self._queue = asyncio.Queue(maxsize=self.limits.queue_size)
        self._task = asyncio.get_running_loop().create_task(self._work(), name=f"batcher-{self.name}")

    async def stop(self) -> None:
        """Stop the worker; requests still queued get 503."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        while self._queue is not None and not self._queue.empty():
            pending = self._queue.get_nowait()
            if not pending.future.done():
                pending.future.set_exception(RequestError(503, "the server is shutting down"))
        self._executor.shutdown(wait=True)

    def queued(self) -> int:
        """Requests waiting for a batch."""
        return (self._queue.qsize() if self._queue is not None else 0) + (self._carry is not None)

    def _run_counted(self, items: list) -> list:
        self.running = len(items)
        try:
            return self._run(items)
        finally:
            self.running = 0

    async def submit(self, item: Any) -> BatchResult:
        """Queue one input and wait for its output. A caller that is cancelled (its client went away)
        leaves the queue: its item is skipped when its batch is formed.

        Raises:
            RequestError: 503 when ``queue_size`` requests already wait.
            Exception: whatever the model raised for this input run alone.
        """
        future = asyncio.get_running_loop().create_future()
        try:
            self._queue.put_nowait(_Pending(item, self.cost(item), future, time.perf_counter()))
        except asyncio.QueueFull:
            raise RequestError(503, f"model {self.name!r} has {self.limits.queue_size} requests waiting "
                                    "(--queue-size); try again shortly") from None
        return await future

    async def _next_batch(self) -> list:
        first = self._carry or await self._queue.get()
        self._carry = None
        batch, seconds = [first], first.seconds
        if self._queue.empty():  # alone: waiting would only delay it (adaptive wait)
            return [p for p in batch if not p.future.done()]
        deadline = time.perf_counter() + self.limits.max_wait_ms / 1000
        while len(batch) < self.limits.max_batch_items:
            try:
                if self._queue.empty():
                    wait = deadline - time.perf_counter()
                    if wait <= 0:
                        break
                    pending = await asyncio.wait_for(self._queue.get(), wait)
                else:
                    pending = self._queue.get_nowait()
            except asyncio.TimeoutError:
                break
            if seconds + pending.seconds > self.limits.max_batch_seconds:
                self._carry = pending  # first in the next batch: order is kept
                break
            batch.append(pending)
            seconds += pending.seconds
        return [p for p in batch if not p.future.done()]  # cancelled callers: nothing to compute

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            if not batch:
                continue
            started = time.perf_counter()
            try:
                items = [p.item for p in batch]
                outputs = await loop.run_in_executor(self._executor, self._run_counted, items)
            except Exception as error:  # noqa: BLE001 (handed to the callers below)
                outputs = None
                failure = error
            compute_ms = (time.perf_counter() - started) * 1000
            self.batches += 1
            if outputs is None and len(batch) > 1:
                # Someone in the batch makes the model raise: find who, running each alone.
                for pending in batch:
                    await self._answer_alone(loop, pending)
                continue
            for pending, output in zip(batch, outputs or [None] * len(batch)):
                if pending.future.done():
                    continue
                if outputs is None:
                    pending.future.set_exception(failure)
                else:
                    pending.future.set_result(BatchResult(output, (started - pending.submitted) * 1000,
                                                          compute_ms, len(batch)))

    async def _answer_alone(self, loop, pending: _Pending) -> None:
        started = time.perf_counter()
        try:
            output = (await loop.run_in_executor(self._executor, self._run_counted, [pending.item]))[0]
        except Exception as error:  # noqa: BLE001
            if not pending.future.done():
                pending.future.set_exception(error)
            return
        if not pending.future.done():
            pending.future.set_result(BatchResult(output, (started - pending.submitted) * 1000,
                                                  (time.perf_counter() - started) * 1000, 1))

    def _run(self, items: list) -> list:
        outputs = self.run_batch(items)
        if len(outputs) != len(items):
            raise RuntimeError(f"model {self.name!r} returned {len(outputs)} outputs for {len(items)} inputs")
        return outputs
