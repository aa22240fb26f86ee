"""AlterPartition's rules (strom.cluster.alter_partition): Kafka 3.9's ZooKeeper controller's
checks in its order, and the request/response forms of every version (names up to v1,
topic ids from v2, ISR with broker epochs from v3)."""

from __future__ import annotations

import uuid

import pytest

from strom.cluster.alter_partition import (
    IsrChange,
    check_isr_change,
    requested_changes,
    response,
)
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse

CURRENT = LeaderAndIsr(leader=1, leader_epoch=5, isr=(1, 2, 3), partition_epoch=7)
LIVE = frozenset({1, 2, 3})


def change(leader_epoch: int = 5, isr: tuple[int, ...] = (1, 2), recovery: int = 0, partition_epoch: int = 7) -> IsrChange:
    return IsrChange(leader_epoch, isr, recovery, partition_epoch)


@pytest.mark.parametrize(("sender", "version", "current", "proposed", "live", "expected"), [
    (1, 3, None, change(), LIVE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
    (1, 3, CURRENT, change(leader_epoch=6), LIVE, ErrorCode.NOT_CONTROLLER),  # the controller's view is older
    (1, 3, CURRENT, change(partition_epoch=8), LIVE, ErrorCode.NOT_CONTROLLER),
    (1, 3, CURRENT, change(leader_epoch=4), LIVE, ErrorCode.FENCED_LEADER_EPOCH),
    (2, 3, CURRENT, change(isr=(1, 2)), LIVE, ErrorCode.NOT_LEADER_OR_FOLLOWER),
    (1, 3, CURRENT, change(isr=(2, 3)), LIVE, ErrorCode.INVALID_REQUEST),  # an ISR without its leader
    (1, 3, CURRENT, change(isr=(1, 2, 3), partition_epoch=6), LIVE, CURRENT),  # already so: idempotent
    (1, 3, CURRENT, change(partition_epoch=6), LIVE, ErrorCode.INVALID_UPDATE_VERSION),
    (1, 3, CURRENT, change(recovery=1, isr=(1,)), LIVE, ErrorCode.INVALID_REQUEST),  # RECOVERED -> RECOVERING
    (1, 3, CURRENT, change(isr=(1, 2, 3)), frozenset({1, 2}), CURRENT),  # no change needs no live check
    (1, 3, CURRENT, change(isr=(1, 2, 3, 4)), LIVE, ErrorCode.INELIGIBLE_REPLICA),
    (1, 2, CURRENT, change(isr=(1, 4)), LIVE, ErrorCode.INELIGIBLE_REPLICA),
    (1, 1, CURRENT, change(isr=(1, 4)), LIVE, ErrorCode.OPERATION_NOT_ATTEMPTED),  # before KIP-841's error
    (1, 3, CURRENT, change(isr=(1, 2)), LIVE, LeaderAndIsr(1, 5, (1, 2), 7)),  # a shrink: same leader epoch
    (1, 0, CURRENT, change(isr=(1, 2, 3, 4)), LIVE | {4}, LeaderAndIsr(1, 5, (1, 2, 3, 4), 7)),
])
def test_check_isr_change(sender: int, version: int, current: LeaderAndIsr | None, proposed: IsrChange,
                          live: frozenset[int], expected: object) -> None:
    assert check_isr_change(sender, version, current, proposed, live) == expected


TOPIC_ID = uuid.UUID(int=42)
OTHER_ID = uuid.UUID(int=43)


def _request(version: int) -> AlterPartitionRequest:
    def partition(index: int) -> PartitionData:
        if version >= 3:
            return PartitionData(partition_index=index, leader_epoch=5, partition_epoch=7,
                                 new_isr_with_epochs=(BrokerState(1, 100), BrokerState(2, 200)))
        return PartitionData(partition_index=index, leader_epoch=5, partition_epoch=7, new_isr=(1, 2))
    topics = [TopicData(topic_name="t" if version <= 1 else "", topic_id=TOPIC_ID if version > 1 else uuid.UUID(int=0),
                        partitions=(partition(0), partition(1)))]
    if version > 1:
        topics.append(TopicData(topic_id=OTHER_ID, partitions=(partition(3),)))
    return AlterPartitionRequest(broker_id=1, broker_epoch=9, topics=tuple(topics))


@pytest.mark.parametrize("version", range(4))
def test_requests_and_responses_of_every_version(version: int) -> None:
    wire = AlterPartitionRequest.decode(version, _request(version).encode(version))
    changes, unknown = requested_changes(wire, version, {TOPIC_ID: "t"}.get)
    assert changes == {("t", 0): change(), ("t", 1): change()}
    assert unknown == ({OTHER_ID: (3,)} if version > 1 else {})
    answer = response(version, {("t", 0): LeaderAndIsr(1, 5, (1, 2), 8), ("t", 1): ErrorCode.FENCED_LEADER_EPOCH},
                      unknown, {"t": TOPIC_ID})
    decoded = AlterPartitionResponse.decode(version, answer.encode(version))
    named = decoded.topics[0]
    assert (named.topic_name, named.topic_id) == (("t", uuid.UUID(int=0)) if version <= 1 else ("", TOPIC_ID))
    ok, fenced = named.partitions
    assert (ok.partition_index, ok.error_code, ok.leader_id, ok.leader_epoch, ok.isr, ok.partition_epoch) == \
        (0, 0, 1, 5, (1, 2), 8)
    assert (fenced.partition_index, fenced.error_code) == (1, ErrorCode.FENCED_LEADER_EPOCH)
    if version > 1:
        (lost,) = decoded.topics[1].partitions
        assert (decoded.topics[1].topic_id, lost.partition_index, lost.error_code) == \
            (OTHER_ID, 3, ErrorCode.UNKNOWN_TOPIC_ID)
