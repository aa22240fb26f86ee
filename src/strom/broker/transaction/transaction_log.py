"""The records of ``__transaction_state``: Kafka's key and value formats, and an id's partition.

Every record has a key and, unless it is a tombstone, a value. Both start with an int16
schema version; the rest is Kafka's classic (non-flexible) encoding for version 0:
int16-length UTF-8 strings, int32 array counts (-1 = null), big-endian ints. Version 1
of the value is flexible (compact lengths, tagged fields): read here so a log written by
a newer Kafka still loads, never written (Kafka writes v0 until ``transaction.version``
>= 1 is finalized, which Strom does not advertise).

Key (``TransactionLogKey`` v0)::

    transactional_id: string

Value (``TransactionLogValue`` v0)::

    producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
    transaction_status int8 (the TransactionState ids 0-7),
    transaction_partitions nullable [topic string, partition_ids [int32]]  (null when Empty),
    transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64

A null value (tombstone) is an expired transactional id: it leaves the cache. Invariants:
the log is applied in offset order and the last record for a key wins (the topic is
compacted); keys of versions other than 0 are skipped, not errors.

An id's records all go to partition ``abs(javaStringHashCode(id)) % partitions`` (Kafka's
``TransactionStateManager.partitionFor``, the same function as a group's).
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from strom.broker.group.offsets_topic import partition_for as _partition_for
from strom.protocol import primitives as p
from strom.protocol.errors import ProtocolError
from strom.protocol.topic_partition import TopicPartition

TRANSACTION_STATE_TOPIC: Final = "__transaction_state"
KEY_VERSION: Final = 0
VALUE_VERSION: Final = 0

_KEY_HEAD = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status
_TIMESTAMPS = struct.Struct(">qq")
_INT32 = struct.Struct(">i")


class TransactionState(enum.IntEnum):
    """Kafka's ``TransactionState`` with its on-disk ids (``TransactionStatus`` int8)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """Kafka's state name (``CompleteCommit``), as DescribeTransactions shows it."""
        return "".join(word.capitalize() for word in self.name.split("_"))


@dataclass(frozen=True, slots=True)
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    last_update_timestamp_ms: int
    start_timestamp_ms: int


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions``."""
    return _partition_for(transactional_id, partitions)


def topic_configs(segment_bytes: int, min_insync_replicas: int | None) -> dict[str, str]:
    """The topic's enforced configs (Kafka's ``transactionTopicConfigs``): compacted,
    uncompressed, no unclean election; ``min.insync.replicas`` left to the default where
    it is None (one node, whose only replica could never make 2)."""
    configs = {
        "cleanup.policy": "compact",
        "compression.type": "uncompressed",
        "unclean.leader.election.enable": "false",
        "segment.bytes": str(segment_bytes),
    }
    if min_insync_replicas is not None:
        configs["min.insync.replicas"] = str(min_insync_replicas)
    return configs


# --- writing ----------------------------------------------------------------------------


def encode_key(transactional_id: str) -> bytes:
    out = bytearray(_KEY_HEAD.pack(KEY_VERSION))
    p.write_string(out, transactional_id)
    return bytes(out)


def encode_value(value: TransactionLogValue) -> bytes:
    """Version 0; the partitions are null when Empty, as Kafka's ``valueToBytes`` writes them."""
    if value.state == TransactionState.EMPTY and value.partitions:
        raise ValueError("an Empty transaction has no partitions")
    out = bytearray(_VALUE_HEAD.pack(VALUE_VERSION, value.producer_id, value.producer_epoch,
                                     value.transaction_timeout_ms, int(value.state)))
    if value.state == TransactionState.EMPTY:
        out += _INT32.pack(-1)
    else:
        by_topic = _by_topic(value.partitions)
        out += _INT32.pack(len(by_topic))
        for topic, indexes in by_topic:
            p.write_string(out, topic)
            out += _INT32.pack(len(indexes))
            for index in indexes:
                out += _INT32.pack(index)
    out += _TIMESTAMPS.pack(value.last_update_timestamp_ms, value.start_timestamp_ms)
    return bytes(out)


def _by_topic(partitions: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        grouped.setdefault(topic, []).append(index)
    return list(grouped.items())


# --- reading ----------------------------------------------------------------------------


def decode_key(buf: p.Buffer) -> str | None:
    """The transactional id, or None for a key version this code does not know."""
    try:
        (version,) = _KEY_HEAD.unpack_from(buf, 0)
        if version != KEY_VERSION:
            return None
        transactional_id, end = p.read_string(buf, 2)
    except (IndexError, ValueError, struct.error) as exc:
        raise ProtocolError(f"transaction log key: {exc}") from None
    if end != len(buf):
        raise ProtocolError(f"transaction log key: {len(buf) - end} trailing bytes")
    return transactional_id


def decode_value(buf: p.Buffer) -> TransactionLogValue:
    """A v0 or v1 value; raises ``ProtocolError`` on anything else or a malformed one."""
    try:
        version, producer_id, epoch, timeout, status = _VALUE_HEAD.unpack_from(buf, 0)
        if version not in (0, 1):
            raise ProtocolError(f"transaction log value: unknown version {version}")
        flexible = version == 1
        pos = _VALUE_HEAD.size
        partitions: set[TopicPartition] = set()
        count, pos = _count(buf, pos, flexible)
        for _ in range(max(count, 0)):
            topic, pos = (p.read_compact_string if flexible else p.read_string)(buf, pos)
            indexes, pos = _count(buf, pos, flexible)
            for _ in range(max(indexes, 0)):
                (index,) = _INT32.unpack_from(buf, pos)
                pos += 4
                partitions.add((topic, index))
            if flexible:
                pos = _skip_tags(buf, pos)
        last_update, start = _TIMESTAMPS.unpack_from(buf, pos)
        state = TransactionState(status)
    except (IndexError, ValueError, struct.error) as exc:
        raise ProtocolError(f"transaction log value: {exc}") from None
    return TransactionLogValue(producer_id, epoch, timeout, state, frozenset(partitions), last_update, start)


def _count(buf: p.Buffer, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        count, pos = p.read_uvarint(buf, pos)
        count -= 1
    else:
        (count,) = _INT32.unpack_from(buf, pos)
        pos += 4
    if count > len(buf) - pos:
        raise ProtocolError(f"transaction log value: impossible array count {count}")
    return count, pos


def _skip_tags(buf: p.Buffer, pos: int) -> int:
    tags, pos = p.read_uvarint(buf, pos)
    for _ in range(tags):
        _, pos = p.read_uvarint(buf, pos)
        size, pos = p.read_uvarint(buf, pos)
        pos += size
    return pos
