"""Delayed operations keyed by partition: Kafka's ``DelayedOperationPurgatory``, on asyncio.

A request that cannot be answered yet — a Fetch below ``fetch.min.bytes``, an
``acks=-1`` Produce whose records the ISR has not all got — waits here, watching the
partitions it depends on, until ``check_and_complete(partition)`` says one of them
moved or its timeout passes. The waiter then checks its own condition again
(re-reads, compares the high watermark): a wake-up is a hint, not a promise, so a
spurious one costs a re-check and never a wrong answer.

Everything runs on the broker's event loop; the loop is the one owner of this state,
so there are no locks. A timer per wait (``call_later``) rather than ``wait_for``:
no task per waiting request, and a cancellation at shutdown is never swallowed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable


class DelayedOperationPurgatory:
    """Waiters by key; ``name`` says what moving means here (e.g. "high watermark")."""

    def __init__(self, name: str) -> None:
        self.name = name
        # Read directly on hot paths (``if purgatory.watchers:``): no call when nobody waits.
        self.watchers: dict[Hashable, set[asyncio.Future[bool]]] = {}

    async def wait(self, keys: Iterable[Hashable], timeout: float) -> bool:
        """True when any of ``keys`` completes, False after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        watched = list(keys)
        for key in watched:
            self.watchers.setdefault(key, set()).add(future)
        timer = loop.call_later(max(timeout, 0.0), _resolve, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            for key in watched:
                waiting = self.watchers.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self.watchers[key]

    def check_and_complete(self, key: Hashable) -> int:
        """Wake everything watching ``key``; returns how many were woken."""
        waiting = self.watchers.pop(key, None)
        if not waiting:
            return 0
        for future in waiting:
            _resolve(future, True)
        return len(waiting)


def _resolve(future: asyncio.Future[bool], completed: bool) -> None:
    if not future.done():
        future.set_result(completed)
