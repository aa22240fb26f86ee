"""The consumer's fetching: positions per partition, prefetching, and handing out records.

Kafka's consumer design (the implementation chapter's "API Design"): the consumer owns
a position per assigned partition; fetches go to each partition's leader, one request
per broker at a time, carrying every fetchable partition that broker leads; answers
are kept raw (``CompletedFetch``) until the application polls, so decoding happens on
the caller's time and only for records it takes. A partition is fetchable when it has
a position, is not paused, and has nothing buffered: one fetch's worth of data per
partition is the prefetch, which bounds memory at about ``max.partition.fetch.bytes``
per partition and ``fetch.max.bytes`` per broker.

Positions move only when records are handed out: after a batch is used up, the
position is the batch's last offset + 1, so compaction gaps and transaction markers
are stepped over without being returned. A seek discards what was buffered for that
partition (the fetch epoch check below), so old data never follows a seek.

Fetch versions 4 to 12 are used: they name topics (v13+ uses topic ids) and carry
isolation level, log start offset and leader epochs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple

from strom.client.cluster import Cluster
from strom.client.config import ConsumerConfig
from strom.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from strom.client.read_committed import AbortFilter
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.fetch_response import AbortedTransaction, FetchResponse, PartitionData
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.list_offsets_response import ListOffsetsResponse
from strom.protocol.records import decode_batch, decode_message, iter_batches, read_batch_header
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

FETCH_VERSIONS = range(4, 13)
LIST_OFFSETS_VERSIONS = range(1, 11)
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
_REFRESH_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_ID,
})


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    leader_epoch: int


class OffsetOutOfRangeError(KafkaError):
    """A position outside the log with ``auto.offset.reset=none``."""

    def __init__(self, partitions: dict[TopicPartition, int]) -> None:
        super().__init__(ErrorCode.OFFSET_OUT_OF_RANGE, f"positions out of range: {partitions}")
        self.partitions = partitions


@dataclass(slots=True)
class CompletedFetch:
    """One partition's raw answer, consumed batch by batch as the application polls."""

    data: memoryview
    fetch_offset: int
    epoch: int  # the partition's seek epoch when the fetch was sent
    batches: deque[tuple[int, int]] = field(default_factory=deque)  # (position, size)
    pending: deque[ConsumerRecord] = field(default_factory=deque)  # decoded, not yet taken
    batch_end: int = 0  # the offset after the batch ``pending`` came from
    end_offset: int = 0  # the offset after the last whole batch of ``data``
    aborted: tuple[AbortedTransaction, ...] = ()  # READ_COMMITTED: what to leave out
    abort_filter: AbortFilter | None = None


@dataclass(slots=True)
class PartitionState:
    position: int | None = None
    leader_epoch: int = -1
    reset: int | None = None  # EARLIEST/LATEST/a timestamp: how to find a missing position
    paused: bool = False
    high_watermark: int = -1
    log_start_offset: int = -1
    last_stable_offset: int = -1
    seek_epoch: int = 0  # bumped by every seek; stale fetches are dropped
    completed: CompletedFetch | None = None
    error: KafkaError | None = None

    @property
    def fetchable(self) -> bool:
        return self.position is not None and not self.paused and self.completed is None and self.error is None


