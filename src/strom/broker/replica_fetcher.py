"""ReplicaFetcher: a follower's copy of the leader's log, for the partitions one broker leads.

Kafka's ``AbstractFetcherThread`` + ``ReplicaFetcherThread``, as one asyncio task per
(leader, fetcher index) instead of a thread. It sends Fetch v12 with this broker's
``replica_id`` for every partition it follows from that leader and is not backing off,
each at ``fetch_offset`` = the local log end offset, ``current_leader_epoch`` = the epoch
of the controller's LeaderAndIsr (KIP-320: a leader on another epoch refuses) and
``last_fetched_epoch`` = the newest epoch of the local log (truncation on fetch, Kafka
2.7+, KAFKA-10554: a leader whose log diverges from ours there answers
``DivergingEpoch`` instead of records; no OffsetForLeaderEpoch round trip). No fetch session: every request is full (Kafka's follower uses sessions to
save bytes; a full request is correct and simpler).

What each partition's answer does, in Kafka's words (``processFetchRequest``):

- **records**: appended as the leader wrote them (``Log.append_as_follower``: its offsets
  and epochs), then the follower's high watermark = min(the leader's, our log end)
  (``ReplicaFetcherThread.processPartitionData``); requests waiting on the partition
  re-check. The leader's log start offset moves ours (DeleteRecords and retention
  reach followers this way).
- **DivergingEpoch** (epoch E, end offset O): our records from there on are not the
  leader's. Truncate to min(O, our end offset for E, our log end), or, if we never had
  E, to the end of our largest epoch below it and ask again (KIP-279; the next fetch
  carries that older epoch): ``truncation_on_divergence``. A new leader epoch from the
  controller, even with the same leader, re-validates this way on its next fetch
  (KAFKA-7164), since every fetch carries ``last_fetched_epoch``.
- **OFFSET_OUT_OF_RANGE**: ask the leader (ListOffsets with our ``replica_id``) for its
  latest offset; below our log end (an unclean election), truncate to it; else ask for
  its earliest and, if that is past our log end (it deleted what we still need), empty
  the log and start there (``fetchOffsetAndTruncate``): ``out_of_range_action``. (Both
  rules are pure functions in ``replica_fetch_state``.)
- **FENCED_LEADER_EPOCH** with the epoch we still hold: the controller has a newer
  LeaderAndIsr for us; the partition leaves the fetcher (failed, Kafka's
  ``onPartitionFenced``) until ``add_partitions`` brings it back. With an epoch that
  changed meanwhile, or **UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER /
  UNKNOWN_TOPIC_OR_PARTITION** and other errors: the partition backs off
  ``replica.fetch.backoff.ms`` and is fetched again.
- A local **KAFKA_STORAGE_ERROR** (the disk failed) marks the partition failed: it is
  fetched no more until the controller re-adds it; corrupt records back off and retry.
  A bug (any other exception) fails only its partition, or backs the fetcher off.

A failed connection (refused, dropped, timed out, leader unknown in the metadata) backs
off every partition and reconnects; the leader's endpoint is looked up again on every
connect, so a broker that came back elsewhere is found.

Ownership and concurrency: everything runs on the broker's event loop. The fetcher
changes a log only between two awaits, after checking that the partition is still its
own in the same state (the same ``PartitionFetchState`` object), that the partition
still follows this leader (a log this broker leads is never written here) and that the
log still ends where the request started: ``remove_partitions`` (this broker becomes leader, the
partition moves to another leader or is deleted) takes effect at once, and nothing in
flight touches the log afterwards. Appends are synchronous file writes, as a leader's
produce; the loop yields between partitions so one large answer does not hold it long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import BrokerEndpoint
from strom.broker.periodic import cancel_and_wait
from strom.broker.replica_fetch_state import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    FetchPhase,
    InitialFetchState,
    OutOfRange,
    PartitionFetchState,
    ReplicaFetcherConfig,
    out_of_range_action,
    truncation_on_divergence,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException, ProtocolError
from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.fetch_response import FetchResponse, PartitionData
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.list_offsets_response import ListOffsetsResponse
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import (
    InvalidRecordsError,
    KafkaStorageError,
    StorageError,
    UnexpectedAppendOffsetError,
)

if TYPE_CHECKING:
    from strom.broker.partition import Partition
    from strom.broker.replica_manager import ReplicaManager
    from strom.client.connection import BrokerConnection
    from strom.storage.log import Log

logger = logging.getLogger(__name__)

FETCH_VERSION = 12  # LastFetchedEpoch and DivergingEpoch; topics by name (v13 moved to ids)
LIST_OFFSETS_VERSIONS = range(4, 10)  # v4 brought CurrentLeaderEpoch
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2
# The leader refused us for a reason that passes (a leader change under way): back off, retry.
_RETRY_LATER = frozenset({
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID,
})


@dataclass(frozen=True, slots=True)
class _Sent:
    """One partition as a request asked for it."""

    state: PartitionFetchState
    fetch_offset: int
    leader_epoch: int


class _LeaderRefused(KafkaException):
    """The leader answered a partition's ListOffsets with an error code."""


