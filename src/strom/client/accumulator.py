"""The producer's RecordAccumulator: records collect into per-partition batches here
until the sender drains them, as in the Java client.

Each topic-partition has a deque of open batches; only the last takes appends. A record
is written straight into its batch's ``bytearray`` by ``RecordBatchBuilder`` (no object
per record), so the fast path of ``append`` is a dict lookup and the builder's
``try_append``, which knows the record's exact encoded size before writing it. A batch
is full once a record does not fit in ``batch.size`` (a record bigger than that gets a
batch of its own); it then takes no more records and is sendable at once, as the Java
client's ``closeForRecordAppends`` makes it. Compressed batches are sized by
an estimate of the compressed size, kept per topic from the batches built so far (the
Java client's ``CompressionRatioEstimator``), so they hold about ``batch.size``
compressed bytes rather than uncompressed ones.

Delivery: one asyncio future per batch resolves with ``(base_offset, log_append_time)``.
A caller who wants a per-record future gets a ``FutureRecordMetadata``: the batch's
future plus the record's index, made only on request (the Java client's design, which
avoids a future per record). Callbacks are kept in append order and fire in it.

Memory: every open batch reserves what it may grow to from ``buffer.memory`` until the
batch is completed or failed. An append that needs a new batch and finds the memory
spent waits, first come first served, up to ``max.block.ms``, then raises
``BufferExhaustedError``.

Sender contract: ``ready`` says which partitions have a sendable batch and when to look
again; ``drain`` closes (builds, compresses) and hands over at most one batch per
partition; the sender stamps producer id/epoch/sequence on a ``ClosedBatch`` when it
first sends it, and calls ``complete`` or ``fail`` on it, or ``reenqueue`` to retry.
Everything runs on the producer's event loop; nothing here is thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from strom.client.buffer_pool import BufferPool
from strom.client.config import ProducerConfig
from strom.client.errors import ClientClosedError, KafkaTimeoutError
from strom.client.producer_batch import (
    ClosedBatch,
    FutureRecordMetadata,
    ProducerBatch,
    RecordCallback,
)
from strom.protocol.compression import CompressionType
from strom.protocol.records.header import (
    V2_HEADER_SIZE,
)
from strom.protocol.records.v2 import Buffer, HeaderInput, RecordBatchBuilder
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


# Upper bound of a record's framing in a v2 batch: length varint (5), attributes (1),
# timestamp delta varlong (10), offset delta, key and value lengths, header count
# (varints, 5 each). Comparing against the bound keeps a batch under batch.size.
RECORD_OVERHEAD_UPPER_BOUND: Final = 36
_PRODUCER_ID_OFFSET: Final = 43  # producer_id int64, producer_epoch int16, base_sequence int32
_PRODUCER_STATE: Final = struct.Struct(">qhi")
_ATTRIBUTES: Final = struct.Struct(">h")
_CRC: Final = struct.Struct(">I")
# CompressionRatioEstimator: creep down on better batches, jump up on worse.
_RATIO_ESTIMATION_FACTOR: Final = 1.05
_RATIO_IMPROVING_STEP: Final = 0.005
_RATIO_DETERIORATE_STEP: Final = 0.05
_RATIO_FLOOR: Final = 0.1  # bounds the uncompressed bytes one batch may hold


_new_tuple: Final = tuple.__new__


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class AbortForNewBatch(Exception):
    """The record would open a new batch; raised only for ``abort_on_new_batch``.

    The producer then tells the partitioner (``on_new_batch``), picks the partition
    again and appends without the flag: a key-less record starts its new batch in the
    next sticky partition instead of leaving one record behind in the old one.
    """


NO_ROOM: Final = object()  # from append_nowait: the record needs a new batch


class RecordAccumulator:
    """Per-partition batches between ``append`` and the sender's ``drain``.

    Settings carry Kafka's names and defaults (``batch.size``, ``linger.ms``,
    ``buffer.memory``, ``max.block.ms``, ``compression.type``, ``delivery.timeout.ms``,
    ``retry.backoff.ms``/``retry.backoff.max.ms``). Times are milliseconds of
    ``clock_ms`` (monotonic), which tests may replace.
    """

    def __init__(
        self,
        *,
        batch_size: int = 16_384,
        linger_ms: int = 5,
        buffer_memory: int = 32 * 1024 * 1024,
        max_block_ms: int = 60_000,
        compression: CompressionType = CompressionType.NONE,
        delivery_timeout_ms: int = 120_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        clock_ms: Callable[[], int] = monotonic_ms,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.max_block_ms = max_block_ms
        self.compression = CompressionType(compression)
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.clock_ms = clock_ms
        self.pool = BufferPool(buffer_memory)
        self.wakeup = asyncio.Event()  # set when the sender has something new to look at
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._retries: dict[TopicPartition, deque[ClosedBatch]] = {}
        self._muted: set[TopicPartition] = set()
        self._incomplete: set[asyncio.Future[tuple[int, int]]] = set()
        self._ratios: dict[str, float] = {}
        self._flushes_in_progress = 0
        self._drain_start = 0
        self._closed = False

    @classmethod
    def from_config(cls, config: ProducerConfig, **overrides: Any) -> RecordAccumulator:
        """The accumulator a producer with ``config`` needs (``overrides``: e.g. a clock)."""
        settings: dict[str, Any] = {
            "batch_size": config.batch_size, "linger_ms": config.linger_ms,
            "buffer_memory": config.buffer_memory, "max_block_ms": config.max_block_ms,
            "compression": config.compression, "delivery_timeout_ms": config.delivery_timeout_ms,
            "retry_backoff_ms": config.retry_backoff_ms,
            "retry_backoff_max_ms": config.retry_backoff_max_ms,
        }
        return cls(**{**settings, **overrides})

    # --- appending ---------------------------------------------------------------------

    async def append(
        self,
        topic: str,
        partition: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[HeaderInput] = (),
        timestamp: int | None = None,
        *,
        callback: RecordCallback | None = None,
        want_future: bool = True,
        abort_on_new_batch: bool = False,
        wake: bool = True,
    ) -> FutureRecordMetadata | None:
        """Add a record; waits only when a new batch needs memory ``buffer.memory`` lacks.

        Returns the record's future, or None with ``want_future=False`` (the fast path:
        nothing per record is kept unless a ``callback`` is given). A new batch sets
        ``wakeup`` unless ``wake`` is false (a sender that knows its timer will look at
        the batch in time).
        """
        if timestamp is None:
            timestamp = time.time_ns() // 1_000_000
        appended = self.append_nowait(topic, partition, key, value, headers, timestamp, callback, want_future)
        if appended is not NO_ROOM:
            return appended  # type: ignore[return-value]
        size = RECORD_OVERHEAD_UPPER_BOUND
        if key is not None:
            size += len(key)
        if value is not None:
            size += len(value)
        if headers:
            size += _headers_size(headers)
        tp = (topic, partition)
        batches = self._batches.get(tp)
        if self._closed:
            raise ClientClosedError("the producer is closed; no more records are accepted")
        if abort_on_new_batch:
            raise AbortForNewBatch()
        size_limit = max(self._size_limit(topic), V2_HEADER_SIZE + size)
        if not self.pool.try_allocate(size_limit):
            self.wakeup.set()  # ready() hurries every batch while appends wait for memory
            await self.pool.allocate(size_limit, self.max_block_ms)
            if self._closed:
                self.pool.release(size_limit)
                raise ClientClosedError("the producer was closed while allocating memory")
            batches = self._batches.get(tp)
            if batches and not batches[-1].full:  # another append made a batch meanwhile
                appended = self.append_nowait(topic, partition, key, value, headers, timestamp,
                                              callback, want_future)
                if appended is not NO_ROOM:
                    self.pool.release(size_limit)
                    return appended  # type: ignore[return-value]
        if batches is None:
            batches = self._batches[tp] = deque()
        elif batches:
            batches[-1].full = True  # no more appends: Kafka's closeForRecordAppends
        result: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._incomplete.add(result)
        batch = ProducerBatch(
            (topic, partition), RecordBatchBuilder(compression=self.compression),
            size_limit, self.clock_ms(), result,
        )
        batch.full = V2_HEADER_SIZE + size >= size_limit  # a record bigger than batch.size
        batches.append(batch)
        if wake or batch.full:
            self.wakeup.set()
        return _append_to(batch, key, value, headers, timestamp, callback, want_future)

    def append_nowait(
        self,
        topic: str,
        partition: int,
        key: Buffer | None,
        value: Buffer | None,
        headers: Sequence[HeaderInput],
        timestamp: int,
        callback: RecordCallback | None,
        want_future: bool,
    ) -> FutureRecordMetadata | object | None:
        """``append`` into the partition's open batch, or ``NO_ROOM`` when the record
        needs a new batch (then await ``append``). Not a coroutine: the per-record path
        of a producer costs one call here instead of a coroutine per record."""
        batches = self._batches.get((topic, partition))
        if not batches:
            return NO_ROOM
        batch = batches[-1]
        if batch.full:
            return NO_ROOM
        builder = batch.builder
        index = len(builder)
        if not builder.try_append(key, value, headers, timestamp, batch.size_limit):
            self.close_for_appends(batch)
            return NO_ROOM
        if callback is not None:
            if batch.thunks is None:
                batch.thunks = []
            batch.thunks.append((index, timestamp, callback))
        if want_future:
            return FutureRecordMetadata(batch.result, batch.topic_partition, index, timestamp)
        return None

    def close_for_appends(self, batch: ProducerBatch, *, wake: bool = True) -> None:
        """A record did not fit: the batch takes no more and is sendable at once, as
        the Java client's ``closeForRecordAppends`` makes it (not after ``linger.ms``).
        ``wake``: set ``wakeup`` (false: the caller sends it itself)."""
        batch.full = True
        if wake:
            self.wakeup.set()

    def open_batch(self, topic: str, partition: int) -> ProducerBatch | None:
        """The partition's batch that takes appends, if there is one."""
        batches = self._batches.get((topic, partition))
        if batches and not batches[-1].full:
            return batches[-1]
        return None

    def _size_limit(self, topic: str) -> int:
        """Uncompressed bytes a batch may take so that it compresses to ~batch.size."""
        if self.compression == CompressionType.NONE:
            return self.batch_size
        ratio = max(self._ratios.get(topic, 1.0) * _RATIO_ESTIMATION_FACTOR, _RATIO_FLOOR)
        return V2_HEADER_SIZE + int((self.batch_size - V2_HEADER_SIZE) / ratio)

    def _observe_ratio(self, topic: str, uncompressed: int, compressed: int) -> None:
        observed = (compressed - V2_HEADER_SIZE) / max(uncompressed - V2_HEADER_SIZE, 1)
        current = self._ratios.get(topic)
        if current is None:  # the Java client starts at 1.0 and needs ~100 batches to learn
            self._ratios[topic] = observed
        elif observed > current:
            self._ratios[topic] = max(current + _RATIO_DETERIORATE_STEP, observed)
        elif observed < current:
            self._ratios[topic] = max(current - _RATIO_IMPROVING_STEP, observed)

    # --- the sender's side ---------------------------------------------------------------

    def ready(self, now_ms: int | None = None) -> tuple[set[TopicPartition], int | None]:
        """Partitions with a batch to send now, and ms until the next may be (None: none).

        A batch is sendable when full, lingered ``linger.ms``, a retry past its backoff,
        or whenever a flush or close is in progress. Muted partitions are skipped.
        """
        now = self.clock_ms() if now_ms is None else now_ms
        hurry = self._flushes_in_progress > 0 or self._closed or self.pool.queued > 0
        ready: set[TopicPartition] = set()
        next_delay: int | None = None
        for tp, retries in self._retries.items():
            if retries and tp not in self._muted:
                wait = self._backoff_ms(retries[0]) - (now - retries[0].last_attempt_ms)
                if wait <= 0:
                    ready.add(tp)
                elif next_delay is None or wait < next_delay:
                    next_delay = wait
        for tp, batches in self._batches.items():
            if not batches or tp in self._muted or tp in ready:
                continue
            if self._retries.get(tp):
                continue  # retries go first; their delay is counted above
            first = batches[0]
            wait = self.linger_ms - (now - first.created_ms)
            if hurry or wait <= 0 or len(batches) > 1 or first.is_full():
                ready.add(tp)
            elif next_delay is None or wait < next_delay:
                next_delay = wait
        return ready, next_delay

    def _backoff_ms(self, batch: ClosedBatch) -> int:
        backoff = self.retry_backoff_ms * (1 << min(batch.attempts - 1, 30))
        return min(backoff, max(self.retry_backoff_max_ms, self.retry_backoff_ms))

    def drain(
        self,
        partitions: Iterable[TopicPartition],
        max_request_size: int,
        now_ms: int | None = None,
    ) -> dict[TopicPartition, ClosedBatch]:
        """Close and hand over the first batch of each given partition, up to a size.

        At most one batch per partition (more in flight per partition is the sender's
        call); at least one batch even if alone it exceeds ``max_request_size``. The
        starting partition rotates between calls so none starves under the size limit.
        """
        now = self.clock_ms() if now_ms is None else now_ms
        order = [tp for tp in partitions if tp not in self._muted]
        if not order:
            return {}
        start = self._drain_start % len(order)
        self._drain_start = start + 1
        drained: dict[TopicPartition, ClosedBatch] = {}
        total = 0
        for tp in order[start:] + order[:start]:
            retries = self._retries.get(tp)
            if retries:
                retry = retries[0]
                if now - retry.last_attempt_ms < self._backoff_ms(retry):
                    continue
                if drained and total + retry.size_in_bytes > max_request_size:
                    break
                retries.popleft()
                retry.last_attempt_ms = now
                drained[tp] = retry
                total += retry.size_in_bytes
                continue
            batches = self._batches.get(tp)
            if not batches:
                continue
            estimate = self._estimated_size(tp[0], batches[0])
            if drained and total + estimate > max_request_size:
                break
            closed = self._close(batches.popleft(), now)
            drained[tp] = closed
            total += closed.size_in_bytes
        return drained

    def _estimated_size(self, topic: str, batch: ProducerBatch) -> int:
        size = batch.builder.size_in_bytes
        if self.compression == CompressionType.NONE:
            return size
        return V2_HEADER_SIZE + int((size - V2_HEADER_SIZE) * self._ratios.get(topic, 1.0))

    def _close(self, batch: ProducerBatch, now_ms: int) -> ClosedBatch:
        batch.full = True
        uncompressed = batch.builder.size_in_bytes
        buffer = batch.builder.build()
        if self.compression != CompressionType.NONE:
            self._observe_ratio(batch.topic_partition[0], uncompressed, len(buffer))
        return ClosedBatch(batch, buffer, now_ms, self._deallocate)

    def _discard(self, batch: ProducerBatch, now_ms: int, error: BaseException) -> None:
        """Fail an unsent batch without building (compressing) bytes nobody will send."""
        batch.full = True
        ClosedBatch(batch, bytearray(), now_ms, self._deallocate).fail(error)

    def _deallocate(self, batch: ClosedBatch) -> None:
        self._incomplete.discard(batch.result)
        self.pool.release(batch.reserved)

    def reenqueue(self, batch: ClosedBatch, now_ms: int | None = None) -> None:
        """Put a batch back to be sent again after its backoff, ahead of newer batches.

        Retries of a partition are kept in sequence order, so an idempotent producer
        resends them in the order the broker expects.
        """
        batch.attempts += 1
        batch.last_attempt_ms = self.clock_ms() if now_ms is None else now_ms
        retries = self._retries.setdefault(batch.topic_partition, deque())
        position = len(retries)
        if batch.has_sequence:
            while position > 0 and (
                not retries[position - 1].has_sequence
                or retries[position - 1].base_sequence > batch.base_sequence
            ):
                position -= 1
        retries.insert(position, batch)
        self.wakeup.set()

    def mute(self, topic_partition: TopicPartition) -> None:
        """Hold a partition's batches back (e.g. one request in flight at a time)."""
        self._muted.add(topic_partition)

    def is_muted(self, topic_partition: TopicPartition) -> bool:
        return topic_partition in self._muted

    def unmute(self, topic_partition: TopicPartition, *, wake: bool = True) -> None:
        """Let the partition's batches go again (``wake``: tell the sender so)."""
        self._muted.discard(topic_partition)
        if wake:
            self.wakeup.set()

    def expire_batches(self, now_ms: int | None = None) -> int:
        """Fail undrained batches older than ``delivery.timeout.ms``; how many failed."""
        now = self.clock_ms() if now_ms is None else now_ms
        expired = 0
        for tp, batches in self._batches.items():
            while batches and now - batches[0].created_ms >= self.delivery_timeout_ms:
                batch = batches.popleft()
                self._discard(batch, now, KafkaTimeoutError(
                    f"expiring {batch.record_count} record(s) for {tp[0]}-{tp[1]}: "
                    f"{now - batch.created_ms} ms has passed since batch creation"
                ))
                expired += 1
        return expired

    # --- flush and close -------------------------------------------------------------------

    def begin_flush(self) -> None:
        """Make every partition ready until the matching ``await_flush_completion`` ends."""
        self._flushes_in_progress += 1
        self.wakeup.set()

    async def await_flush_completion(self) -> None:
        """Wait for every batch that exists now (open, queued or in flight) to be done."""
        try:
            pending = list(self._incomplete)
            if pending:
                await asyncio.wait(pending)
        finally:
            self._flushes_in_progress -= 1

    @property
    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    async def flush(self) -> None:
        self.begin_flush()
        await self.await_flush_completion()

    def close(self) -> None:
        """Refuse new appends; what is queued stays and becomes ready at once."""
        self._closed = True
        self.pool.close()
        self.wakeup.set()

    @property
    def closed(self) -> bool:
        return self._closed

    def abort_batches(self, error: BaseException) -> int:
        """Fail every batch not handed to the sender (open and retry-queued ones)."""
        aborted = 0
        now = self.clock_ms()
        for batches in self._batches.values():
            while batches:
                self._discard(batches.popleft(), now, error)
                aborted += 1
        for retries in self._retries.values():
            while retries:
                retries.popleft().fail(error)
                aborted += 1
        return aborted

    def abort_undrained_batches(self, error: BaseException) -> int:
        """Fail the batches never handed to the sender, keeping retries (Java's
        ``abortUndrainedBatches`` for a transactional producer): a retry holds sequence
        numbers the broker may already have, so it must still go out, or the partition's
        next batch would leave a gap."""
        aborted = 0
        now = self.clock_ms()
        for batches in self._batches.values():
            while batches:
                self._discard(batches.popleft(), now, error)
                aborted += 1
        return aborted

    def has_undrained(self) -> bool:
        return any(self._batches.values()) or any(self._retries.values())

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)


def _headers_size(headers: Sequence[HeaderInput]) -> int:
    size = 5
    for header_key, header_value in headers:
        size += 10 + (len(header_key.encode()) if isinstance(header_key, str) else len(header_key))
        if header_value is not None:
            size += len(header_value)
    return size


def _append_to(
    batch: ProducerBatch,
    key: Buffer | None,
    value: Buffer | None,
    headers: Sequence[HeaderInput],
    timestamp: int,
    callback: RecordCallback | None,
    want_future: bool,
) -> FutureRecordMetadata | None:
    builder = batch.builder
    index = len(builder)
    builder.append(key, value, headers, timestamp)
    if callback is not None:
        if batch.thunks is None:
            batch.thunks = []
        batch.thunks.append((index, timestamp, callback))
    if want_future:
        return FutureRecordMetadata(batch.result, batch.topic_partition, index, timestamp)
    return None
