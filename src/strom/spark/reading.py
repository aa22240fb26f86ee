"""Executor side: one Spark task reads one offset range into Arrow record batches.

Each task has its own consumer, manually assigned to its one partition (no group: the
offsets belong to Spark), on a private event loop that lives as long as the task's
iterator. Records arrive as Arrow batches straight from the fetched bytes
(``AsyncConsumer.poll_arrow``), so no Python object is made per row; a batch is cut
at the range's end with Arrow's ``filter``.

The task ends when the consumer's *position* reaches the range's end, not when a record
with offset ``end - 1`` arrives: a compacted topic has gaps, and transaction markers and
aborted records take offsets that yield no row.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.spark.options import ClientOptions
from strom.spark.planning import DataLossError, OffsetRange

if TYPE_CHECKING:
    import pyarrow as pa

    from strom.client.consumer import AsyncConsumer

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReadTask:
    """Everything a task needs; pickled by Spark to the executor."""

    client: ClientOptions
    range: OffsetRange
    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    client_id: str


def read_range(task: ReadTask) -> Iterator[pa.RecordBatch]:
    """The records of ``task.range`` as Arrow batches with Spark's Kafka schema."""
    if task.range.size == 0:
        return
    loop = asyncio.new_event_loop()
    batches = _read(task)
    try:
        while True:
            try:
                batch = loop.run_until_complete(batches.__anext__())
            except StopAsyncIteration:
                return
            yield batch
    finally:
        loop.run_until_complete(batches.aclose())
        loop.close()


async def _read(task: ReadTask) -> AsyncGenerator[pa.RecordBatch, None]:
    import pyarrow.compute as pc

    from strom.client.consumer import AsyncConsumer
    from strom.client.fetcher import OffsetOutOfRangeError

    r = task.range
    tp = (r.topic, r.partition)
    config = {**task.client.consumer_config(task.client_id), "auto.offset.reset": "none",
              "enable.auto.commit": "false"}
    consumer = AsyncConsumer(config)
    await consumer.start()
    try:
        consumer.assign([tp])
        consumer.seek(tp, r.start)
        position = r.start
        idle_deadline = asyncio.get_running_loop().time() + task.poll_timeout_ms / 1000
        while position < r.end:
            try:
                batch = await consumer.poll_arrow(timeout_ms=1000, include_headers=task.include_headers)
            except OffsetOutOfRangeError:
                position = await _after_data_loss(consumer, task, position)
                continue
            position = await consumer.position(tp)
            if batch.num_rows:
                idle_deadline = asyncio.get_running_loop().time() + task.poll_timeout_ms / 1000
                offsets = batch.column("offset")
                if pc.max(offsets).as_py() >= r.end:
                    batch = batch.filter(pc.less(offsets, r.end))
                if batch.num_rows:
                    yield batch
            elif asyncio.get_running_loop().time() > idle_deadline:
                raise TimeoutError(f"{r.topic}-{r.partition}: no records for "
                                   f"{task.poll_timeout_ms} ms at offset {position}, "
                                   f"before the end of the range {r.end}")
    finally:
        await consumer.close()


async def _after_data_loss(consumer: AsyncConsumer, task: ReadTask, position: int) -> int:
    """Records were deleted between planning and reading."""
    r = task.range
    tp = (r.topic, r.partition)
    start = (await consumer.beginning_offsets([tp]))[tp]
    message = (f"{r.topic}-{r.partition}: offset {position} is no longer in the log "
               f"(it starts at {start}); records were deleted by retention or DeleteRecords")
    if task.fail_on_data_loss:
        raise DataLossError(message + ". Set failOnDataLoss=false to skip them.")
    # Below the log start: skip to it. At or past it, the log ends before the position
    # (a re-created topic): nothing of the range is left to read.
    resume = start if start > position else r.end
    log.warning("%s; skipping to %d (failOnDataLoss=false)", message, resume)
    if resume < r.end:
        consumer.seek(tp, resume)
    return resume
