"""Appends to and reads from the partition logs on behalf of Produce and Fetch.

Kafka's ReplicaManager, for one node: it maps requests onto ``Log.append``/``Log.read``
and keeps the fetches that are waiting for data (long polls with ``fetch.min.bytes``/
``fetch.max.wait.ms``) until an append to one of their partitions wakes them. In
cluster mode it will also track followers and move the high watermark; the log keeps
the high watermark apart from the log end offset already.

Everything here runs on the broker's event loop, so no locks: the loop is the one
owner of this state (as kfake's single goroutine is).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from strom.compaction.record_scan import has_keyless_record
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.storage.errors import StorageError
from strom.storage.log import AppendResult, FetchIsolation, FetchResult, FileRegion, Log
from strom.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

# Below this, a fetched region is read into memory and copied into the response; above
# it, the response carries the region and the network layer sendfile()s it.
SENDFILE_MIN_BYTES = 4096


@dataclass(frozen=True, slots=True)
class SendfileRegion:
    """A segment file range the connection writes with ``os.sendfile``."""

    fd: int
    position: int
    length: int

    def __len__(self) -> int:
        return self.length


@dataclass(frozen=True, slots=True)
class PartitionRead:
    error_code: ErrorCode
    result: FetchResult | None = None
    records: bytes | SendfileRegion | None = None

    @property
    def size(self) -> int:
        return 0 if self.records is None else len(self.records)


class ReplicaManager:
    def __init__(self, log_manager: LogManager, leader_epoch: int = 0) -> None:
        self.log_manager = log_manager
        self.leader_epoch = leader_epoch
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing: a client's view of the leader epoch against ours (-1: no check)."""
        if current_leader_epoch > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if 0 <= current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE

    # -- produce -------------------------------------------------------------------------
    def append(self, topic: str, partition: int, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append one partition's records; raises ``StorageError`` with the Kafka error."""
        log = self.log_manager.get_log(topic, partition)
        if log is None:
            raise StorageError(f"no partition {topic}-{partition}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if log.config.compacts:
            _require_keys(topic, records)
        result = log.append(records, leader_epoch=self.leader_epoch, from_client=True)
        if self._waiters:  # long-polling fetches, if any
            self._wake((topic, partition))
        return result

    # -- fetch ---------------------------------------------------------------------------
    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, isolation: FetchIsolation
    ) -> PartitionRead:
        log = self.log_manager.get_log(topic, partition)
        if log is None:
            return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            result = log.read(offset, max_bytes, isolation=isolation, min_one_message=max_bytes > 0)
        except StorageError as exc:
            return PartitionRead(exc.error_code, _bounds(log))
        return PartitionRead(ErrorCode.NONE, result, _records(log, result.region))

    async def wait_for_data(self, partitions: Iterable[TopicPartition], timeout: float) -> None:
        """Return when any of ``partitions`` is appended to, or after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        keys = list(partitions)
        for key in keys:
            self._waiters.setdefault(key, set()).add(future)
        # A timer rather than asyncio.wait_for: no task per wait, and a cancellation
        # (shutdown) is never swallowed when it races with the data arriving.
        timer = loop.call_later(timeout, _resolve, future)
        try:
            await future
        finally:
            timer.cancel()
            for key in keys:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiters[key]

    def _wake(self, key: TopicPartition) -> None:
        for future in self._waiters.pop(key, ()):
            _resolve(future)


def _require_keys(topic: str, records: bytes | bytearray | memoryview) -> None:
    """A compacted topic refuses a record set with any keyless record (Kafka's rule)."""
    try:
        keyless = has_keyless_record(records)
    except ProtocolError as exc:
        raise StorageError(str(exc), ErrorCode(exc.error_code)) from exc
    if keyless:
        raise StorageError(f"compacted topic {topic} refuses records without a key",
                           ErrorCode.INVALID_RECORD)


def _bounds(log: Log) -> FetchResult:
    """Offsets for an error answer (OFFSET_OUT_OF_RANGE still reports the log's range)."""
    return FetchResult(
        -1, None, log.high_watermark, log.last_stable_offset, log.log_start_offset, log.log_end_offset
    )


def _records(log: Log, region: FileRegion | None) -> bytes | SendfileRegion | None:
    if region is None or region.length == 0:
        return None
    if region.length < SENDFILE_MIN_BYTES:
        return region.read(log.fs)
    return SendfileRegion(region.fd, region.position, region.length)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
