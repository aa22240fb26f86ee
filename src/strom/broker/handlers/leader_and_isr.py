"""LeaderAndIsr (4): the controller tells this broker which partitions it leads or follows.

Cluster mode only (``handlers.CLUSTER_SERVED``). Kafka's ``handleLeaderAndIsrRequest``:
a request made for an earlier registration of this broker (broker epoch, v2+) is
refused whole with STALE_BROKER_EPOCH; otherwise ``ReplicaManager.become_leader_or_follower``
checks the controller epoch and each partition's leader epoch and applies the rest.
v0-1 list partitions with their topic names, v2+ group them by topic, v5+ add topic
ids and answer by topic id.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING
from uuid import UUID

from strom.broker.authorizer import cluster_action_allowed
from strom.broker.metadata_cache import ZERO_TOPIC_ID
from strom.broker.replica_manager import LeaderAndIsrPartition
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from strom.protocol.messages.leader_and_isr_response import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrResponse,
    LeaderAndIsrTopicError,
)
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = LeaderAndIsrRequest
VERSIONS = range(0, 8)

GROUPED_FROM = 2  # TopicStates instead of UngroupedPartitionStates
BY_TOPIC_ID_FROM = 5  # topic ids in the request, the answer grouped by topic id


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, LeaderAndIsrRequest)
    if not cluster_action_allowed(broker):  # ACLs: the controller's requests need ClusterAction on the cluster
        return LeaderAndIsrResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    version = request.api_version
    states = list(_partitions(body, version))
    if broker.is_broker_epoch_stale(body.broker_epoch):
        error = ErrorCode.STALE_BROKER_EPOCH
        errors = {(s.topic, s.index): error for s in states}
    else:
        if broker.cluster is not None:  # a topic's first partition here: its config first
            await broker.cluster.fetch_topic_configs({s.topic for s in states})
        error, errors = broker.replica_manager.become_leader_or_follower(body.controller_epoch, states)
    topic_ids = {t.topic_name: t.topic_id for t in body.topic_states} if version >= BY_TOPIC_ID_FROM else {}
    return _response(error, errors, topic_ids, version)


def _partitions(body: LeaderAndIsrRequest, version: int) -> Iterator[LeaderAndIsrPartition]:
    if version < GROUPED_FROM:
        for state in body.ungrouped_partition_states:
            yield _partition(state.topic_name, None, state)
        return
    for topic in body.topic_states:
        topic_id = topic.topic_id if version >= BY_TOPIC_ID_FROM and topic.topic_id != ZERO_TOPIC_ID else None
        for state in topic.partition_states:
            yield _partition(topic.topic_name, topic_id, state)


def _partition(topic: str, topic_id: UUID | None, state: LeaderAndIsrPartitionState) -> LeaderAndIsrPartition:
    return LeaderAndIsrPartition(
        topic=topic, index=state.partition_index, leader=state.leader, leader_epoch=state.leader_epoch,
        isr=tuple(state.isr), replicas=tuple(state.replicas), partition_epoch=state.partition_epoch,
        topic_id=topic_id, is_new=state.is_new,
    )


def _response(error: ErrorCode, errors: Mapping[TopicPartition, ErrorCode], topic_ids: Mapping[str, UUID],
              version: int) -> LeaderAndIsrResponse:
    if version < BY_TOPIC_ID_FROM:
        return LeaderAndIsrResponse(error_code=error, partition_errors=tuple(
            LeaderAndIsrPartitionError(topic, index, code) for (topic, index), code in errors.items()))
    by_topic: dict[str, list[LeaderAndIsrPartitionError]] = {}
    for (topic, index), code in errors.items():
        by_topic.setdefault(topic, []).append(LeaderAndIsrPartitionError(partition_index=index, error_code=code))
    return LeaderAndIsrResponse(error_code=error, topics=tuple(
        LeaderAndIsrTopicError(topic_ids.get(topic, ZERO_TOPIC_ID), tuple(partitions))
        for topic, partitions in by_topic.items()))
