"""The groups' durable side: ``__consumer_offsets`` creation, appends and the load at start.

Kafka's ``GroupMetadataManager``. Every change to a group's committed offsets or
metadata is one record batch appended to the group's partition of the offsets topic
before the coordinator answers (one batch per request, so a commit of many partitions
is all-or-nothing); the in-memory ``groups`` table is updated only after the append
succeeded. On start every partition is read from its log start to its end and applied
in order (tombstones delete), which rebuilds the table exactly: offsets and group
metadata are applied independently, as Kafka does, and a group with offsets but no
metadata comes back Empty.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from strom.broker.admin_manager import AdminManager
from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import GroupMetadata, OffsetAndMetadata
from strom.broker.group.offsets_topic import (
    OFFSETS_TOPIC,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    partition_for,
)
from strom.broker.metadata_cache import MetadataCache, TopicError
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.records import build_record_batch, decode_batch, decode_message, iter_batches
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import StorageError
from strom.storage.log import FetchIsolation, Log

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class _LoadState:
    """What one pass over the log leaves: the last value per key (None = deleted)."""

    offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = field(default_factory=dict)
    groups: dict[str, GroupMetadataValue | None] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0


class GroupMetadataManager:
    def __init__(
        self,
        config: GroupConfig,
        metadata: MetadataCache,
        admin_manager: AdminManager,
        replica_manager: ReplicaManager,
        clock_ms: Callable[[], int] = wall_clock_ms,
    ) -> None:
        self.config = config
        self.metadata = metadata
        self.admin_manager = admin_manager
        self.replica_manager = replica_manager
        self.clock_ms = clock_ms
        self.groups: dict[str, GroupMetadata] = {}
        self.loaded = False

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
        configs = {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.config.offsets_topic_segment_bytes),
        }
        self.admin_manager.create_topic(OFFSETS_TOPIC, self.config.offsets_topic_num_partitions, configs)

    # -- loading -------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild every group from the offsets topic (nothing to do if it does not exist)."""
        topic = self.metadata.get(OFFSETS_TOPIC)
        state = _LoadState()
        if topic is not None:
            for partition in range(topic.partitions):
                hosted = self.replica_manager.get_partition(OFFSETS_TOPIC, partition)
                if hosted is not None:
                    self._load_partition(hosted.log, state)
        for group_id, value in state.groups.items():
            if value is not None:
                self.groups[group_id] = GroupMetadata.from_record(group_id, value)
        for group_id, offsets in state.offsets.items():
            if not offsets:
                continue
            group = self.groups.get(group_id)
            if group is None:
                group = self.groups[group_id] = GroupMetadata(group_id)
            group.offsets.update(offsets)
        self.loaded = True
        if state.records:
            logger.info(
                "loaded %d groups from %d records of %s (%d unreadable skipped)",
                len(self.groups), state.records, OFFSETS_TOPIC, state.skipped,
            )

    def _load_partition(self, log: Log, state: _LoadState) -> None:
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            result = log.read(offset, LOAD_READ_BYTES, isolation=FetchIsolation.LOG_END)
            if result.region is None:
                break
            buf = result.region.read(log.fs)
            next_offset = offset
            for pos, header in iter_batches(buf):
                if header.magic >= 2:
                    next_offset = header.base_offset + header.last_offset_delta + 1
                    if header.is_control:
                        continue
                    records = [(r.key, r.value) for r in decode_batch(buf, pos).records]
                else:
                    next_offset = header.base_offset + 1
                    records = [(r.key, r.value) for r in decode_message(buf, pos)]
                for key, value in records:
                    state.records += 1
                    try:
                        _apply(state, key, value)
                    except ProtocolError as exc:
                        state.skipped += 1
                        logger.warning("skipping unreadable record in %s-%d: %s", OFFSETS_TOPIC, log.partition, exc)
            if next_offset <= offset:
                logger.error("cannot read %s-%d past offset %d; load stops there", OFFSETS_TOPIC, log.partition, offset)
                break
            offset = next_offset

    # -- appends -------------------------------------------------------------------------
    def store_group(self, group: GroupMetadata) -> ErrorCode:
        value = encode_group_metadata_value(group.to_record())
        return self._append(group.group_id, [(encode_group_metadata_key(group.group_id), value)])

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]) -> ErrorCode:
        """Append the commits as one batch, then apply them; the Kafka error otherwise."""
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
        error = self._append(group.group_id, records, commit=True)
        if error == ErrorCode.NONE:
            group.offsets.update(offsets)
        return error

    def delete_offsets(self, group: GroupMetadata, partitions: Iterable[TopicPartition]) -> ErrorCode:
        """Tombstones for the committed ones of ``partitions``; then they are gone."""
        present = [tp for tp in partitions if tp in group.offsets]
        if not present:
            return ErrorCode.NONE
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, topic, partition), None) for topic, partition in present
        ]
        error = self._append(group.group_id, records)
        if error == ErrorCode.NONE:
            for tp in present:
                del group.offsets[tp]
        return error

    def delete_group(self, group: GroupMetadata) -> ErrorCode:
        """Tombstones for the group's metadata and every offset; then it leaves the table."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_commit_key(group.group_id, topic, partition), None) for topic, partition in group.offsets
        ]
        records.append((encode_group_metadata_key(group.group_id), None))
        error = self._append(group.group_id, records)
        if error == ErrorCode.NONE:
            group.offsets.clear()
            if self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
        return error

    def _append(self, group_id: str, records: list[tuple[bytes, bytes | None]], *, commit: bool = False) -> ErrorCode:
        try:
            self.ensure_offsets_topic()
        except TopicError as exc:
            logger.error("cannot create %s: %s", OFFSETS_TOPIC, exc)
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        now = self.clock_ms()
        batch = build_record_batch((key, value, (), now) for key, value in records)
        partition = self.partition_for(group_id)
        try:
            self.replica_manager.append(OFFSETS_TOPIC, partition, batch)
        except StorageError as exc:
            error = _coordinator_error(exc.error_code, commit)
            logger.warning(
                "appending %d records of group %s to %s-%d failed (%s): answering %s",
                len(records), group_id, OFFSETS_TOPIC, partition, exc, error.name,
            )
            return error
        return ErrorCode.NONE


def _apply(state: _LoadState, key: memoryview | bytes | None, value: memoryview | bytes | None) -> None:
    if key is None:
        raise ProtocolError("record without a key")
    decoded = decode_key(key)
    if isinstance(decoded, OffsetCommitKey):
        offsets = state.offsets.setdefault(decoded.group, {})
        tp = (decoded.topic, decoded.partition)
        if value is None:
            offsets.pop(tp, None)
        else:
            v = decode_offset_commit_value(value)
            offsets[tp] = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)
    elif isinstance(decoded, GroupMetadataKey):
        state.groups[decoded.group] = None if value is None else decode_group_metadata_value(value)


def _coordinator_error(error: ErrorCode, commit: bool) -> ErrorCode:
    """Kafka's mapping of a failed offsets-topic append to what the group client sees."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE if commit else ErrorCode.UNKNOWN_SERVER_ERROR
    return error