EndpointLookup = Callable[[int], BrokerEndpoint | None]


class ReplicaFetcher:
    """Fetches the partitions this broker follows from ``source_broker_id``; see the module.

    ``failed_partitions`` is the manager's set (Kafka's ``FailedPartitions``): a partition
    put there is fetched no more until ``add_partitions`` names it again.
    """

    def __init__(self, source_broker_id: int, fetcher_id: int, replica_manager: ReplicaManager,
                 config: ReplicaFetcherConfig, endpoint_of: EndpointLookup,
                 failed_partitions: set[TopicPartition] | None = None) -> None:
        self.source_broker_id = source_broker_id
        self.fetcher_id = fetcher_id
        self.replica_manager = replica_manager
        self.config = config
        self.endpoint_of = endpoint_of  # the leader's inter-broker endpoint, None while unknown
        self.failed_partitions = failed_partitions if failed_partitions is not None else set()
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._connection: BrokerConnection | None = None
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()

    def __repr__(self) -> str:
        return f"<{self.name} {sorted(self.partitions)}>"

    @property
    def name(self) -> str:
        return f"ReplicaFetcher-{self.fetcher_id}-{self.source_broker_id}"

    # -- the manager's calls (synchronous, on the loop) ------------------------------------
    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)

    def add_partitions(self, states: Mapping[TopicPartition, InitialFetchState]) -> None:
        """Follow these partitions from this leader; one already followed at the same
        leader epoch keeps its state (Kafka's ``addPartitions``)."""
        for tp, initial in states.items():
            self.failed_partitions.discard(tp)
            current = self.partitions.get(tp)
            if current is not None and current.current_leader_epoch == initial.leader_epoch:
                continue
            self.partitions[tp] = self._initial_state(tp, initial)
        self._wakeup.set()

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, PartitionFetchState]:
        """Stop following; from now on nothing in flight touches these partitions' logs."""
        removed = {}
        for tp in partitions:
            state = self.partitions.pop(tp, None)
            if state is not None:
                removed[tp] = state
        return removed

    async def shutdown(self) -> None:
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._close()

    def _initial_state(self, tp: TopicPartition, initial: InitialFetchState) -> PartitionFetchState:
        if initial.fetch_offset < 0:
            return PartitionFetchState(initial.fetch_offset, initial.leader_epoch, FetchPhase.RESETTING)
        partition = self.replica_manager.get_partition(*tp)
        if partition is not None and partition.log.latest_epoch == UNDEFINED_EPOCH \
                and initial.fetch_offset < partition.log.log_end_offset:
            return PartitionFetchState(initial.fetch_offset, initial.leader_epoch, FetchPhase.TRUNCATING)
        offset = partition.log.log_end_offset if partition is not None else initial.fetch_offset
        return PartitionFetchState(offset, initial.leader_epoch)

    # -- the loop --------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            while True:
                try:
                    await self._fetch_once()
                except Exception:  # a bug: say so loudly, but keep replicating after a back-off
                    logger.exception("%s: unexpected error; backing off %d ms", self.name, self.config.backoff_ms)
                    self._close()
                    await asyncio.sleep(self.config.backoff_ms / 1000)
        finally:
            self._close()

    async def _fetch_once(self) -> None:
        """Truncate or reset what must be, then one fetch round (or wait for work)."""
        await self._reset_and_truncate()
        sent = self._ready()
        if not sent:
            if not self._pending_phase():
                await self._wait_for_work()
            return
        response = await self._fetch(sent)
        if response is not None:
            await self._process(response, sent)

    def _ready(self) -> dict[TopicPartition, _Sent]:
        now = time.monotonic()
        sent = {}
        for tp, state in list(self.partitions.items()):
            if state.phase is not FetchPhase.FETCHING or state.is_delayed(now):
                continue
            partition = self._own_partition(tp, state)
            if partition is None:
                continue
            state.fetch_offset = partition.log.log_end_offset
            sent[tp] = _Sent(state, state.fetch_offset, state.current_leader_epoch)
        return sent

    def _pending_phase(self) -> bool:
        """A partition added while the loop was awaiting must truncate or reset first."""
        now = time.monotonic()
        return any(s.phase is not FetchPhase.FETCHING and not s.is_delayed(now) for s in self.partitions.values())

    async def _wait_for_work(self) -> None:
        """Until a partition is added or the first back-off ends."""
        now = time.monotonic()
        delays = [s.delayed_until - now for s in self.partitions.values() if s.is_delayed(now)]
        self._wakeup.clear()
        try:
            async with asyncio.timeout(min(delays) if delays else None):
                await self._wakeup.wait()
        except TimeoutError:
            pass

    def _request(self, sent: Mapping[TopicPartition, _Sent]) -> FetchRequest:
        config = self.config
        by_topic: dict[str, list[FetchPartition]] = {}
        for (topic, index), item in sent.items():
            log = self.replica_manager.partitions[(topic, index)].log
            by_topic.setdefault(topic, []).append(FetchPartition(
                partition=index, current_leader_epoch=item.leader_epoch, fetch_offset=item.fetch_offset,
                last_fetched_epoch=log.latest_epoch, log_start_offset=log.log_start_offset,
                partition_max_bytes=config.partition_max_bytes))
        return FetchRequest(
            replica_id=config.broker_id, max_wait_ms=config.max_wait_ms, min_bytes=config.min_bytes,
            max_bytes=config.response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
            topics=tuple(FetchTopic(topic=topic, partitions=tuple(parts)) for topic, parts in by_topic.items()))

    async def _fetch(self, sent: Mapping[TopicPartition, _Sent]) -> FetchResponse | None:
        """The leader's answer, or None after a failure (every partition then backs off)."""
        request = self._request(sent)
        try:
            connection = await self._connect()
            if connection is None:
                logger.debug("%s: broker %d's endpoint is not known yet", self.name, self.source_broker_id)
            else:
                version = connection.version_for(FetchRequest.API_KEY, range(FETCH_VERSION, FETCH_VERSION + 1))
                # A long poll may rightly take max_wait_ms before the answer even leaves.
                timeout_ms = self.config.socket_timeout_ms + self.config.max_wait_ms
                response = await connection.send(request, version=version, timeout_ms=timeout_ms)
                assert isinstance(response, FetchResponse)
                if response.error_code == ErrorCode.NONE:
                    return response
                logger.warning("%s: the leader refused the fetch: %s", self.name,
                               ErrorCode.from_code(response.error_code).name)
        except (KafkaException, OSError) as exc:
            logger.warning("%s: fetch from broker %d failed (%s); backing off %d ms", self.name,
                           self.source_broker_id, exc, self.config.backoff_ms)
            self._close()
        self._delay(sent)
        return None

    async def _process(self, response: FetchResponse, sent: Mapping[TopicPartition, _Sent]) -> None:
        for topic in response.responses:
            for data in topic.partitions:
                tp = (topic.topic, data.partition_index)
                item = sent.get(tp)
                if item is None:
                    continue
                partition = self._current(tp, item)
                if partition is None:
                    continue  # removed, re-added, or its log moved while the request was out
                try:
                    await self._on_answer(tp, item, partition, data)
                except Exception:  # Kafka: an unexpected error fails the partition, not the fetcher
                    logger.exception("%s: unexpected error for %s-%d at offset %d", self.name, *tp, item.fetch_offset)
                    self._mark_failed(tp, None)
                await asyncio.sleep(0)  # let the loop breathe between partitions

    async def _on_answer(self, tp: TopicPartition, item: _Sent, partition: Partition, data: PartitionData) -> None:
        error = ErrorCode.from_code(data.error_code)
        if error == ErrorCode.NONE:
            self._on_records(tp, item, partition, data)
        elif error == ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._on_out_of_range(tp, item.state)
        elif error == ErrorCode.FENCED_LEADER_EPOCH:
            self._on_fenced(tp, item.leader_epoch)
        else:
            if error in _RETRY_LATER:
                logger.info("%s: %s for %s-%d; retrying in %d ms", self.name, error.name, *tp, self.config.backoff_ms)
            else:
                logger.error("%s: error for %s-%d at offset %d: %s", self.name, *tp, item.fetch_offset, error.name)
            self._delay_one(item.state)

    # -- one partition's answer ---------------------------------------------------------
    def _on_records(self, tp: TopicPartition, item: _Sent, partition: Partition, data: PartitionData) -> None:
        log = partition.log
        try:
            records = data.records
            if isinstance(records, bytes | bytearray | memoryview) and len(records):
                self._append(tp, log, records, item.leader_epoch)
        except KafkaStorageError as exc:
            self._mark_failed(tp, f"the local log failed: {exc}")
            self.replica_manager.log_dir_failed(f"appending to {tp[0]}-{tp[1]}", exc)
            return
        except (InvalidRecordsError, ProtocolError) as exc:
            # Kafka's CorruptRecordException: log, back off, fetch again (a transient cut).
            logger.error("%s: invalid records for %s-%d at offset %d: %s", self.name, *tp, item.fetch_offset, exc)
            self._delay_one(item.state)
            return
        except StorageError as exc:
            self._mark_failed(tp, f"appending at offset {item.fetch_offset} failed: {exc}")
            return
        self._follow_leader_offsets(tp, log, data.high_watermark, data.log_start_offset)
        item.state.fetch_offset = log.log_end_offset
        item.state.lag = max(0, data.high_watermark - log.log_end_offset)
        diverging = data.diverging_epoch
        if diverging.epoch >= 0:
            self._truncate_on_divergence(tp, item.state, log, diverging.epoch, diverging.end_offset)

    def _append(self, tp: TopicPartition, log: Log, records: bytes | bytearray | memoryview,
                leader_epoch: int) -> None:
        """``Log.append_as_follower`` (a trailing partial batch and batches of an epoch newer
        than the one we fetched under are left out there). An empty log whose start offset
        falls inside the leader's first batch (DeleteRecords on the leader) starts over at
        that batch's base, as Kafka's ``appendRecordsToFollowerOrFutureReplica``."""
        try:
            log.append_as_follower(records, current_leader_epoch=leader_epoch)
        except UnexpectedAppendOffsetError as exc:
            end = log.log_end_offset
            if not (end == log.log_start_offset and exc.first_offset < end <= exc.last_offset):
                raise
            logger.info("%s: the leader's first batch for %s-%d starts at %d, below our empty log's start %d; "
                        "starting the log there", self.name, *tp, exc.first_offset, end)
            log.truncate_fully_and_start_at(exc.first_offset)
            log.append_as_follower(records, current_leader_epoch=leader_epoch)

    def _follow_leader_offsets(self, tp: TopicPartition, log: Log, leader_high_watermark: int,
                               leader_log_start_offset: int) -> None:
        """HW = min(the leader's, our log end); the leader's log start offset moves ours."""
        new_high_watermark = min(leader_high_watermark, log.log_end_offset)
        if new_high_watermark >= 0 and new_high_watermark != log.high_watermark:
            log.update_high_watermark(new_high_watermark)
            self.replica_manager.wake_waiters(tp)
        new_start = min(leader_log_start_offset, log.high_watermark)
        if new_start > log.log_start_offset:
            log.delete_records(new_start)

    def _truncate_on_divergence(self, tp: TopicPartition, state: PartitionFetchState, log: Log,
                                leader_epoch: int, leader_end_offset: int) -> None:
        found = log.end_offset_for_epoch(leader_epoch)
        follower_end = None if found[1] == UNDEFINED_OFFSET else found
        decision = truncation_on_divergence(leader_epoch, leader_end_offset, follower_end, log.log_end_offset)
        logger.info("%s: %s-%d diverges from the leader after epoch %d (the leader's ends at %d, ours at %s); "
                    "truncating to %d%s", self.name, *tp, leader_epoch, leader_end_offset,
                    found[1] if follower_end is not None else "unknown", decision.offset,
                    "" if decision.complete else ", then asking about our previous epoch")
        self._truncate(tp, state, log, decision.offset)

    def _truncate(self, tp: TopicPartition, state: PartitionFetchState, log: Log, offset: int) -> bool:
        try:
            if offset < log.log_end_offset:
                log.truncate_to(offset)
                self.replica_manager.wake_waiters(tp)
        except KafkaStorageError as exc:
            self._mark_failed(tp, f"truncating to {offset} failed: {exc}")
            self.replica_manager.log_dir_failed(f"truncating {tp[0]}-{tp[1]} to {offset}", exc)
            return False
        state.fetch_offset = log.log_end_offset
        return True

    async def _on_out_of_range(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        """Kafka's ``handleOutOfRangeError``: ask the leader, then truncate (see the module)."""
        try:
            leader_end = await self._list_offset(tp, state.current_leader_epoch, LATEST_TIMESTAMP)
            log = self._log_if_still(tp, state)
            if log is None:
                return
            action, offset = out_of_range_action(log.log_end_offset, leader_end, None)
            if action is OutOfRange.KEEP:
                leader_start = await self._list_offset(tp, state.current_leader_epoch, EARLIEST_TIMESTAMP)
                log = self._log_if_still(tp, state)
                if log is None:
                    return
                action, offset = out_of_range_action(log.log_end_offset, leader_end, leader_start)
            logger.warning("%s: offset %d of %s-%d is out of range on broker %d (its log ends at %d): %s %d",
                           self.name, log.log_end_offset, *tp, self.source_broker_id, leader_end, action.value,
                           offset)
            if action is OutOfRange.TRUNCATE_TO:
                self._truncate(tp, state, log, offset)
            elif action is OutOfRange.START_AT:
                log.truncate_fully_and_start_at(offset)
                self.replica_manager.wake_waiters(tp)
            elif state.phase is FetchPhase.FETCHING:
                # Nothing to cut: the leader grew past us meanwhile, or our offsets are not
                # what it reports (its latest is its HW for a replica, not its log end); back
                # off rather than ask again at once.
                self._delay_one(state)
            state.fetch_offset = log.log_end_offset
            state.phase = FetchPhase.FETCHING
        except KafkaStorageError as exc:
            self._mark_failed(tp, f"truncating failed: {exc}")
            self.replica_manager.log_dir_failed(f"truncating {tp[0]}-{tp[1]}", exc)
        except _LeaderRefused as exc:
            if exc.error_code == ErrorCode.FENCED_LEADER_EPOCH:
                self._on_fenced(tp, state.current_leader_epoch)
                return
            logger.info("%s: cannot learn the leader's offsets for %s-%d: %s", self.name, *tp, exc)
            self._delay_one(state)
        except (KafkaException, OSError) as exc:
            logger.warning("%s: ListOffsets for %s-%d failed (%s)", self.name, *tp, exc)
            self._close()
            self._delay_one(state)

    async def _list_offset(self, tp: TopicPartition, leader_epoch: int, timestamp: int) -> int:
        """The leader's offset for ``timestamp`` (-1 latest, -2 earliest), asked as its replica."""
        connection = await self._connect()
        if connection is None:
            raise _LeaderRefused(f"broker {self.source_broker_id}'s endpoint is not known",
                                 ErrorCode.LEADER_NOT_AVAILABLE)
        request = ListOffsetsRequest(replica_id=self.config.broker_id, isolation_level=0, topics=(
            ListOffsetsTopic(tp[0], (ListOffsetsPartition(tp[1], leader_epoch, timestamp),)),))
        version = connection.version_for(ListOffsetsRequest.API_KEY, LIST_OFFSETS_VERSIONS)
        response = await connection.send(request, version=version)
        assert isinstance(response, ListOffsetsResponse)
        for topic in response.topics:
            for answer in topic.partitions:
                if topic.name == tp[0] and answer.partition_index == tp[1]:
                    if answer.error_code:
                        raise _LeaderRefused(f"ListOffsets: {ErrorCode.from_code(answer.error_code).name}",
                                             answer.error_code)
                    if answer.offset < 0:
                        raise _LeaderRefused(f"ListOffsets gave no offset for {timestamp}",
                                             ErrorCode.OFFSET_NOT_AVAILABLE)
                    return int(answer.offset)
        raise _LeaderRefused(f"ListOffsets answered without {tp[0]}-{tp[1]}", ErrorCode.UNKNOWN_SERVER_ERROR)

    def _on_fenced(self, tp: TopicPartition, request_epoch: int) -> None:
        """Kafka's ``onPartitionFenced``: still at the epoch we asked with, the controller's
        next LeaderAndIsr must come first (failed until it re-adds us); else retry soon."""
        state = self.partitions.get(tp)
        if state is None:
            return
        if state.current_leader_epoch == request_epoch:
            logger.info("%s: %s-%d has an older epoch (%d) than the leader; awaiting the new LeaderAndIsr",
                        self.name, *tp, request_epoch)
            self._mark_failed(tp, None)
        else:
            self._delay_one(state)

    # -- phases other than fetching ----------------------------------------------------------
    async def _reset_and_truncate(self) -> None:
        now = time.monotonic()
        for tp, state in list(self.partitions.items()):
            if self.partitions.get(tp) is not state or state.is_delayed(now):
                continue
            if state.phase is FetchPhase.TRUNCATING:
                log = self._log_if_still(tp, state)
                if log is not None:
                    logger.info("%s: %s-%d has no leader epochs; truncating to %d before fetching",
                                self.name, *tp, state.fetch_offset)
                    if self._truncate(tp, state, log, state.fetch_offset):
                        state.phase = FetchPhase.FETCHING
            elif state.phase is FetchPhase.RESETTING:
                await self._on_out_of_range(tp, state)

    # -- helpers ----------------------------------------------------------------------------
    def _own_partition(self, tp: TopicPartition, state: PartitionFetchState) -> Partition | None:
        """The partition, if it is still ours in ``state`` and follows our source broker."""
        if self.partitions.get(tp) is not state:
            return None
        partition = self.replica_manager.get_partition(*tp)
        if partition is None:
            self._mark_failed(tp, "the partition is no longer hosted here")
            return None
        if partition.leader_id != self.source_broker_id:
            # The controller's word moved it and the manager has not yet: never write a log
            # this broker may lead.
            self._delay_one(state)
            return None
        return partition

    def _log_if_still(self, tp: TopicPartition, state: PartitionFetchState) -> Log | None:
        partition = self._own_partition(tp, state)
        return None if partition is None else partition.log

    def _current(self, tp: TopicPartition, item: _Sent) -> Partition | None:
        """The partition if the answer still applies: same state, same log end."""
        partition = self._own_partition(tp, item.state)
        if partition is None or item.state.current_leader_epoch != item.leader_epoch \
                or partition.log.log_end_offset != item.fetch_offset:
            return None
        return partition

    def _delay(self, sent: Mapping[TopicPartition, _Sent]) -> None:
        for item in sent.values():
            self._delay_one(item.state)

    def _delay_one(self, state: PartitionFetchState) -> None:
        now = time.monotonic()
        if not state.is_delayed(now):
            state.delayed_until = now + self.config.backoff_ms / 1000

    def _mark_failed(self, tp: TopicPartition, reason: str | None) -> None:
        """Kafka's ``markPartitionFailed``: out of the fetcher until ``add_partitions``."""
        self.partitions.pop(tp, None)
        self.failed_partitions.add(tp)
        if reason is not None:
            logger.error("%s: %s-%d marked as failed: %s", self.name, *tp, reason)

    async def _connect(self) -> BrokerConnection | None:
        endpoint = self.endpoint_of(self.source_broker_id)
        if endpoint is None:
            self._close()
            return None
        connection = self._connection
        if connection is not None and not connection.closed \
                and (connection.host, connection.port) == (endpoint.host, endpoint.port):
            return connection
        self._close()
        # Imported here: a single node never follows, and the client's connection module
        # brings importlib.metadata, which `strom serve` keeps out of its start-up.
        from strom.client.connection import BrokerConnection

        timeout_ms = self.config.socket_timeout_ms
        self._connection = await BrokerConnection.open(
            endpoint.host, endpoint.port, node_id=self.source_broker_id,
            client_id=f"broker-{self.config.broker_id}-fetcher-{self.fetcher_id}",
            request_timeout_ms=timeout_ms, connect_timeout_ms=timeout_ms)
        logger.info("%s connected to broker %d at %s:%d", self.name, self.source_broker_id, endpoint.host,
                    endpoint.port)
        return self._connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
