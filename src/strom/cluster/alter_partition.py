"""AlterPartition (56) as the ZooKeeper-mode controller judges it: pure rules, no I/O.

A partition leader asks the controller to change its ISR (KIP-497: the controller is the
only writer of ``/brokers/topics/<t>/partitions/<p>/state``). ``check_isr_change`` is
Kafka 3.9's ``KafkaController.tryProcessAlterPartition`` for one partition, in its order:

1. no known state: UNKNOWN_TOPIC_OR_PARTITION;
2. a leader or partition epoch *above* the controller's: NOT_CONTROLLER (this controller's
   view is older than the sender's, so another controller must have written since: the
   sender should find it);
3. a leader epoch below: FENCED_LEADER_EPOCH (leadership moved since the leader decided);
4. a sender that is not the leader: NOT_LEADER_OR_FOLLOWER (Kafka's ZooKeeper controller
   would write the sender in as leader; KRaft refuses, and so does Strom), and an ISR
   without the leader: INVALID_REQUEST;
5. the state asked for is already there (partition epoch aside): that state, unwritten,
   so a retried request whose answer was lost is idempotent;
6. a partition epoch below: INVALID_UPDATE_VERSION (the leader decided on an old ISR);
7. ``leader_recovery_state`` RECOVERING asked for: INVALID_REQUEST (Strom never writes
   RECOVERING, so this would be Kafka's RECOVERED -> RECOVERING refusal);
8. a new ISR naming a broker that is not live (gone or shutting down, KIP-841):
   INELIGIBLE_REPLICA from version 2, OPERATION_NOT_ATTEMPTED before;
9. otherwise the state to write: same leader and leader epoch (an ISR change is not a
   leadership change), the proposed ISR, conditional on the current partition epoch.

``requested_changes`` and ``response`` translate the wire form (topic names up to v1,
topic ids from v2, ``new_isr_with_epochs`` from v3) to and from these rules.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass

from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_partition_request import AlterPartitionRequest
from strom.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from strom.protocol.primitives import ZERO_UUID
from strom.protocol.topic_partition import TopicPartition

RECOVERED = 0  # Kafka's LeaderRecoveryState.RECOVERED; RECOVERING is 1


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition of an AlterPartition request, as its leader proposed it."""

    leader_epoch: int
    new_isr: tuple[int, ...]
    leader_recovery_state: int
    partition_epoch: int


Outcome = LeaderAndIsr | ErrorCode


def check_isr_change(sender: int, version: int, current: LeaderAndIsr | None, change: IsrChange,
                     live_broker_ids: Set[int]) -> Outcome:
    """The partition's error, or the state it should have (``== current``: nothing to write)."""
    if current is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if change.partition_epoch > current.partition_epoch or change.leader_epoch > current.leader_epoch:
        return ErrorCode.NOT_CONTROLLER
    if change.leader_epoch < current.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    if sender != current.leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    if sender not in change.new_isr:
        return ErrorCode.INVALID_REQUEST
    if change.new_isr == current.isr and change.leader_recovery_state == RECOVERED:
        return current
    if change.partition_epoch < current.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION
    if change.leader_recovery_state != RECOVERED:
        return ErrorCode.INVALID_REQUEST
    if not set(change.new_isr) <= live_broker_ids:
        return ErrorCode.INELIGIBLE_REPLICA if version > 1 else ErrorCode.OPERATION_NOT_ATTEMPTED
    return LeaderAndIsr(current.leader, current.leader_epoch, change.new_isr, current.partition_epoch)


def requested_changes(request: AlterPartitionRequest, version: int,
                      topic_name: Callable[[uuid.UUID], str | None]
                      ) -> tuple[dict[TopicPartition, IsrChange], dict[uuid.UUID, tuple[int, ...]]]:
    """(the changes by partition, the partitions of topic ids this controller does not know)."""
    changes: dict[TopicPartition, IsrChange] = {}
    unknown: dict[uuid.UUID, tuple[int, ...]] = {}
    for topic in request.topics:
        name = topic_name(topic.topic_id) if version > 1 else topic.topic_name
        if name is None:
            unknown[topic.topic_id] = unknown.get(topic.topic_id, ()) + tuple(
                p.partition_index for p in topic.partitions)
            continue
        for p in topic.partitions:
            isr = tuple(b.broker_id for b in p.new_isr_with_epochs) if version >= 3 else tuple(p.new_isr)
            changes[(name, p.partition_index)] = IsrChange(p.leader_epoch, isr, p.leader_recovery_state,
                                                           p.partition_epoch)
    return changes, unknown


def response(version: int, outcomes: Mapping[TopicPartition, Outcome], unknown: Mapping[uuid.UUID, tuple[int, ...]],
             topic_ids: Mapping[str, uuid.UUID]) -> AlterPartitionResponse:
    """The answer: each partition's error, or its state as now written."""
    by_topic: dict[str, list[PartitionData]] = {}
    for (topic, partition), outcome in sorted(outcomes.items()):
        if isinstance(outcome, ErrorCode):
            data = PartitionData(partition_index=partition, error_code=outcome)
        else:
            data = PartitionData(partition_index=partition, leader_id=outcome.leader,
                                 leader_epoch=outcome.leader_epoch, isr=outcome.isr,
                                 leader_recovery_state=RECOVERED, partition_epoch=outcome.partition_epoch)
        by_topic.setdefault(topic, []).append(data)
    topics = [TopicData(topic_name=topic if version <= 1 else "",
                        topic_id=topic_ids.get(topic, ZERO_UUID) if version > 1 else ZERO_UUID,
                        partitions=tuple(partitions))
              for topic, partitions in by_topic.items()]
    topics += [TopicData(topic_id=topic_id, partitions=tuple(
        PartitionData(partition_index=p, error_code=ErrorCode.UNKNOWN_TOPIC_ID) for p in partitions))
        for topic_id, partitions in unknown.items()]
    return AlterPartitionResponse(topics=tuple(topics))
