"""Workers that run the application's handler: threads for blocking code, tasks for async.

A plain function is assumed to block (a database driver, an HTTP client), so it runs on
threads; a coroutine function runs as asyncio tasks on the consumer's own loop, where
thousands can wait on I/O at once. Both pools only *run* records: choosing the next
record, and everything done with the result, stays on the event loop, so the buffers
and offset trackers need no locks.

The thread pool hands results back in batches: a finished thread appends to a list and
wakes the loop only if no wake-up is pending, so under load one loop callback carries
many results instead of one ``call_soon_threadsafe`` (and a self-pipe write) per record.
"""

from __future__ import annotations

import asyncio
import inspect
import queue
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from strom.alo.partition_buffers import WorkItem
from strom.client.fetcher import ConsumerRecord

# The application's handler: ``handle(record)``; raising means "failed, retry it".
Handler = Callable[[ConsumerRecord], Any]
AsyncHandler = Callable[[ConsumerRecord], Awaitable[Any]]
# Results for the loop: (item, None) when it succeeded, (item, error) when it raised.
Done = Callable[[list[tuple[WorkItem, BaseException | None]]], None]
_STOP = None


class WorkerPool(Protocol):
    workers: int

    def submit(self, item: WorkItem) -> None: ...

    async def close(self) -> None: ...


def is_async_handler(handler: Callable[..., Any]) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - a callable object's async __call__
    return inspect.iscoroutinefunction(handler) or (call is not None and inspect.iscoroutinefunction(call))


class AsyncWorkerPool:
    """Up to ``workers`` handler coroutines at once, as tasks on the consumer's loop."""

    def __init__(self, handler: AsyncHandler, workers: int, done: Done) -> None:
        self.handler = handler
        self.workers = workers
        self._done = done
        self._tasks: set[asyncio.Task[None]] = set()

    def submit(self, item: WorkItem) -> None:
        task = asyncio.get_running_loop().create_task(self._run(item))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, item: WorkItem) -> None:
        try:
            await self.handler(item.record)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the handler's failure is the record's, never the pool's
            self._done([(item, exc)])
            return
        self._done([(item, None)])

    async def close(self) -> None:
        """Cancel what still runs (the consumer has already waited as long as it would)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class ThreadWorkerPool:
    """``workers`` threads taking records from one queue; results go back in batches."""

    def __init__(self, handler: Handler, workers: int, done: Done, *, name: str = "alo-worker") -> None:
        self.handler = handler
        self.workers = workers
        self._done = done
        self._loop = asyncio.get_running_loop()
        self._queue: queue.SimpleQueue[WorkItem | None] = queue.SimpleQueue()
        self._results: list[tuple[WorkItem, BaseException | None]] = []
        self._wake_pending = False
        self._threads = [threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
                         for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, item: WorkItem) -> None:
        self._queue.put(item)

    def _work(self) -> None:
        get, handler, results = self._queue.get, self.handler, self._results
        while True:
            item = get()
            if item is _STOP:
                return
            error: BaseException | None = None
            try:
                handler(item.record)
            except BaseException as exc:  # a failed record, retried by the consumer
                error = exc
            results.append((item, error))  # list.append is atomic under the GIL
            if not self._wake_pending:
                self._wake_pending = True
                try:
                    self._loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:  # the loop is closed: nobody waits for results any more
                    return

    def _deliver(self) -> None:
        # Clear the flag before taking results: a thread appending after the take sees
        # it clear and schedules another delivery, so no result is stranded. The list is
        # never replaced (threads hold it); its head is cut off in one atomic step.
        self._wake_pending = False
        results = self._results
        count = len(results)
        if count:
            batch = results[:count]
            del results[:count]
            self._done(batch)

    async def close(self) -> None:
        """Stop the threads once they finish the record in hand (a thread cannot be
        interrupted); they are daemons, so a handler stuck forever does not hang exit."""
        for _ in self._threads:
            self._queue.put(_STOP)
        await asyncio.to_thread(self._join)
        self._deliver()

    def _join(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout  # one bound for all: 64 stuck threads wait 5 s, not 320
        for thread in self._threads:
            thread.join(timeout=max(deadline - time.monotonic(), 0))


def make_pool(handler: Callable[[ConsumerRecord], Any], workers: int, done: Done) -> WorkerPool:
    """The pool that suits ``handler``: tasks for a coroutine function, threads otherwise."""
    if is_async_handler(handler):
        return AsyncWorkerPool(handler, workers, done)
    return ThreadWorkerPool(handler, workers, done)
