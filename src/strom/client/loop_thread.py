"""An event loop in a thread of its own: what the synchronous clients run on.

The asyncio clients are the real implementation; a synchronous client owns one of
these, builds its asyncio client inside the loop (asyncio objects belong to the loop
that made them) and hands every call over with ``run_coroutine_threadsafe``. The
caller's thread blocks on the answer, the loop thread keeps heartbeats, lingering
batches and prefetches going between calls, which is what a Kafka client needs even
when the application is not calling it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for its result in the calling thread."""
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("a synchronous client cannot be called from its own callbacks")
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def call(self, function: Callable[..., T], *args: Any) -> T:
        """Call a plain function on the loop (its state is the loop's alone)."""
        async def call() -> T:
            return function(*args)
        return self.run(call())

    def submit(self, awaitable: Callable[[], Awaitable[T]]) -> None:
        """Start ``awaitable()`` on the loop without waiting for it."""
        async def start() -> None:
            await awaitable()
        asyncio.run_coroutine_threadsafe(start(), self.loop)

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
