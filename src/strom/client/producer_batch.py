"""A producer's batches on their way to the broker, and what each record's sender gets back.

``ProducerBatch`` is an open batch the accumulator appends records to (the bytes grow
in its ``RecordBatchBuilder``); ``ClosedBatch`` is the built batch the sender sends,
retries and completes. Delivery is one asyncio future per batch: a caller who wants a
per-record result gets a ``FutureRecordMetadata`` (the batch's future plus the record's
index), made only on request, as the Java client avoids a future per record.
Callbacks are kept in append order and fire in it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable, Generator
from typing import Any, Final, NamedTuple

from crc32c import crc32c

from strom.protocol.records.header import ATTR_TRANSACTIONAL, V2_ATTRIBUTES_OFFSET, V2_CRC_OFFSET
from strom.protocol.records.v2 import RecordBatchBuilder
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

RecordCallback = Callable[["RecordMetadata | None", "BaseException | None"], None]

_PRODUCER_ID_OFFSET: Final = 43  # producer_id int64, producer_epoch int16, base_sequence int32
_PRODUCER_STATE: Final = struct.Struct(">qhi")
_ATTRIBUTES: Final = struct.Struct(">h")
_CRC: Final = struct.Struct(">I")
_new_tuple: Final = tuple.__new__


class RecordMetadata(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when acks=0: the broker said nothing
    timestamp: int  # the broker's LogAppendTime if the topic uses it, else CreateTime


class FutureRecordMetadata:
    """One record's delivery: its batch's future plus where it sits in the batch.

    Awaitable (``await future`` gives ``RecordMetadata``), with the ``done``/
    ``result``/``exception``/``add_done_callback`` part of the Future API;
    ``as_future()`` makes a real ``asyncio.Future`` for ``asyncio.wait`` and the like.
    """

    __slots__ = ("_index", "_result", "_timestamp", "_topic_partition")

    def __init__(
        self, result: asyncio.Future[tuple[int, int]], tp: TopicPartition, index: int,
        timestamp: int,
    ) -> None:
        self._result = result
        self._topic_partition = tp
        self._index = index
        self._timestamp = timestamp

    def _metadata(self, base_offset: int, log_append_time: int) -> RecordMetadata:
        topic, partition = self._topic_partition
        return _new_tuple(RecordMetadata, (  # NamedTuple's own __new__ is slower
            topic, partition,
            -1 if base_offset < 0 else base_offset + self._index,
            self._timestamp if log_append_time < 0 else log_append_time,
        ))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        result = self._result
        if not result.done():
            yield from result.__await__()
        return self._metadata(*result.result())

    def done(self) -> bool:
        return self._result.done()

    def result(self) -> RecordMetadata:
        """The metadata; raises the delivery error, or InvalidStateError if not done."""
        return self._metadata(*self._result.result())

    def exception(self) -> BaseException | None:
        return self._result.exception()

    def add_done_callback(self, callback: Callable[[FutureRecordMetadata], None]) -> None:
        self._result.add_done_callback(lambda _: callback(self))

    def as_future(self) -> asyncio.Future[RecordMetadata]:
        future: asyncio.Future[RecordMetadata] = self._result.get_loop().create_future()

        def copy(_: object) -> None:
            if future.cancelled():
                return
            error = self._result.exception()
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(self.result())

        if self._result.done():
            copy(None)
        else:
            self._result.add_done_callback(copy)
        return future


class ProducerBatch:
    """An open batch: the builder records go into, and who to tell when it is sent."""

    __slots__ = (
        "builder", "created_ms", "full", "reserved", "result", "size_limit", "thunks",
        "topic_partition",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        builder: RecordBatchBuilder,
        size_limit: int,
        created_ms: int,
        result: asyncio.Future[tuple[int, int]],
    ) -> None:
        self.topic_partition = topic_partition
        self.builder = builder
        self.size_limit = size_limit  # uncompressed bytes the builder may reach
        self.reserved = size_limit  # taken from buffer.memory: all the batch may grow to
        self.created_ms = created_ms
        self.result = result
        self.full = False  # closed for appends (Kafka's closeForRecordAppends)
        self.thunks: list[tuple[int, int, RecordCallback]] | None = None

    @property
    def record_count(self) -> int:
        return len(self.builder)

    def is_full(self) -> bool:
        return self.full or self.builder.size_in_bytes >= self.size_limit


class ClosedBatch:
    """A built batch on its way to the broker: bytes, retry state and its records' fate.

    ``buffer`` is the whole v2 batch as sent; ``set_producer_state`` rewrites its
    idempotence fields in place and recomputes the CRC (the only fields the producer
    changes after building, once, on first send; retries keep the same sequence).
    """

    __slots__ = (
        "_release", "attempts", "base_sequence", "buffer", "created_ms", "drained_ms",
        "last_attempt_ms", "producer_epoch", "producer_id", "record_count", "reserved",
        "result", "thunks", "topic_partition",
    )

    def __init__(
        self,
        batch: ProducerBatch,
        buffer: bytearray,
        drained_ms: int,
        release: Callable[[ClosedBatch], None],
    ) -> None:
        self.topic_partition = batch.topic_partition
        self.buffer = buffer
        self.record_count = batch.record_count
        self.created_ms = batch.created_ms
        self.drained_ms = drained_ms
        self.last_attempt_ms = drained_ms
        self.attempts = 0  # times reenqueued for a retry
        self.reserved = batch.reserved
        self.result = batch.result
        self.thunks = batch.thunks
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = -1
        self._release = release

    @property
    def size_in_bytes(self) -> int:
        return len(self.buffer)

    @property
    def has_sequence(self) -> bool:
        return self.base_sequence >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap at 2**31 like the Java client's."""
        return (self.base_sequence + self.record_count - 1) & 0x7FFFFFFF

    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, *,
        is_transactional: bool = False,
    ) -> None:
        """Stamp idempotence (and transaction) fields into the built bytes, new CRC."""
        buffer = self.buffer
        _PRODUCER_STATE.pack_into(
            buffer, _PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence
        )
        if is_transactional:
            (attributes,) = _ATTRIBUTES.unpack_from(buffer, V2_ATTRIBUTES_OFFSET)
            _ATTRIBUTES.pack_into(buffer, V2_ATTRIBUTES_OFFSET, attributes | ATTR_TRANSACTIONAL)
        with memoryview(buffer) as view:
            _CRC.pack_into(buffer, V2_CRC_OFFSET, crc32c(view[V2_ATTRIBUTES_OFFSET:]))
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence

    @property
    def is_done(self) -> bool:
        return self.result.done()

    def complete(self, base_offset: int, log_append_time: int = -1) -> bool:
        """The broker appended the batch at ``base_offset``; False if already done."""
        if self.result.done():
            return False
        self.result.set_result((base_offset, log_append_time))
        if self.thunks:
            topic, partition = self.topic_partition
            for index, timestamp, callback in self.thunks:
                metadata = RecordMetadata(
                    topic, partition,
                    -1 if base_offset < 0 else base_offset + index,
                    timestamp if log_append_time < 0 else log_append_time,
                )
                _fire(callback, metadata, None)
        self._release(self)
        return True

    def fail(self, error: BaseException) -> bool:
        """Fail every record of the batch with ``error``; False if already done."""
        if self.result.done():
            return False
        self.result.set_exception(error)
        self.result.exception()  # retrieved: records nobody awaits must not log a warning
        if self.thunks:
            for _, _, callback in self.thunks:
                _fire(callback, None, error)
        self._release(self)
        return True


def _fire(
    callback: RecordCallback, metadata: RecordMetadata | None, error: BaseException | None
) -> None:
    try:
        callback(metadata, error)
    except Exception:  # a user's bug must not stop the other records' callbacks
        logger.exception("error in a produce callback")
