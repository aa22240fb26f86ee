"""Kafka's scheduler, on the event loop: work that runs every so often (retention,
flushes, checkpoints, expiry). A failure is logged and the next round still runs, so
one bad pass never stops the broker's housekeeping for good."""

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
