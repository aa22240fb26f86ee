"""The synchronous clients: ``Producer``, ``Consumer`` and ``Admin`` for scripts.

Each owns an event loop thread (``LoopThread``) and the asyncio client living on it;
every method hands its call to that loop and waits. Nothing is implemented twice: the
behaviour is the asyncio client's, including the background work (lingering batches,
heartbeats, prefetching) that goes on between calls. A method's ``timeout`` bounds
the wait in the calling thread, in seconds as Python's own blocking APIs take it.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from strom.client.admin import AsyncAdmin
from strom.client.admin_types import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    CreatedTopic,
    GroupDescription,
    GroupListing,
    Lag,
    ListOffsetsResult,
    NewTopic,
    OffsetSpec,
    TopicDescription,
    TopicListing,
)
from strom.client.admin_types import TopicPartition as NamedPartition
from strom.client.config import AdminConfig, ConsumerConfig, ProducerConfig
from strom.client.consumer import AsyncConsumer, ConsumerGroupMetadata
from strom.client.fetcher import ConsumerRecord
from strom.client.loop_thread import LoopThread
from strom.client.offsets import OffsetAndMetadata
from strom.client.producer import AsyncProducer
from strom.client.producer_batch import RecordCallback, RecordMetadata
from strom.protocol.records.v2 import Buffer, HeaderInput
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa


class _SyncClient:
    _thread: LoopThread

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        raise NotImplementedError


class Producer(_SyncClient):
    """A blocking front for ``AsyncProducer``.

    ``send`` does not wait for the loop thread: records go into a queue that a task on
    the loop moves into the producer's batches, so a script can send hundreds of
    thousands of records per second. The queue holds at most ``QUEUE_RECORDS``; a
    sender that outruns the producer waits there (back-pressure, like ``buffer.memory``).
    Errors reach the record's ``callback``; without one, the first is raised by the
    next ``flush`` (or ``send``). The transactional methods first wait until the queue
    is handed over, so the records sent before a ``commit_transaction`` are in it.
    """

    QUEUE_RECORDS = 10_000

    def __init__(self, config: ProducerConfig | Mapping[str, object] | None = None, **overrides: object) -> None:
        self._thread = LoopThread("strom-producer")
        self._queue: deque[tuple[Any, ...]] = deque()
        self._room = threading.Semaphore(self.QUEUE_RECORDS)
        self._idle = True
        self._error: BaseException | None = None

        async def make() -> AsyncProducer:
            producer = await AsyncProducer(config, **overrides).start()
            self._wakeup = asyncio.Event()
            self._pump_task = asyncio.create_task(self._pump(producer))
            return producer
        try:
            self._producer = self._thread.run(make())
        except BaseException:
            self._thread.stop()
            raise

    def send(self, topic: str, value: Buffer | None = None, key: Buffer | None = None, *,
             partition: int | None = None, headers: Sequence[HeaderInput] = (),
             timestamp_ms: int | None = None, callback: RecordCallback | None = None) -> None:
        """Queue a record; ``callback(metadata, error)`` runs on the client's loop thread."""
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        self._room.acquire()
        self._queue.append((topic, value, key, partition, headers, timestamp_ms, callback))
        if self._idle:
            self._idle = False
            self._thread.loop.call_soon_threadsafe(self._wakeup.set)

    async def _pump(self, producer: AsyncProducer) -> None:
        queue, produce = self._queue, producer.produce
        while True:
            while queue:
                topic, value, key, partition, headers, timestamp_ms, callback = queue.popleft()
                self._room.release()
                try:
                    await produce(topic, value, key, partition=partition, headers=headers,
                                  timestamp_ms=timestamp_ms, callback=callback)
                except Exception as exc:
                    if callback is not None:
                        callback(None, exc)
                    elif self._error is None:
                        self._error = exc
            self._idle = True
            if queue:
                self._idle = False
                continue
            await self._wakeup.wait()
            self._wakeup.clear()

    async def _handed_over(self) -> None:
        """Wait until the pump has moved every queued record into the producer.

        Polled: the sending thread cannot touch the loop's primitives, and ``_idle``
        goes False (in ``send``) before a record could be missed.
        """
        while self._queue or not self._idle:
            await asyncio.sleep(0.001)

    def send_and_wait(self, topic: str, value: Buffer | None = None, key: Buffer | None = None, *,
                      partition: int | None = None, headers: Sequence[HeaderInput] = (),
                      timestamp_ms: int | None = None, timeout: float | None = None) -> RecordMetadata:
        self.flush(timeout)  # keep the order of records sent before
        return self._thread.run(self._producer.send_and_wait(
            topic, value, key, partition=partition, headers=headers, timestamp_ms=timestamp_ms), timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Wait until every record sent so far is acknowledged or failed."""
        async def flush() -> None:
            await self._handed_over()
            await self._producer.flush(None if timeout is None else int(timeout * 1000))
        self._thread.run(flush(), timeout)
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def partitions_for(self, topic: str) -> list[int]:
        return self._thread.run(self._producer.partitions_for(topic))

    # -- transactions: AsyncProducer's, after the records queued so far are handed over --
    def init_transactions(self, timeout: float | None = None) -> None:
        self._thread.run(self._producer.init_transactions(), timeout)

    def begin_transaction(self) -> None:
        async def begin() -> None:
            await self._handed_over()  # records sent before belong to no transaction
            self._producer.begin_transaction()
        self._thread.run(begin())

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                    group_metadata: ConsumerGroupMetadata | str,
                                    timeout: float | None = None) -> None:
        async def send_offsets() -> None:
            await self._handed_over()
            await self._producer.send_offsets_to_transaction(offsets, group_metadata)
        self._thread.run(send_offsets(), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Commit the records sent so far in the transaction; a record the producer
        refused (queued but not accepted) is raised instead, as ``flush`` raises it."""
        async def commit() -> None:
            await self._handed_over()
            if self._error is not None:
                error, self._error = self._error, None
                raise error
            await self._producer.commit_transaction()
        self._thread.run(commit(), timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        async def abort() -> None:
            await self._handed_over()
            self._error = None  # whatever failed belonged to the transaction now aborted
            await self._producer.abort_transaction()
        self._thread.run(abort(), timeout)

    def close(self, timeout: float | None = None) -> None:
        try:
            async def close() -> None:
                await self._handed_over()
                self._pump_task.cancel()
                await self._producer.close(None if timeout is None else int(timeout * 1000))
            self._thread.run(close(), timeout)
        finally:
            self._thread.stop()


class Consumer(_SyncClient):
    """A blocking front for ``AsyncConsumer``; iterate it for records one at a time."""

    def __init__(self, config: ConsumerConfig | Mapping[str, object] | None = None, **overrides: object) -> None:
        self._thread = LoopThread("strom-consumer")

        async def make() -> AsyncConsumer:
            return await AsyncConsumer(config, **overrides).start()
        try:
            self._consumer = self._thread.run(make())
        except BaseException:
            self._thread.stop()
            raise
        self._run = self._thread.run
        self._call = self._thread.call

    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        self._call(lambda: self._consumer.subscribe(topics, pattern=pattern, listener=listener))

    def unsubscribe(self) -> None:
        self._call(self._consumer.unsubscribe)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        chosen = list(partitions)
        self._call(lambda: self._consumer.assign(chosen))

    def assignment(self) -> set[TopicPartition]:
        return self._call(self._consumer.assignment)

    def poll(self, timeout_ms: int = 1_000, max_records: int | None = None) -> list[ConsumerRecord]:
        return self._run(self._consumer.poll(timeout_ms, max_records))

    def getmany(self, timeout_ms: int = 1_000,
                max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._run(self._consumer.getmany(timeout_ms, max_records))

    def poll_arrow(self, timeout_ms: int = 1_000, *, include_headers: bool = False) -> pa.RecordBatch:
        return self._run(self._consumer.poll_arrow(timeout_ms, include_headers=include_headers))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield from self.poll()

    def commit(self, offsets: Mapping[TopicPartition, int | tuple[int, str]] | None = None) -> None:
        self._run(self._consumer.commit(offsets))

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._call(self._consumer.group_metadata)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        return self._run(self._consumer.committed(list(partitions)))

    def position(self, partition: TopicPartition) -> int:
        return self._run(self._consumer.position(partition))

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._call(lambda: self._consumer.seek(partition, offset))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call(lambda: self._consumer.seek_to_beginning(*partitions))

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._call(lambda: self._consumer.seek_to_end(*partitions))

    def pause(self, *partitions: TopicPartition) -> None:
        self._call(lambda: self._consumer.pause(*partitions))

    def resume(self, *partitions: TopicPartition) -> None:
        self._call(lambda: self._consumer.resume(*partitions))

    def paused(self) -> set[TopicPartition]:
        return self._call(self._consumer.paused)

    def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._consumer.beginning_offsets(list(partitions)))

    def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return self._run(self._consumer.end_offsets(list(partitions)))

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return self._run(self._consumer.offsets_for_times(timestamps))

    def close(self) -> None:
        try:
            self._run(self._consumer.close())
        finally:
            self._thread.stop()


class Admin(_SyncClient):
    """A blocking front for ``AsyncAdmin``: the same methods, waited for."""

    def __init__(self, config: AdminConfig | Mapping[str, object] | None = None, **overrides: object) -> None:
        self._thread = LoopThread("strom-admin")

        async def make() -> AsyncAdmin:
            return await AsyncAdmin(config, **overrides).__aenter__()
        try:
            self._admin = self._thread.run(make())
        except BaseException:
            self._thread.stop()
            raise
        self._run = self._thread.run

    def create_topics(self, topics: Sequence[NewTopic], validate_only: bool = False,
                      timeout_ms: int | None = None) -> dict[str, CreatedTopic]:
        return self._run(self._admin.create_topics(topics, validate_only, timeout_ms))

    def delete_topics(self, names: Collection[str], timeout_ms: int | None = None) -> None:
        self._run(self._admin.delete_topics(names, timeout_ms))

    def list_topics(self, include_internal: bool = False) -> dict[str, TopicListing]:
        return self._run(self._admin.list_topics(include_internal))

    def describe_topics(self, names: Collection[str]) -> dict[str, TopicDescription]:
        return self._run(self._admin.describe_topics(names))

    def create_partitions(self, new_totals: Mapping[str, int], validate_only: bool = False,
                          timeout_ms: int | None = None) -> None:
        self._run(self._admin.create_partitions(new_totals, validate_only, timeout_ms))

    def describe_configs(self, resources: Collection[ConfigResource]) -> dict[ConfigResource, dict[str, ConfigEntry]]:
        return self._run(self._admin.describe_configs(resources))

    def incremental_alter_configs(self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]],
                                  validate_only: bool = False) -> None:
        self._run(self._admin.incremental_alter_configs(changes, validate_only))

    def list_groups(self) -> list[GroupListing]:
        return self._run(self._admin.list_groups())

    def describe_groups(self, group_ids: Collection[str]) -> dict[str, GroupDescription]:
        return self._run(self._admin.describe_groups(group_ids))

    def delete_groups(self, group_ids: Collection[str]) -> None:
        self._run(self._admin.delete_groups(group_ids))

    def list_consumer_group_offsets(self, group_id: str, partitions: Collection[NamedPartition] | None = None
                                    ) -> dict[NamedPartition, OffsetAndMetadata]:
        return self._run(self._admin.list_consumer_group_offsets(group_id, partitions))

    def group_lag(self, group_id: str) -> dict[NamedPartition, Lag]:
        return self._run(self._admin.group_lag(group_id))

    def alter_consumer_group_offsets(self, group_id: str,
                                     offsets: Mapping[NamedPartition, int | OffsetAndMetadata]) -> None:
        self._run(self._admin.alter_consumer_group_offsets(group_id, offsets))

    def delete_consumer_group_offsets(self, group_id: str, partitions: Collection[NamedPartition]) -> None:
        self._run(self._admin.delete_consumer_group_offsets(group_id, partitions))

    def list_offsets(self, specs: Mapping[NamedPartition, OffsetSpec],
                     isolation_level: str = "read_uncommitted") -> dict[NamedPartition, ListOffsetsResult]:
        return self._run(self._admin.list_offsets(specs, isolation_level))

    def delete_records(self, before: Mapping[NamedPartition, int]) -> dict[NamedPartition, int]:
        return self._run(self._admin.delete_records(before))

    def close(self) -> None:
        try:
            self._run(self._admin.close())
        finally:
            self._thread.stop()
