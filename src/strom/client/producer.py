"""``AsyncProducer``: batching, idempotent, ordered delivery to partition leaders.

``send`` puts a record into its partition's open batch (``RecordAccumulator``) and
returns; ready batches (full, lingered ``linger.ms``, or flushing) go grouped by leader
into one Produce request per broker, up to ``max.in.flight.requests.per.connection``
requests per broker at once (the ``Sender``, ``sender.py``).

Everything runs on the application's event loop, so the per-record path is kept free
of it: ``produce`` is a plain call that appends a key-less record to its topic's cached
sticky batch (no coroutine, no task switch), a batch that fills is sent from that call,
and an answer is handled in its future's callback, which sends the partition's next
batch at once. The sender task only times what waits: linger, retries' backoff,
expiry, a missing leader, (re)connecting.

Ordering and idempotence. With ``enable.idempotence`` (the default) the producer gets
a producer id from InitProducerId and stamps every batch with a per-partition
sequence number the first time it is sent; a retry resends the very same bytes, so
the broker drops it if the first attempt was in fact appended (a lost answer) and the
log holds each record once. A partition has at most one batch in flight: a batch
that must be retried is sent again before any later batch of its partition, so
retries never reorder records. Different partitions still pipeline freely, which is
where a producer's parallelism lies.

Retries: retriable errors and lost connections put the batch back (with backoff)
until ``delivery.timeout.ms`` since it was created; then its records fail with a
timeout. Leader errors refresh metadata first.

Transactions (``transactional.id``, KIP-98): Java's API, ``init_transactions``,
``begin_transaction``, ``send_offsets_to_transaction``, ``commit_transaction``,
``abort_transaction``, carried out by a ``TransactionManager`` (transaction_manager.py)
beside the sender. Sends are refused outside a transaction; the first record to a
partition has it added to the transaction. The per-record path needs no check of its
own: its cached batches are dropped when a transaction ends, so the next record takes
the full path, which checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Self

from strom.client.accumulator import NO_ROOM, AbortForNewBatch, RecordAccumulator
from strom.client.cluster import Cluster, ClusterMetadata
from strom.client.config import ProducerConfig
from strom.client.errors import (
    ClientClosedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
)
from strom.client.partitioner import DefaultPartitioner
from strom.client.producer_batch import (
    FutureRecordMetadata,
    ProducerBatch,
    RecordCallback,
    RecordMetadata,
)
from strom.client.sender import Sender
from strom.protocol.records.v2 import Buffer, HeaderInput
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.client.consumer import ConsumerGroupMetadata
    from strom.client.offsets import OffsetAndMetadata
    from strom.client.transaction_manager import TransactionManager

logger = logging.getLogger(__name__)

# A producing loop yields to the event loop after each new batch (the sender has a
# full one to send) and at least every this many records, so answers are read and
# linger.ms is kept while the application keeps appending into large batches.
YIELD_EVERY = 256

__all__ = ["AsyncProducer", "FutureRecordMetadata", "RecordMetadata"]


class AsyncProducer:
    """A Kafka producer; use ``async with AsyncProducer({...}) as producer:``."""

    def __init__(self, config: ProducerConfig | Mapping[str, object] | None = None,
                 **overrides: object) -> None:
        if isinstance(config, ProducerConfig):
            self.config = config.with_overrides(None, **overrides) if overrides else config
        else:
            self.config = ProducerConfig.from_properties(config, **overrides)
        self._cluster: Cluster | None = None
        self._accumulator: RecordAccumulator | None = None
        self._partitioner = DefaultPartitioner(ignore_keys=self.config.partitioner_ignore_keys)
        self._sender: Sender | None = None  # set once started (and the producer id known)
        self._transactions: TransactionManager | None = None  # with transactional.id
        self._closed = False
        self._starting: asyncio.Future[None] | None = None
        self._since_yield = 0
        # produce()'s per-record path: each topic's open sticky batch, valid while the
        # cluster metadata is the one they were chosen with.
        self._sticky_batches: dict[str, ProducerBatch] = {}
        self._routed_metadata: ClusterMetadata | None = None
        # What produce() returns once the record is in: a done future, set by _start
        # before anything can be appended.
        self._appended: asyncio.Future[None]

    # -- lifetime ------------------------------------------------------------------------
    async def start(self) -> Self:
        """Connect and (with idempotence) get a producer id; also done on first send."""
        if self._closed:
            raise ClientClosedError()
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)
        return self

    async def _start(self) -> None:
        config = self.config
        self._appended = asyncio.get_running_loop().create_future()
        self._appended.set_result(None)
        self._cluster = Cluster(config)
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size, linger_ms=config.linger_ms, buffer_memory=config.buffer_memory,
            max_block_ms=config.max_block_ms, compression=config.compression,
            delivery_timeout_ms=config.delivery_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
            retry_backoff_max_ms=config.retry_backoff_max_ms)
        await self._cluster.refresh()
        if config.transactional_id is not None:
            # imported only by a transactional producer
            from strom.client.transaction_manager import TransactionManager
            self._transactions = TransactionManager(config, self._cluster, self._accumulator)
        sender = Sender(config, self._cluster, self._accumulator, self._transactions)
        if self._transactions is not None:
            self._transactions.on_producer_id = sender.set_producer_id  # every sequence from 0
        if config.enable_idempotence and self._transactions is None:
            await sender.init_producer_id()
        sender.start()
        self._sender = sender

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Send what is buffered (up to ``timeout_ms``; default: as long as it takes), then stop.

        ``timeout_ms=0`` fails buffered records at once instead.
        """
        if self._closed:
            return
        self._closed = True
        self._sticky_batches.clear()
        self._routed_metadata = None
        if self._starting is not None:
            with contextlib.suppress(Exception):
                await self._starting
        await self._abort_on_close(timeout_ms)
        accumulator = self._accumulator
        if accumulator is not None:
            accumulator.close()
            if timeout_ms == 0:
                accumulator.abort_batches(ClientClosedError("the producer was closed"))
            try:
                async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
                    await accumulator.flush()
            except TimeoutError:
                accumulator.abort_batches(KafkaTimeoutError("the producer closed before these were sent"))
        if self._sender is not None:
            await self._sender.stop()
        if self._transactions is not None:
            await self._transactions.close()
        if self._cluster is not None:
            await self._cluster.close()

    # -- sending -------------------------------------------------------------------------
    async def send(self, topic: str, value: Buffer | None = None, key: Buffer | None = None, *,
                   partition: int | None = None, headers: Sequence[HeaderInput] = (),
                   timestamp_ms: int | None = None, callback: RecordCallback | None = None,
                   ) -> FutureRecordMetadata:
        """Queue one record; returns once it is in a batch (blocking only while
        ``buffer.memory`` is full). Await the returned future for its offset."""
        future = self._append_nowait(topic, value, key, partition, headers, timestamp_ms, callback, True)
        if future is NO_ROOM:
            future = await self._append(topic, value, key, partition, headers, timestamp_ms, callback, True)
        assert isinstance(future, FutureRecordMetadata)
        return future

    async def send_and_wait(self, topic: str, value: Buffer | None = None, key: Buffer | None = None,
                            **kwargs: object) -> RecordMetadata:
        """Send one record and wait until the broker has it."""
        future = await self.send(topic, value, key, **kwargs)  # type: ignore[arg-type]
        return await future

    def produce(self, topic: str, value: Buffer | None = None, key: Buffer | None = None, *,
                partition: int | None = None, headers: Sequence[HeaderInput] = (),
                timestamp_ms: int | None = None, callback: RecordCallback | None = None,
                ) -> Awaitable[None]:
        """``send`` without a per-record future: the fastest way to queue records.

        ``await producer.produce(...)``: it returns once the record is in a batch, which
        is at once while ``buffer.memory`` has room (the record is in when the call
        returns; the awaitable then only lets the event loop run now and then, so the
        sender drains while the application appends). Errors reach ``callback`` (if
        given) and ``flush()`` raises nothing for them, as with librdkafka's ``produce``.
        Await each call before the next, or records may be reordered.
        """
        if key is None and partition is None and callback is None:
            # The per-record path: a key-less record joins its topic's sticky batch.
            batch = self._sticky_batches.get(topic)
            if batch is not None and not batch.full and self._cluster.metadata is self._routed_metadata:  # type: ignore[union-attr]
                builder = batch.builder
                appended = builder.append_value(value, batch.size_limit) if timestamp_ms is None and not headers \
                    else builder.try_append(None, value, headers, timestamp_ms, batch.size_limit)
                if appended:
                    # let the sender run every YIELD_EVERY records of a large batch (a new
                    # batch yields anyway)
                    return self._appended if appended % YIELD_EVERY else asyncio.sleep(0)
                self._close_full(batch)
        if self._append_nowait(topic, value, key, partition, headers, timestamp_ms, callback, False) is NO_ROOM:
            return self._append_later(topic, value, key, partition, headers, timestamp_ms, callback)
        self._since_yield += 1
        if self._since_yield < YIELD_EVERY:
            return self._appended
        self._since_yield = 0
        return asyncio.sleep(0)

    async def produce_many(self, topic: str, values: Sequence[Buffer | None],
                           keys: Sequence[Buffer | None] | None = None, *,
                           callback: RecordCallback | None = None) -> None:
        """``await produce(topic, values[i], keys[i])`` for each record, in order: the same
        records, batches and errors, without a call and an await per key-less record.
        For data already in lists (a DataFrame's rows); it yields to the event loop as
        ``produce`` does."""
        if keys is not None and len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys for {len(values)} values")
        produce, count, index = self.produce, len(values), 0
        while index < count:
            if keys is None and callback is None:
                batch = self._sticky_batches.get(topic)
                if batch is not None and not batch.full and self._cluster.metadata is self._routed_metadata:  # type: ignore[union-attr]
                    append_value, limit = batch.builder.append_value, batch.size_limit
                    stop = min(count, index + YIELD_EVERY)
                    while index < stop and append_value(values[index], limit):
                        index += 1
                    if index == stop:
                        await asyncio.sleep(0)  # as produce() does every YIELD_EVERY records
                        continue
                    self._close_full(batch)
            await produce(topic, values[index], None if keys is None else keys[index], callback=callback)
            index += 1

    def _close_full(self, batch: ProducerBatch) -> None:
        """The sticky batch refused a record: close it and send it now, from here, rather
        than waking the sender task for it (once per batch)."""
        assert self._accumulator is not None
        self._accumulator.close_for_appends(batch, wake=False)
        if self._sender is not None and self._sender.send_ready()[1]:
            self._accumulator.wakeup.set()  # no leader known: the sender task waits for one

    def _new_batch_needs_wakeup(self, tp: TopicPartition) -> bool:
        """A new batch in ``tp`` needs the sender task only if nothing else will look at
        it in time: not the answer to ``tp``'s batch in flight, nor the task's timer."""
        assert self._accumulator is not None
        sender = self._sender
        return not (self._accumulator.is_muted(tp)
                    or (sender is not None and sender.will_look_by(self.config.linger_ms)))

    def _append_nowait(self, topic: str, value: Buffer | None, key: Buffer | None, partition: int | None,
                       headers: Sequence[HeaderInput], timestamp_ms: int | None,
                       callback: RecordCallback | None, want_future: bool) -> FutureRecordMetadata | object | None:
        """Into the open batch of a known topic, without awaiting anything; ``NO_ROOM``
        sends the caller down the full path (start-up, metadata, a new batch, errors)."""
        accumulator, cluster = self._accumulator, self._cluster
        if accumulator is None or cluster is None or self._closed:
            return NO_ROOM
        info = cluster.metadata.topics.get(topic)
        if info is None or info.error_code or not info.partitions:
            return NO_ROOM
        count = len(info.partitions)
        sticky = partition is None and (key is None or self.config.partitioner_ignore_keys)
        if sticky:
            chosen = self._partitioner.sticky_partition(topic)
            if chosen is None or chosen >= count:
                return NO_ROOM
        elif partition is not None and not 0 <= partition < count:
            return NO_ROOM  # the full path raises the error
        else:
            chosen = self._partitioner.partition(topic, key, count, explicit_partition=partition)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        if self._transactions is not None:
            self._transactions.maybe_add_partition((topic, chosen))
        appended = accumulator.append_nowait(topic, chosen, key, value, headers, timestamp_ms, callback,
                                             want_future)
        if sticky and appended is not NO_ROOM:
            self._remember_sticky(topic, chosen)
        return appended

    def _remember_sticky(self, topic: str, partition: int) -> None:
        """Cache the batch key-less records of ``topic`` go to, valid for this metadata."""
        assert self._accumulator is not None and self._cluster is not None
        metadata = self._cluster.metadata
        if metadata is not self._routed_metadata:
            self._sticky_batches.clear()
            self._routed_metadata = metadata
        batch = self._accumulator.open_batch(topic, partition)
        if batch is None:
            self._sticky_batches.pop(topic, None)
        else:
            self._sticky_batches[topic] = batch

    async def _append_later(self, topic: str, value: Buffer | None, key: Buffer | None, partition: int | None,
                            headers: Sequence[HeaderInput], timestamp_ms: int | None,
                            callback: RecordCallback | None) -> None:
        await self._append(topic, value, key, partition, headers, timestamp_ms, callback, False)

    async def _append(self, topic: str, value: Buffer | None, key: Buffer | None, partition: int | None,
                      headers: Sequence[HeaderInput], timestamp_ms: int | None,
                      callback: RecordCallback | None, want_future: bool) -> FutureRecordMetadata | None:
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if self._accumulator is None or self._sender is None:
            await self.start()
        transactions = self._transactions
        if transactions is None:
            return await self._append_started(topic, value, key, partition, headers, timestamp_ms, callback,
                                              want_future)
        try:
            return await self._append_started(topic, value, key, partition, headers, timestamp_ms, callback,
                                              want_future)
        except KafkaError as exc:
            # As Java's send: a record refused here (no metadata in time, buffer.memory
            # full) is missing from the transaction, which therefore must not commit.
            transactions.handle_failed_send(exc)
            raise

    async def _append_started(self, topic: str, value: Buffer | None, key: Buffer | None, partition: int | None,
                              headers: Sequence[HeaderInput], timestamp_ms: int | None,
                              callback: RecordCallback | None, want_future: bool) -> FutureRecordMetadata | None:
        accumulator, cluster = self._accumulator, self._cluster
        assert accumulator is not None and cluster is not None
        info = cluster.metadata.topics.get(topic)
        if info is None or not info.partitions or info.error_code:
            info = await cluster.wait_for_topic(topic, self.config.max_block_ms)
        count = len(info.partitions)
        chosen = self._partitioner.partition(topic, key, count, explicit_partition=partition)
        sticky = partition is None and (key is None or self.config.partitioner_ignore_keys)
        transactions = self._transactions
        if transactions is not None:
            transactions.maybe_add_partition((topic, chosen))
        try:
            appended = await accumulator.append(topic, chosen, key, value, headers, timestamp_ms,
                                                callback=callback, want_future=want_future,
                                                abort_on_new_batch=sticky,
                                                wake=self._new_batch_needs_wakeup((topic, chosen)))
        except AbortForNewBatch:
            # KIP-480: a key-less record that would open a new batch moves on to the
            # next sticky partition instead.
            self._partitioner.on_new_batch(topic, chosen, count)
            chosen = self._partitioner.partition(topic, key, count)
            if transactions is not None:
                transactions.maybe_add_partition((topic, chosen))
            appended = await accumulator.append(topic, chosen, key, value, headers, timestamp_ms,
                                                callback=callback, want_future=want_future,
                                                wake=self._new_batch_needs_wakeup((topic, chosen)))
        if sticky and not self._closed:
            self._remember_sticky(topic, chosen)
        # A new batch was opened, so one may be ready: let the sender run. Without this
        # a tight produce loop never yields while buffer.memory has room, and nothing
        # is sent until flush().
        self._since_yield = 0
        await asyncio.sleep(0)
        return appended

    async def flush(self, timeout_ms: int | None = None) -> None:
        """Wait until every record sent before the call is acknowledged or failed."""
        if self._accumulator is None:
            return
        try:
            async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
                await self._accumulator.flush()
        except TimeoutError:
            raise KafkaTimeoutError(f"flush did not finish within {timeout_ms} ms") from None

    # -- transactions (KIP-98; the Java producer's methods) -------------------------------
    async def init_transactions(self) -> None:
        """Get this ``transactional.id``'s producer id and epoch from its coordinator,
        fencing any older producer with the same id and completing (or aborting) the
        transaction it left open. Call once, before the first transaction."""
        await self.start()
        transactions = self._require_transactions()
        await transactions.init_transactions()

    def begin_transaction(self) -> None:
        """Start a transaction: the records sent from now on commit or abort together."""
        self._require_transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                          group_metadata: ConsumerGroupMetadata | str) -> None:
        """Commit a consumer group's ``offsets`` (the next offsets to read) with the
        transaction: they become the group's committed offsets if, and only if, the
        transaction commits. Pass the consumer's ``group_metadata()`` so the group's
        coordinator refuses the commit from a member no longer in the group (KIP-447)."""
        from strom.client.offsets import OffsetAndMetadata
        converted = {(tp[0], tp[1]): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                     for tp, value in offsets.items()}
        await self._require_transactions().send_offsets_to_transaction(converted, group_metadata)

    async def commit_transaction(self) -> None:
        """Send what is buffered, then commit. Raises the error that made the
        transaction abortable (then call ``abort_transaction``) or fatal
        (``ProducerFencedError``: close the producer)."""
        transactions = self._require_transactions()
        self._sticky_batches.clear()  # the next record must take the checked path
        await transactions.commit_transaction()

    async def abort_transaction(self) -> None:
        """Abort the transaction: records not yet sent fail with
        ``TransactionAbortedError``, those sent are never seen by read_committed consumers."""
        transactions = self._require_transactions()
        self._sticky_batches.clear()
        await transactions.abort_transaction()

    def _require_transactions(self) -> TransactionManager:
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if self.config.transactional_id is None:
            raise IllegalStateError("transactional.id is not set: this producer is not transactional")
        if self._transactions is None:
            raise IllegalStateError("call init_transactions() first")
        return self._transactions

    async def _abort_on_close(self, timeout_ms: int | None) -> None:
        """Closing with a transaction open aborts it, as Java's producer does (rather
        than sending its records only to have the coordinator abort it on timeout)."""
        transactions = self._transactions
        if transactions is None or timeout_ms == 0 or not transactions.has_ongoing_transaction:
            return
        self._sticky_batches.clear()
        try:
            async with asyncio.timeout(None if timeout_ms is None else timeout_ms / 1000):
                await transactions.abort_transaction()
        except (KafkaError, TimeoutError) as exc:
            logger.warning("aborting the open transaction on close failed: %s", exc)

    async def partitions_for(self, topic: str) -> list[int]:
        await self.start()
        assert self._cluster is not None
        info = await self._cluster.wait_for_topic(topic, self.config.max_block_ms)
        return sorted(info.partitions)
