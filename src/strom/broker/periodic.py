"""Kafka's scheduler, on the event loop: work that runs every so often (retention,
flushes, checkpoints, expiry; in a cluster, ISR expiration). A failure is logged and the
next round still runs, so one bad pass never stops the broker's housekeeping for good.
Also how a background task is stopped (``cancel_and_wait``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)


async def every(interval_ms: int, work: Callable[[], object], name: str) -> None:
    """Call ``work`` every ``interval_ms`` until cancelled."""
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            work()
        except Exception:
            logger.exception("periodic task %s failed", name)


def isr_expiration_interval_ms(replica_lag_time_max_ms: int) -> int:
    """Kafka's isr-expiration task runs every replica.lag.time.max.ms / 2, so a follower
    that stopped catching up is proposed for removal between 1 and 1.5 lag times later."""
    return max(replica_lag_time_max_ms // 2, 1)


async def cancel_and_wait(task: asyncio.Task[None] | None) -> None:
    """Cancel a background task and wait until it has ended; if our own caller is being
    cancelled meanwhile, that cancellation is not swallowed."""
    if task is None:
        return
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise
