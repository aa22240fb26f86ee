"""The groups' durable side: ``__consumer_offsets`` creation, appends, loading and unloading.

Kafka's ``GroupMetadataManager``. Every change to a group's committed offsets or
metadata is one record batch appended to the group's partition of the offsets topic
before the coordinator answers (one batch per request, so a commit of many partitions
is all-or-nothing); the in-memory ``groups`` table is updated only after the append
succeeded. Loading a partition reads it from its log start to its end and applies the
records in order (tombstones delete), which rebuilds its groups exactly: offsets and
group metadata are applied independently, as Kafka does, and a group with offsets but
no metadata comes back Empty.

On one node every partition is loaded at start and this broker coordinates every
group. In cluster mode a broker coordinates the groups of the offsets partitions it
leads (Kafka's ``scheduleLoadGroupAndOffsets``/``removeGroupsForPartition``): a
partition it is elected leader of is *loading* (read in a worker thread, so a long log
does not stall the event loop) and then *owned*; one it stops leading is neither, and
its groups leave the table. Invariant: ``groups`` holds only groups of owned partitions
(cluster mode), and ``loading_partitions`` and ``owned_partitions`` never share one.

Offset commits and group metadata are appended with ``offsets.commit.required.acks``
(-1 by default, as Kafka) and answered only once the partition's high watermark covers
the batch (``ReplicaManager.wait_for_replication``, bounded by
``offsets.commit.timeout.ms``): a commit acknowledged to a consumer is on every ISR
member, so it survives the coordinator's move ("only after all the replicas of the
offsets topic receive the offsets"). A partition without followers (one node) has its
high watermark at the log end as soon as the append returns, so nothing waits there.
Commits are applied in the order of their batches, whatever order their waits end in
(Kafka's ``onOffsetCommitAppend``); each group remembers the batch of each committed
offset (``GroupMetadata.offset_batches``), a load included. TxnOffsetCommit's offsets
go in a transactional batch of the producer and stay pending per producer id until
its marker lands on the partition (``complete_transaction``, from WriteTxnMarkers);
``producer_groups`` says which groups a producer has pending offsets in. Loading
(``group_loader``) rebuilds the pending ones that no marker resolved yet. Deletions and expirations wait for nothing, as
Kafka's ``cleanupGroupMetadata`` appends them with acks=0: a lost tombstone is written
again by the next purge.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from strom.broker.admin_manager import TopicAdmin
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_loader import LoadState, groups_of, read_partition
from strom.broker.group.group_metadata import (
    AppendedOffset,
    GroupMetadata,
    GroupState,
    OffsetAndMetadata,
)
from strom.broker.group.offsets_topic import (
    OFFSETS_TOPIC,
    OffsetCommitValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from strom.broker.metadata_cache import MetadataCache, TopicError
from strom.broker.partition import Partition
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import build_record_batch
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import StorageError

logger = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class _Appended:
    """A batch in the leader's log of an offsets partition, not yet known to be replicated."""

    partition: Partition
    last_offset: int


class GroupMetadataManager:
    def __init__(
        self,
        config: GroupConfig,
        metadata: MetadataCache,
        admin_manager: TopicAdmin,
        replica_manager: ReplicaManager,
        clock_ms: Callable[[], int] = wall_clock_ms,
        *,
        cluster_mode: bool = False,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.admin_manager = admin_manager
        self.replica_manager = replica_manager
        self.clock_ms = clock_ms
        self.cluster_mode = cluster_mode
        self.groups: dict[str, GroupMetadata] = {}
        self._loaded_at_start = False
        # cluster mode: the offsets partitions this broker coordinates, or is loading
        self.owned_partitions: set[int] = set()
        self.loading_partitions: set[int] = set()
        self._loads: dict[int, tuple[asyncio.Task[None], threading.Event]] = {}
        # The groups with transactional offsets pending, per producer id (Kafka's
        # ``openGroupsForProducer``): a marker's ``complete_transaction`` looks there.
        self.producer_groups: dict[int, set[str]] = {}
        # Markers that landed on a partition while it loads (the read may have ended before
        # them): applied to its groups once they are installed. Nothing else is written to
        # a loading partition, whose groups' requests answer COORDINATOR_LOAD_IN_PROGRESS.
        self._completed_while_loading: dict[int, list[tuple[int, bool]]] = {}
        # Group metadata writes whose outcome is only logged (a group left Empty).
        self._background: set[asyncio.Task[None]] = set()

    @property
    def loaded(self) -> bool:
        """No load in progress: on one node, the load at start is done."""
        return not self.loading_partitions if self.cluster_mode else self._loaded_at_start

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """Kafka's ``validateGroupStatus``: may this broker answer for ``group_id`` now?"""
        if not self.cluster_mode:
            return ErrorCode.NONE if self._loaded_at_start else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        partition = self.partition_for(group_id)
        if partition in self.loading_partitions:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if partition not in self.owned_partitions:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    # -- the topic -----------------------------------------------------------------------
    def partition_count(self) -> int:
        topic = self.metadata.get(OFFSETS_TOPIC)
        return topic.partitions if topic is not None else self.config.offsets_topic_num_partitions

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.partition_count())

    def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` (compacted) on first need; raises TopicError."""
        if self.metadata.get(OFFSETS_TOPIC) is not None:
            return
        self.admin_manager.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions,
                                        self.offsets_topic_configs())

    def offsets_topic_configs(self) -> dict[str, str]:
        """The offsets topic's own configs (Kafka's ``groupMetadataTopicConfigs``)."""
        return {"cleanup.policy": "compact", "segment.bytes": str(self.config.offsets_topic_segment_bytes)}

    # -- loading -------------------------------------------------------------------------
    def load(self) -> None:
        """One node: rebuild every group from the offsets topic (if it exists).

        In cluster mode nothing is loaded here: each partition is loaded when this
        broker is elected its leader (``schedule_load``).
        """
        if self.cluster_mode:
            return
        topic = self.metadata.get(OFFSETS_TOPIC)
        state = LoadState()
        if topic is not None:
            for partition in range(topic.partitions):
                hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
                if hosted is not None:
                    read_partition(hosted.log, state)
        loaded = groups_of(state)
        self.groups.update(loaded)
        self._track_producers(loaded.values())
        self._loaded_at_start = True
        if state.records:
            logger.info(
                "loaded %d groups from %d records of %s (%d unreadable skipped)",
                len(self.groups), state.records, OFFSETS_TOPIC, state.skipped,
            )

    # -- cluster mode: partitions gained and lost ----------------------------------------
    def schedule_load(self, partition: int, on_loaded: Callable[[list[GroupMetadata]], None]) -> None:
        """This broker now leads ``partition``: load its groups, then own it.

        Requests for its groups answer COORDINATOR_LOAD_IN_PROGRESS meanwhile. A
        partition already owned or loading is left as it is (Kafka: "already loading").
        Called off an event loop (nothing to run a task on), the load happens here.
        """
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return
        self.loading_partitions.add(partition)
        cancel = threading.Event()
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._finish_load(partition, self._read_hosted(partition, cancel), on_loaded)
            return
        task = loop.create_task(self._load(partition, cancel, on_loaded), name=f"load {OFFSETS_TOPIC}-{partition}")
        self._loads[partition] = (task, cancel)

    async def _load(
        self, partition: int, cancel: threading.Event, on_loaded: Callable[[list[GroupMetadata]], None]
    ) -> None:
        try:
            loaded = await asyncio.to_thread(self._read_hosted, partition, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the worker thread stops at its next read
            raise
        except Exception:  # a bug, not a bad log: still own the partition rather than load forever
            logger.exception("loading %s-%d failed", OFFSETS_TOPIC, partition)
            loaded = {}
        finally:
            entry = self._loads.get(partition)
            if entry is not None and entry[1] is cancel:  # not a later load's entry
                del self._loads[partition]
        if not cancel.is_set():
            self._finish_load(partition, loaded, on_loaded)

    def _read_hosted(self, partition: int, cancel: threading.Event) -> dict[str, GroupMetadata]:
        """Read one partition and build its groups (in a worker thread: log readers take
        no lock, and the groups are nobody else's until installed on the event loop)."""
        state = LoadState()
        started = time.monotonic()
        hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
        if hosted is None:
            logger.warning("cannot load %s-%d: no log here", OFFSETS_TOPIC, partition)
            return {}
        try:
            read_partition(hosted.log, state, cancel)
        except (StorageError, OSError, ProtocolError) as exc:
            if cancel.is_set():
                return {}  # unloaded meanwhile (its log may be deleted): nothing to report
            # As Kafka: the partition is owned anyway, with what could be read.
            logger.error("loading %s-%d failed after %d records: %s", OFFSETS_TOPIC, partition, state.records, exc)
        if cancel.is_set():
            return {}
        loaded = groups_of(state)
        logger.info(
            "read %s-%d: %d groups from %d records (%d unreadable skipped) in %.0f ms",
            OFFSETS_TOPIC, partition, len(loaded), state.records, state.skipped, (time.monotonic() - started) * 1000,
        )
        return loaded

    def _finish_load(
        self, partition: int, loaded: dict[str, GroupMetadata], on_loaded: Callable[[list[GroupMetadata]], None]
    ) -> None:
        self.groups.update(loaded)
        self._track_producers(loaded.values())
        self.loading_partitions.discard(partition)
        self.owned_partitions.add(partition)
        for producer_id, committed in self._completed_while_loading.pop(partition, ()):
            self.complete_transaction(producer_id, (partition,), committed)
        on_loaded(list(loaded.values()))

    def remove_partition(self, partition: int) -> list[GroupMetadata]:
        """This broker no longer leads ``partition``: stop any load, drop its groups.

        Returns the groups removed, for the coordinator to answer their waiting
        members NOT_COORDINATOR.
        """
        load = self._loads.pop(partition, None)
        self._completed_while_loading.pop(partition, None)
        if load is not None:
            task, cancel = load
            cancel.set()
            task.cancel()
        self.loading_partitions.discard(partition)
        self.owned_partitions.discard(partition)
        removed = [group for group in self.groups.values() if self.partition_for(group.group_id) == partition]
        for group in removed:
            del self.groups[group.group_id]
            for producer_id in group.pending_txn_offsets:
                self._forget_producer_group(producer_id, group.group_id)
        if removed:
            logger.info("unloaded %d groups of %s-%d", len(removed), OFFSETS_TOPIC, partition)
        return removed

    async def shutdown(self) -> None:
        """Stop the loads in progress and the background waits."""
        for task in list(self._background):
            task.cancel()
        loads, self._loads = list(self._loads.values()), {}
        for task, cancel in loads:
            cancel.set()
            task.cancel()
        for task, _ in loads:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def wait_for_loads(self) -> None:
        """Until no load is in progress (loads started meanwhile too)."""
        while self._loads:
            await asyncio.gather(*(task for task, _ in list(self._loads.values())), return_exceptions=True)

    # -- appends -------------------------------------------------------------------------
    async def store_group(self, group: GroupMetadata, assignments: Mapping[str, bytes] | None = None) -> ErrorCode:
        """Append the group's metadata (with ``assignments`` instead of the members' own, if
        given) and wait until it is replicated; Kafka's ``storeGroup`` error otherwise."""
        appended = self._append_group(group, assignments)
        if isinstance(appended, _Appended):
            appended = await self._replicated(appended)
        return group_append_error(appended)

    def store_group_in_background(self, group: GroupMetadata) -> None:
        """Append the group's metadata now; its replication is waited for (and a failure
        logged) in the background, as Kafka stores a group that became Empty."""
        appended = self._append_group(group, None)
        if isinstance(appended, _Appended):
            done, error = appended.partition.check_enough_replicas_reach_offset(appended.last_offset + 1)
            if not done:
                task = asyncio.get_running_loop().create_task(self._log_replication(group.group_id, appended))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
                return
            appended = error
        if appended:
            logger.warning("group %s: storing the group failed: %s", group.group_id, group_append_error(appended).name)

    async def _log_replication(self, group_id: str, appended: _Appended) -> None:
        error = await self._replicated(appended)
        if error:
            logger.warning("group %s: storing the group failed: %s", group_id, group_append_error(error).name)

    def _append_group(self, group: GroupMetadata, assignments: Mapping[str, bytes] | None) -> _Appended | ErrorCode:
        value = encode_group_metadata_value(group.to_record(assignments))
        return self._append(group.group_id, [(encode_group_metadata_key(group.group_id), value)],
                            self.config.offsets_commit_required_acks)

    async def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """Append the commits as one batch, wait until it is replicated, then apply them
        (unless the group died meanwhile); Kafka's ``storeOffsets`` error otherwise."""
        records: list[tuple[bytes, bytes | None]] = [
            (
                encode_offset_commit_key(group.group_id, topic, partition),
                encode_offset_commit_value(
                    OffsetCommitValue(
                        o.offset, o.metadata, o.commit_timestamp, o.leader_epoch, o.expire_timestamp
                    )
                ),
            )
            for (topic, partition), o in offsets.items()
        ]
        appended = self._append(group.group_id, records, self.config.offsets_commit_required_acks)
        if isinstance(appended, ErrorCode):
            return commit_append_error(appended)
        batch = appended.last_offset
        group.pending_offset_commits.update(offsets.keys())
        try:
            error = await self._replicated(appended)
        finally:
            group.pending_offset_commits.subtract(offsets.keys())
            for tp in offsets:
                if group.pending_offset_commits[tp] <= 0:
                    del group.pending_offset_commits[tp]
        if error:
            return commit_append_error(error)
        if not group.is_in(GroupState.DEAD):
            for tp, offset in offsets.items():
                group.apply_offset(tp, AppendedOffset(offset, batch))
        return ErrorCode.NONE

    async def store_txn_offsets(self, group: GroupMetadata, producer_id: int, producer_epoch: int,
                                offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """TxnOffsetCommit: append the commits as one *transactional* batch of the producer
        (no sequence, as a coordinator's write), keep them pending for the producer until
        its transaction's marker (``complete_transaction``), and answer once replicated.

        Pending from the append on (Kafka's ``prepareTxnOffsetCommit``), so RequireStable
        fetches see them; dropped again if the replication fails, unless a later commit of
        the producer replaced them (Kafka's ``failPendingTxnOffsetCommit``). The log's
        producer state checks the epoch: a fenced producer's commit is INVALID_PRODUCER_EPOCH.
        """
        records: list[tuple[bytes, bytes | None]] = [
            (
                encode_offset_commit_key(group.group_id, topic, partition),
                encode_offset_commit_value(
                    OffsetCommitValue(o.offset, o.metadata, o.commit_timestamp, o.leader_epoch, o.expire_timestamp)
                ),
            )
            for (topic, partition), o in offsets.items()
        ]
        appended = self._append(group.group_id, records, self.config.offsets_commit_required_acks,
                                producer=(producer_id, producer_epoch))
        if isinstance(appended, ErrorCode):
            return commit_append_error(appended)
        entries = {tp: AppendedOffset(offset, appended.last_offset) for tp, offset in offsets.items()}
        pending = group.pending_txn_offsets.setdefault(producer_id, {})
        pending.update(entries)
        self.producer_groups.setdefault(producer_id, set()).add(group.group_id)
        error = await self._replicated(appended)
        if error:
            for tp, entry in entries.items():
                if pending.get(tp) is entry:
                    del pending[tp]
            if not pending and group.pending_txn_offsets.get(producer_id) is pending:
                del group.pending_txn_offsets[producer_id]
            return commit_append_error(error)
        return ErrorCode.NONE

    def complete_transaction(self, producer_id: int, partitions: Iterable[int], committed: bool) -> None:
        """The producer's COMMIT or ABORT marker is on these offsets partitions (and
        replicated): its pending offsets in their groups become committed or are dropped
        (Kafka's ``scheduleHandleTxnCompletion``). Groups of other partitions keep theirs
        until the marker reaches their partition too."""
        completed = set(partitions)
        for partition in completed & self.loading_partitions:
            self._completed_while_loading.setdefault(partition, []).append((producer_id, committed))
        group_ids = self.producer_groups.get(producer_id)
        if not group_ids:
            return
        for group_id in [g for g in group_ids if self.partition_for(g) in completed]:
            group_ids.discard(group_id)
            group = self.groups.get(group_id)
            if group is not None and not group.is_in(GroupState.DEAD):
                applied = group.complete_pending_txn_offsets(producer_id, committed)
                logger.debug("group %s: producer %d's transaction %s (%d offsets applied)", group_id,
                             producer_id, "committed" if committed else "aborted", applied)
        if not group_ids:
            del self.producer_groups[producer_id]

    def _forget_producer_group(self, producer_id: int, group_id: str) -> None:
        group_ids = self.producer_groups.get(producer_id)
        if group_ids is not None:
            group_ids.discard(group_id)
            if not group_ids:
                del self.producer_groups[producer_id]

    def _track_producers(self, groups: Iterable[GroupMetadata]) -> None:
        for group in groups:
            for producer_id in group.pending_txn_offsets:
                self.producer_groups.setdefault(producer_id, set()).add(group.group_id)

    def delete_offsets(self, group: GroupMetadata, partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Tombstones for the committed ones of ``partitions``; then they are gone."""
        present = [tp for tp in partitions if tp in group.offsets]
        if not present:
            return ErrorCode.NONE
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, topic, partition), None) for topic, partition in present
        ]
        appended = self._append(group.group_id, records, 1)
        if isinstance(appended, ErrorCode):
            return group_append_error(appended)
        for tp in present:
            group.remove_offset(tp)
        return ErrorCode.NONE

    def delete_group(self, group: GroupMetadata) -> ErrorCode:
        """Tombstones for the group's metadata and every offset; then it leaves the table."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, topic, partition), None) for topic, partition in group.offsets
        ]
        records.append((encode_group_metadata_key(group.group_id), None))
        appended = self._append(group.group_id, records, 1)
        if isinstance(appended, ErrorCode):
            return group_append_error(appended)
        group.offsets.clear()
        group.offset_batches.clear()
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]
        return ErrorCode.NONE

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], required_acks: int,
                *, producer: tuple[int, int] | None = None) -> _Appended | ErrorCode:
        """One batch on the group's partition as its leader: where it went, or the append's
        own error (NOT_ENOUGH_REPLICAS refuses an acks=-1 batch before it is written).
        ``producer`` (id, epoch) makes it a transactional batch of that producer."""
        if not self.cluster_mode:  # in a cluster the partition exists: this broker leads it
            try:
                self.ensure_offsets_topic()
            except TopicError as exc:
                logger.error("cannot create %s: %s", OFFSETS_TOPIC, exc)
                return ErrorCode.COORDINATOR_NOT_AVAILABLE
        now = self.clock_ms()
        if producer is None:
            batch = build_record_batch((key, value, (), now) for key, value in records)
        else:
            batch = build_record_batch(((key, value, (), now) for key, value in records), producer_id=producer[0],
                                       producer_epoch=producer[1], base_sequence=-1, is_transactional=True)
        partition = self.partition_for(group_id)
        try:
            hosted, last_offset = self.replica_manager.append(OFFSETS_TOPIC, partition, batch, required_acks)
        except StorageError as exc:
            logger.warning("appending %d records of group %s to %s-%d failed: %s",
                           len(records), group_id, OFFSETS_TOPIC, partition, exc)
            return exc.error_code
        return _Appended(hosted, last_offset)

    async def _replicated(self, appended: _Appended) -> ErrorCode:
        """NONE once the high watermark covers the batch (at once without followers), else
        the partition's error: NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS_AFTER_APPEND, or
        REQUEST_TIMED_OUT after ``offsets.commit.timeout.ms``. acks other than -1 wait for
        nothing, as Kafka's ``appendRecords``."""
        partition, last_offset = appended.partition, appended.last_offset
        if self.config.offsets_commit_required_acks != -1:
            return ErrorCode.NONE
        done, error = partition.check_enough_replicas_reach_offset(last_offset + 1)
        if done:
            return error
        timeout = self.config.offsets_commit_timeout_ms / 1000
        results = await self.replica_manager.wait_for_replication([(partition, last_offset)], timeout)
        error = results[partition.topic_partition]
        if error:
            logger.warning("%s-%d: the batch ending at %d is not replicated: %s",
                           partition.topic, partition.index, last_offset, error.name)
        return error


_COORDINATOR_NOT_AVAILABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
})
_NOT_COORDINATOR = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE})


def commit_append_error(error: ErrorCode) -> ErrorCode:
    """What an OffsetCommit answers for a failed offsets-topic append (Kafka 3.9's
    ``storeOffsets``): REQUEST_TIMED_OUT is passed on as it is (clients retry it and
    look the coordinator up again), an oversized batch is INVALID_COMMIT_OFFSET_SIZE."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error in _TOO_LARGE:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def group_append_error(error: ErrorCode) -> ErrorCode:
    """What a JoinGroup/SyncGroup answers for a failed group-metadata append (Kafka 3.9's
    ``storeGroup``): a replication timeout is REBALANCE_IN_PROGRESS (the members rejoin),
    an oversized batch UNKNOWN_SERVER_ERROR."""
    if error in _COORDINATOR_NOT_AVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in _NOT_COORDINATOR:
        return ErrorCode.NOT_COORDINATOR
    if error == ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error