class Fetcher:
    """Positions and prefetched data for the partitions assigned to one consumer."""

    def __init__(self, cluster: Cluster, config: ConsumerConfig) -> None:
        self.cluster = cluster
        self.config = config
        self.states: dict[TopicPartition, PartitionState] = {}
        self.data_ready = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._in_flight: set[int] = set()  # nodes with a fetch outstanding
        self._task: asyncio.Task[None] | None = None
        # auto.offset.reset as a ListOffsets timestamp; None for "none"
        self.default_reset = {"earliest": EARLIEST, "latest": LATEST}.get(config.auto_offset_reset)
        self._round_robin: deque[TopicPartition] = deque()

    # -- assignment and positions --------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        wanted = set(partitions)
        for tp in [tp for tp in self.states if tp not in wanted]:
            del self.states[tp]
        for tp in wanted:
            self.states.setdefault(tp, PartitionState())
        self._round_robin = deque(sorted(self.states))
        self.cluster.add_topics({tp[0] for tp in wanted})
        self.wake()

    def release(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget the state of partitions the group took away (revoked or lost).

        As in the Java client, a partition given back later starts afresh, from its
        committed offset, not from where this consumer's fetching had got to: records
        fetched but dropped at the revocation are fetched again.
        """
        gone = [tp for tp in partitions if tp in self.states]
        for tp in gone:
            self._discard(self.states.pop(tp))
        if gone:
            self._round_robin = deque(sorted(self.states))

    def seek(self, tp: TopicPartition, offset: int, leader_epoch: int = -1) -> None:
        state = self._state(tp)
        state.position, state.reset, state.error = offset, None, None
        state.leader_epoch = leader_epoch
        self._discard(state)
        self.wake()

    def reset_to(self, tp: TopicPartition, timestamp: int) -> None:
        """Find the position by ``timestamp`` (EARLIEST/LATEST or ms) before fetching."""
        state = self._state(tp)
        state.position, state.reset, state.error = None, timestamp, None
        self._discard(state)
        self.wake()

    def needs_position(self) -> list[TopicPartition]:
        return [tp for tp, s in self.states.items() if s.position is None and s.reset is None]

    def _state(self, tp: TopicPartition) -> PartitionState:
        state = self.states.get(tp)
        if state is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp} is not assigned to this consumer")
        return state

    @staticmethod
    def _discard(state: PartitionState) -> None:
        state.seek_epoch += 1
        state.completed = None

    def wake(self) -> None:
        self._wakeup.set()

    # -- handing out records ----------------------------------------------------------------
    def take(self, max_records: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Up to ``max_records`` buffered records, partitions in turn so none starves."""
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        errors = [s.error for s in self.states.values() if s.error is not None]
        if errors:
            for failed in self.states.values():
                failed.error = None
            raise errors[0]
        budget = max_records
        for _ in range(len(self._round_robin)):
            if budget <= 0:
                break
            tp = self._round_robin[0]
            self._round_robin.rotate(-1)
            state = self.states.get(tp)
            if state is None or state.completed is None or state.paused:
                continue
            records = self._drain(tp, state, budget)
            if records:
                out[tp] = records
                budget -= len(records)
        self._update_ready()
        return out

    def take_raw(self) -> list[tuple[TopicPartition, CompletedFetch, int]]:
        """Whole buffered fetches with the position to start from, for Arrow decoding.

        The caller decodes ``data`` from the position and calls ``advance`` with the
        position after the last record it used.
        """
        out = []
        for tp, state in self.states.items():
            if state.completed is not None and not state.paused and state.position is not None:
                out.append((tp, state.completed, state.position))
        return out

    def advance(self, tp: TopicPartition, completed: CompletedFetch, next_position: int) -> None:
        state = self.states.get(tp)
        if state is None or state.completed is not completed:
            return
        state.position = next_position
        state.completed = None
        self._update_ready()
        self.wake()

    def _drain(self, tp: TopicPartition, state: PartitionState, budget: int) -> list[ConsumerRecord]:
        completed = state.completed
        assert completed is not None and state.position is not None
        records: list[ConsumerRecord] = []
        pending = completed.pending
        while len(records) < budget:
            if pending:
                for _ in range(min(budget - len(records), len(pending))):
                    records.append(pending.popleft())
                state.position = records[-1].offset + 1
                if not pending:  # the batch is used up: step over its tail (gaps, markers)
                    state.position = max(state.position, completed.batch_end)
                continue
            if not completed.batches:
                break
            start, _ = completed.batches.popleft()
            decoded, completed.batch_end = self._decode(tp, completed, start, state.position)
            if decoded:
                pending.extend(decoded)
            else:
                state.position = max(state.position, completed.batch_end)
        if not pending and not completed.batches:
            state.completed = None
            self.wake()
        return records

    def _decode(self, tp: TopicPartition, completed: CompletedFetch, start: int,
                position: int) -> tuple[list[ConsumerRecord], int]:
        """Records of the batch at ``start`` from ``position`` on, and the offset after the batch."""
        topic, partition = tp
        data = completed.data
        header = read_batch_header(data, start)
        next_offset = header.last_offset + 1
        if completed.abort_filter is not None and completed.abort_filter.drops(data, start, header):
            return [], next_offset
        if header.last_offset < position:
            return [], next_offset
        check = self.config.check_crcs
        kind = 1 if header.attributes & 0x08 else 0
        if header.magic == 2:
            if header.is_control:
                return [], next_offset
            records = decode_batch(data, start, verify_crc=check, copy=True).records
            epoch = header.partition_leader_epoch
        else:
            records = decode_message(data, start, verify_crc=check)
            epoch = -1
        new, cls = tuple.__new__, ConsumerRecord
        out: list[ConsumerRecord] = []
        append = out.append
        for offset, timestamp, key, value, headers in records:
            if offset < position:
                continue
            if key is not None and not isinstance(key, bytes):
                key = bytes(key)  # legacy message sets decode to views
            if value is not None and not isinstance(value, bytes):
                value = bytes(value)
            if headers:
                headers = tuple((k, v if v is None or isinstance(v, bytes) else bytes(v)) for k, v in headers)
            append(new(cls, (topic, partition, offset, timestamp, kind, key, value, headers, epoch)))
        return out, next_offset

    def _update_ready(self) -> None:
        if any(s.completed is not None and not s.paused for s in self.states.values()) or any(
                s.error is not None for s in self.states.values()):
            self.data_ready.set()
        else:
            self.data_ready.clear()

    # -- the fetch loop ------------------------------------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="strom-fetcher")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _run(self) -> None:
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            self._wakeup.clear()
            try:
                await self._reset_positions()
                self._send_fetches()
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                logger.info("fetcher: %s; refreshing metadata", exc)
                await asyncio.sleep(backoff)
                self._refresh_soon()
            except KafkaError as exc:
                logger.warning("fetcher: %s", exc)
                await asyncio.sleep(backoff)
            try:
                async with asyncio.timeout(backoff if self._waiting_for_leaders() else None):
                    await self._wakeup.wait()
            except TimeoutError:
                pass

    def _waiting_for_leaders(self) -> bool:
        metadata = self.cluster.metadata
        return any(metadata.leader(*tp) is None for tp, s in self.states.items() if s.position is not None)

    def _refresh_soon(self) -> None:
        self.cluster.refresh_soon(self.wake)

    def _send_fetches(self) -> None:
        metadata = self.cluster.metadata
        by_leader: dict[int, list[tuple[TopicPartition, PartitionState]]] = {}
        missing_leader = False
        for tp, state in self.states.items():
            if not state.fetchable:
                continue
            leader = metadata.leader(*tp)
            if leader is None:
                missing_leader = True
                continue
            if leader not in self._in_flight:
                by_leader.setdefault(leader, []).append((tp, state))
        if missing_leader:
            self._refresh_soon()
        for leader, partitions in by_leader.items():
            self._in_flight.add(leader)
            task = asyncio.ensure_future(self._fetch(leader, partitions))
            task.add_done_callback(partial(self._fetch_done, leader))

    def _fetch_done(self, node: int, task: asyncio.Future[None]) -> None:
        self._in_flight.discard(node)
        if not task.cancelled() and task.exception() is not None:
            logger.info("fetch from node %d failed: %s", node, task.exception())
            self._refresh_soon()
        self.wake()

    async def _fetch(self, node: int, partitions: list[tuple[TopicPartition, PartitionState]]) -> None:
        config = self.config
        topics: dict[str, list[FetchPartition]] = {}
        sent: dict[TopicPartition, tuple[int, int]] = {}
        for (topic, partition), state in partitions:
            assert state.position is not None
            topics.setdefault(topic, []).append(FetchPartition(
                partition=partition, current_leader_epoch=-1, fetch_offset=state.position,
                partition_max_bytes=config.max_partition_fetch_bytes))
            sent[(topic, partition)] = (state.position, state.seek_epoch)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=config.fetch_max_wait_ms, min_bytes=config.fetch_min_bytes,
            max_bytes=config.fetch_max_bytes, isolation_level=1 if config.read_committed else 0,
            session_id=0, session_epoch=-1,
            topics=tuple(FetchTopic(topic=t, partitions=tuple(ps)) for t, ps in topics.items()),
        )
        timeout_ms = config.request_timeout_ms + config.fetch_max_wait_ms
        response = await self.cluster.request(node, request, FETCH_VERSIONS, timeout_ms=timeout_ms)
        assert isinstance(response, FetchResponse)
        if response.error_code:
            raise KafkaError(response.error_code, f"fetch from node {node}")
        for topic_response in response.responses:
            for data in topic_response.partitions:
                tp = (topic_response.topic, data.partition_index)
                if tp in sent:
                    self._completed(tp, data, *sent[tp])
        self._update_ready()

    def _completed(self, tp: TopicPartition, data: PartitionData, fetch_offset: int, epoch: int) -> None:
        state = self.states.get(tp)
        if state is None or state.seek_epoch != epoch or state.position != fetch_offset:
            return  # unassigned or sought meanwhile: the data is stale
        code = ErrorCode.from_code(data.error_code)
        if code == ErrorCode.NONE:
            state.high_watermark = data.high_watermark
            state.last_stable_offset = data.last_stable_offset
            state.log_start_offset = data.log_start_offset
            records = data.records
            if records is None or not len(records):
                return
            assert isinstance(records, bytes | bytearray | memoryview)
            view = memoryview(records)
            completed = CompletedFetch(view.cast("B"), fetch_offset, epoch)
            if self.config.read_committed and data.aborted_transactions:
                completed.aborted = tuple(data.aborted_transactions)
                completed.abort_filter = AbortFilter(completed.aborted)
            for pos, header in iter_batches(completed.data):
                completed.batches.append((pos, header.size))
                completed.end_offset = header.last_offset + 1
            if completed.batches:
                state.completed = completed
        elif code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.default_reset is None:
                state.error = OffsetOutOfRangeError({tp: fetch_offset})
            else:
                logger.info("%s: offset %d out of range; resetting to %s", tp, fetch_offset,
                            self.config.auto_offset_reset)
                state.position, state.reset = None, self.default_reset
        elif code in _REFRESH_ERRORS:
            self._refresh_soon()
        else:
            state.error = KafkaError(code, f"fetch {tp[0]}-{tp[1]} at {fetch_offset}")

    # -- offsets by time -------------------------------------------------------------------
    async def _reset_positions(self) -> None:
        pending = {tp: s.reset for tp, s in self.states.items() if s.position is None and s.reset is not None}
        if not pending:
            return
        found = await self.list_offsets({tp: ts for tp, ts in pending.items() if ts is not None})
        for tp, (offset, epoch) in found.items():
            state = self.states.get(tp)
            if state is not None and state.position is None and state.reset == pending[tp]:
                if offset < 0:  # no record at or after the timestamp: the end
                    state.reset = LATEST
                    continue
                state.position, state.reset, state.leader_epoch = offset, None, epoch

    async def list_offsets(self, timestamps: dict[TopicPartition, int],
                           timeout_ms: int | None = None) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets to each partition's leader: tp → (offset, leader epoch); -1 if none."""
        deadline = time.monotonic() + (timeout_ms or self.config.request_timeout_ms) / 1000
        result: dict[TopicPartition, tuple[int, int]] = {}
        remaining = dict(timestamps)
        backoff = self.config.retry_backoff_ms / 1000
        while remaining:
            metadata = self.cluster.metadata
            if any(metadata.leader(*tp) is None for tp in remaining):
                metadata = await self.cluster.refresh({tp[0] for tp in remaining})
            by_leader: dict[int, dict[TopicPartition, int]] = {}
            for tp, ts in remaining.items():
                leader = metadata.leader(*tp)
                if leader is not None:
                    by_leader.setdefault(leader, {})[tp] = ts
            retry: dict[TopicPartition, int] = {tp: ts for tp, ts in remaining.items() if metadata.leader(*tp) is None}
            for leader, wanted in by_leader.items():
                try:
                    answers = await self._list_offsets_from(leader, wanted)
                except (KafkaConnectionError, KafkaTimeoutError):
                    retry.update(wanted)
                    continue
                for tp, (code, offset, epoch) in answers.items():
                    if code == ErrorCode.NONE:
                        result[tp] = (offset, epoch)
                    elif ErrorCode.from_code(code).retriable or code in _REFRESH_ERRORS:
                        retry[tp] = wanted[tp]
                    else:
                        raise KafkaError(code, f"list offsets for {tp[0]}-{tp[1]}")
            remaining = retry
            if remaining:
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"offsets for {sorted(remaining)} not found in time")
                await asyncio.sleep(backoff)
                await self.cluster.refresh({tp[0] for tp in remaining})
        return result

    async def _list_offsets_from(self, node: int, wanted: dict[TopicPartition, int]
                                 ) -> dict[TopicPartition, tuple[int, int, int]]:
        topics: dict[str, list[ListOffsetsPartition]] = {}
        for (topic, partition), timestamp in wanted.items():
            topics.setdefault(topic, []).append(ListOffsetsPartition(partition_index=partition, timestamp=timestamp))
        request = ListOffsetsRequest(
            replica_id=-1, isolation_level=1 if self.config.read_committed else 0,
            topics=tuple(ListOffsetsTopic(name=t, partitions=tuple(ps)) for t, ps in topics.items()))
        response = await self.cluster.request(node, request, LIST_OFFSETS_VERSIONS)
        assert isinstance(response, ListOffsetsResponse)
        return {(t.name, p.partition_index): (p.error_code, p.offset, p.leader_epoch)
                for t in response.topics for p in t.partitions}
