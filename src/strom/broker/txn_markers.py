"""Transaction markers on the partitions this broker leads (Kafka's
``KafkaApis.handleWriteTxnMarkersRequest``, the partition leader's side of EndTxn).

For each (producer, partition) of a marker, one COMMIT or ABORT control batch (the
producer's id and epoch, the coordinator's epoch; 78 bytes, one record) is appended as
the partition's leader with acks=-1 and answered once the in-sync replicas have it:
only then may the coordinator write CompleteCommit/CompleteAbort, and only then may
the group coordinator show the transaction's offsets. The log's producer state closes
the producer's open transaction there (the last stable offset moves) and refuses a
marker of an older producer epoch (INVALID_PRODUCER_EPOCH) or of an older coordinator
epoch than the last marker's (TRANSACTION_COORDINATOR_FENCED).

Two callers: the WriteTxnMarkers handler (markers from the transaction coordinator of
another broker, or an admin's KIP-664 abort of a hanging transaction) and this broker's
own transaction coordinator for the partitions it leads, without a round trip.

Errors are per (producer id, partition) and Kafka's: UNKNOWN_TOPIC_OR_PARTITION,
NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
KAFKA_STORAGE_ERROR (the coordinator retries these), INVALID_PRODUCER_EPOCH and
TRANSACTION_COORDINATOR_FENCED (it gives the transaction up).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import build_end_txn_marker
from strom.protocol.topic_partition import TopicPartition
from strom.storage.errors import KafkaStorageError, StorageError

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.broker.partition import Partition

logger = logging.getLogger(__name__)

# Kafka appends markers with ``request.timeout.ms`` (default 30 s) as the acks=-1 wait.
MARKER_REPLICATION_TIMEOUT_MS: Final = 30_000


@dataclass(frozen=True, slots=True)
class TxnMarker:
    """One producer's transaction end, to be written on each of ``partitions``."""

    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    partitions: tuple[TopicPartition, ...]


MarkerResults = dict[tuple[int, TopicPartition], ErrorCode]


async def write_txn_markers(broker: Broker, markers: Sequence[TxnMarker]) -> MarkerResults:
    """Append every marker on its partitions, wait for the ISR, then let the group
    coordinator apply or drop the transactions' offsets on ``__consumer_offsets``
    partitions where the marker landed. One error per (producer id, partition)."""
    results: MarkerResults = {}
    replicating: list[tuple[Partition, int, int]] = []  # (partition, last offset, producer id)
    now = time.time_ns() // 1_000_000
    for marker in markers:
        for tp in marker.partitions:
            appended = _append_marker(broker, marker, tp, now)
            if isinstance(appended, ErrorCode):
                results[(marker.producer_id, tp)] = appended
                continue
            results[(marker.producer_id, tp)] = ErrorCode.NONE
            partition, last_offset = appended
            if partition.followers and partition.high_watermark <= last_offset:
                replicating.append((partition, last_offset, marker.producer_id))
    if replicating:
        waited = await broker.replica_manager.wait_for_replication(
            [(partition, last_offset) for partition, last_offset, _ in replicating],
            MARKER_REPLICATION_TIMEOUT_MS / 1000)
        for partition, _, producer_id in replicating:
            error = waited[partition.topic_partition]
            if error:
                results[(producer_id, partition.topic_partition)] = error
    for marker in markers:
        landed = [index for topic, index in marker.partitions
                  if topic == OFFSETS_TOPIC and results[(marker.producer_id, (topic, index))] == ErrorCode.NONE]
        if landed:
            broker.group_coordinator.on_transaction_completed(marker.producer_id, landed, marker.committed)
    return results


def _append_marker(broker: Broker, marker: TxnMarker, tp: TopicPartition, now_ms: int
                   ) -> tuple[Partition, int] | ErrorCode:
    """The marker on one partition: the partition and the marker's offset, or the error."""
    topic, index = tp
    replica_manager = broker.replica_manager
    kind = "COMMIT" if marker.committed else "ABORT"
    try:
        partition = replica_manager.partition_or_error(topic, index)
        batch = build_end_txn_marker(marker.producer_id, marker.producer_epoch, marker.committed,
                                     marker.coordinator_epoch, now_ms)
        result = partition.append_as_leader(batch, -1, from_client=False)
    except KafkaStorageError as exc:
        replica_manager.log_dir_failed(f"writing a transaction marker to {topic}-{index}", exc)
        return exc.error_code
    except StorageError as exc:
        logger.info("%s marker of producer %d (epoch %d, coordinator epoch %d) on %s-%d refused: %s",
                    kind, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch, topic, index, exc)
        return exc.error_code
    replica_manager.appended(partition)
    return partition, result.last_offset
