"""The producer's ``buffer.memory``: how many bytes open and unacknowledged batches may hold.

An append that needs a new batch and finds the memory spent waits here, first come
first served, up to ``max.block.ms``, then fails with ``BufferExhaustedError``: the
back-pressure that keeps a producer faster than its brokers from growing without bound.
"""

from __future__ import annotations

import asyncio
from collections import deque

from strom.client.errors import ClientClosedError, KafkaError, KafkaTimeoutError
from strom.protocol.error_codes import ErrorCode


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` stayed full for ``max.block.ms``: records arrive faster than sent."""


class RecordTooLargeError(KafkaError):
    """A record that could never fit in ``buffer.memory``, so waiting would not help."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.MESSAGE_TOO_LARGE, message)


class BufferPool:
    """``buffer.memory`` accounting: no buffers are pooled, only their bytes counted.

    Waiters are served strictly in arrival order, so a large request is not starved
    by a stream of small ones (the Java client's ``BufferPool`` does the same).
    """

    __slots__ = ("_closed", "_waiters", "available", "total_memory")

    def __init__(self, total_memory: int) -> None:
        self.total_memory = total_memory
        self.available = total_memory
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._closed = False

    def try_allocate(self, size: int) -> bool:
        if self._waiters or size > self.available:
            return False
        self.available -= size
        return True

    async def allocate(self, size: int, max_block_ms: int) -> None:
        if size > self.total_memory:
            raise RecordTooLargeError(
                f"a batch of {size} bytes is larger than buffer.memory ({self.total_memory})"
            )
        if self.try_allocate(size):
            return
        if self._closed:
            raise ClientClosedError("the producer was closed while allocating memory")
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, waiter)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(max_block_ms / 1000):
                await waiter
        except TimeoutError:
            self._abandon(entry)
            raise BufferExhaustedError(
                f"failed to allocate {size} bytes within max.block.ms ({max_block_ms} ms); "
                f"buffer.memory is {self.total_memory}, {self.available} available"
            ) from None
        except BaseException:
            self._abandon(entry)
            raise

    def _abandon(self, entry: tuple[int, asyncio.Future[None]]) -> None:
        size, waiter = entry
        if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
            self.release(size)  # granted just as the wait ended: give it back
        elif entry in self._waiters:
            self._waiters.remove(entry)
            self._wake()

    def release(self, size: int) -> None:
        self.available += size
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.available:
            size, waiter = self._waiters.popleft()
            if not waiter.done():
                self.available -= size
                waiter.set_result(None)

    @property
    def queued(self) -> int:
        """Appends waiting for memory."""
        return len(self._waiters)

    def close(self) -> None:
        self._closed = True
        while self._waiters:
            _, waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(
                    ClientClosedError("the producer was closed while allocating memory")
                )
