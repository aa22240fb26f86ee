"""Requests that carry records, for the differential tests: batches with fixed timestamps
(so both brokers store the same bytes), Produce and Fetch requests for one partition."""

from __future__ import annotations

from collections.abc import Sequence

from strom.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.records.v2_builder import build_record_batch

BASE_TIMESTAMP = 1_700_000_000_000  # every record's time is fixed: the stored bytes match


def batch(
    count: int = 3, *, keyed: bool = True, value_size: int = 10, first: int = 0, timestamp: int = BASE_TIMESTAMP,
    producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
) -> bytes:
    """``count`` records; record i has key ``k<first+i>`` (or none), a value of
    ``value_size`` bytes and the timestamp ``timestamp + i``."""
    records = [((b"k%d" % (first + i)) if keyed else None, bytes([65 + (first + i) % 26]) * value_size, (),
                timestamp + i) for i in range(count)]
    return bytes(build_record_batch(records, producer_id=producer_id, producer_epoch=producer_epoch,
                                    base_sequence=base_sequence))


def produce(topic: str, records: bytes, partition: int = 0, acks: int = -1) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=30000, topic_data=(TopicProduceData(
        name=topic, partition_data=(PartitionProduceData(index=partition, records=records),)),))


def fetch(
    topic: str, offset: int, partition: int = 0, *, max_bytes: int = 1 << 20, partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0, session_id: int = 0, session_epoch: int = -1, min_bytes: int = 1,
    partitions: Sequence[int] | None = None,
) -> FetchRequest:
    """A consumer's Fetch (names, so v4-v12) that does not wait: ``max_wait_ms`` is short."""
    wanted = [partition] if partitions is None else list(partitions)
    return FetchRequest(
        replica_id=-1, max_wait_ms=10, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation_level,
        session_id=session_id, session_epoch=session_epoch,
        topics=(FetchTopic(topic=topic, partitions=tuple(
            FetchPartition(partition=index, fetch_offset=offset, partition_max_bytes=partition_max_bytes,
                           log_start_offset=-1, current_leader_epoch=-1)
            for index in wanted)),) if wanted else (),
        forgotten_topics_data=(), rack_id="")


def list_offsets(topic: str, timestamp: int, partition: int = 0, isolation_level: int = 0) -> ListOffsetsRequest:
    return ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level, topics=(ListOffsetsTopic(
        name=topic, partitions=(ListOffsetsPartition(partition_index=partition, timestamp=timestamp,
                                                     current_leader_epoch=-1),)),))
