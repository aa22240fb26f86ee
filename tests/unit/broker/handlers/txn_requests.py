"""Transaction requests (InitProducerId, TxnOffsetCommit, WriteTxnMarkers, OffsetFetch with
RequireStable, ListOffsets read_committed) for the transaction handlers' test modules."""

from __future__ import annotations

from collections.abc import Sequence

from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from strom.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopic,
    OffsetFetchRequestTopics,
)
from strom.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from strom.protocol.messages.write_txn_markers_request import (
    WritableTxnMarker,
    WritableTxnMarkerTopic,
    WriteTxnMarkersRequest,
)
from strom.protocol.records.v2_builder import build_record_batch
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness, produce_request

GROUP_PARTITION: TopicPartition = (OFFSETS_TOPIC, 0)  # the test broker has one offsets partition
# These tests write a transaction's markers themselves (WriteTxnMarkers, as an admin's
# abortTransaction) for producer ids no transaction coordinator knows, so the coordinator's
# KIP-890 check of TxnOffsetCommit (tests/client/test_transaction_verification.py) is off.
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


async def producer_id(h: BrokerHarness) -> tuple[int, int]:
    """A fresh (producer id, epoch) from InitProducerId without a transactional id."""
    response = await h.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), version=4)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def txn_commit(h: BrokerHarness, group: str, producer: tuple[int, int], offsets: dict[TopicPartition, int], *,
                     version: int = 3, generation: int = -1, member: str = "",
                     instance: str | None = None) -> dict[TopicPartition, int]:
    """TxnOffsetCommit; the error per partition."""
    by_topic: dict[str, list[TxnOffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(TxnOffsetCommitRequestPartition(partition, offset, 0, "txn"))
    request = TxnOffsetCommitRequest(
        transactional_id="txn-1", group_id=group, producer_id=producer[0], producer_epoch=producer[1],
        generation_id=generation, member_id=member, group_instance_id=instance,
        topics=tuple(TxnOffsetCommitRequestTopic(topic, tuple(parts)) for topic, parts in by_topic.items()),
    )
    response = await h.request(request, version=version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def marker(producer: tuple[int, int], committed: bool, partitions: Sequence[TopicPartition],
           coordinator_epoch: int = 0) -> WritableTxnMarker:
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    return WritableTxnMarker(producer[0], producer[1], committed,
                             tuple(WritableTxnMarkerTopic(t, tuple(i)) for t, i in by_topic.items()), coordinator_epoch)


async def write_markers(h: BrokerHarness, *markers: WritableTxnMarker, version: int = 1
                        ) -> list[tuple[int, str, int, int]]:
    """WriteTxnMarkers; (producer id, topic, partition, error) in the answer's order."""
    response = await h.request(WriteTxnMarkersRequest(markers=markers), version=version)
    return [(m.producer_id, t.name, p.partition_index, p.error_code)
            for m in response.markers for t in m.topics for p in t.partitions]


async def end_txn(h: BrokerHarness, producer: tuple[int, int], committed: bool, partitions: Sequence[TopicPartition],
                  coordinator_epoch: int = 0) -> None:
    answers = await write_markers(h, marker(producer, committed, partitions, coordinator_epoch))
    assert [error for *_, error in answers] == [ErrorCode.NONE] * len(partitions)


async def fetch_offsets(h: BrokerHarness, group: str, tp: TopicPartition, *, require_stable: bool,
                        version: int = 7) -> tuple[int, int]:
    """OffsetFetch of one partition: (committed offset, partition error)."""
    topic, index = tp
    if version >= 8:
        request = OffsetFetchRequest(groups=(OffsetFetchRequestGroup(group, topics=(
            OffsetFetchRequestTopics(topic, (index,)),)),), require_stable=require_stable)
        response = await h.request(request, version=version)
        ((part,),) = [t.partitions for g in response.groups for t in g.topics]
    else:
        request = OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic(topic, (index,)),),
                                     require_stable=require_stable)
        response = await h.request(request, version=version)
        ((part,),) = [t.partitions for t in response.topics]
    return part.committed_offset, part.error_code


async def produce_transactional(h: BrokerHarness, tp: TopicPartition, producer: tuple[int, int], sequence: int,
                                values: Sequence[bytes]) -> int:
    """A transactional batch of the producer through Produce (v9, acks=-1); its base offset."""
    records = build_record_batch(((None, v, (), None) for v in values), producer_id=producer[0],
                                 producer_epoch=producer[1], base_sequence=sequence, is_transactional=True)
    response = await h.request(produce_request(tp[0], tp[1], bytes(records)), version=9)
    (part,) = response.responses[0].partition_responses
    assert part.error_code == ErrorCode.NONE
    base_offset: int = part.base_offset
    return base_offset


async def latest_offset(h: BrokerHarness, tp: TopicPartition, *, read_committed: bool) -> int:
    """ListOffsets (v7) latest: the high watermark, or the last stable offset for read_committed."""
    request = ListOffsetsRequest(replica_id=-1, isolation_level=int(read_committed), topics=(
        ListOffsetsTopic(tp[0], (ListOffsetsPartition(tp[1], timestamp=-1),)),))
    response = await h.request(request, version=7)
    ((found,),) = [t.partitions for t in response.topics]
    assert found.error_code == ErrorCode.NONE
    offset: int = found.offset
    return offset
