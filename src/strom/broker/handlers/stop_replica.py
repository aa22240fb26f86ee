"""StopReplica (5): the controller tells this broker to stop hosting partitions, or delete them.

Cluster mode only (``handlers.CLUSTER_SERVED``). Kafka's ``handleStopReplicaRequest``:
a request for an earlier registration of this broker (broker epoch, v1+) is refused
with STALE_BROKER_EPOCH and no partition errors; otherwise
``ReplicaManager.stop_replicas`` checks the controller epoch and each partition's
leader epoch (v3+) and stops (or deletes) the rest. v0 lists partitions, v1-2 group
them by topic with one DeletePartitions flag for all, v3+ carry a leader epoch and
the flag per partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from strom.broker.authorizer import cluster_action_allowed
from strom.broker.replica_manager import StopReplicaPartition
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.stop_replica_request import StopReplicaRequest
from strom.protocol.messages.stop_replica_response import (
    StopReplicaPartitionError,
    StopReplicaResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = StopReplicaRequest
VERSIONS = range(0, 5)

TOPICS_FROM = 1  # partitions grouped by topic
STATES_FROM = 3  # per-partition leader epoch and delete flag


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, StopReplicaRequest)
    if not cluster_action_allowed(broker):  # ACLs: the controller's requests need ClusterAction on the cluster
        return StopReplicaResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if broker.is_broker_epoch_stale(body.broker_epoch):
        return StopReplicaResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    # One state per partition, the last named winning, as Kafka's partitionStates map.
    states = {(s.topic, s.index): s for s in _partitions(body, request.api_version)}
    error, errors = broker.replica_manager.stop_replicas(body.controller_epoch, list(states.values()))
    return StopReplicaResponse(error_code=error, partition_errors=tuple(
        StopReplicaPartitionError(topic, index, code) for (topic, index), code in errors.items()))


def _partitions(body: StopReplicaRequest, version: int) -> Iterator[StopReplicaPartition]:
    if version < TOPICS_FROM:
        for partition in body.ungrouped_partitions:
            yield StopReplicaPartition(partition.topic_name, partition.partition_index, delete=body.delete_partitions)
    elif version < STATES_FROM:
        for topic in body.topics:
            for index in topic.partition_indexes:
                yield StopReplicaPartition(topic.name, index, delete=body.delete_partitions)
    else:
        for topic_state in body.topic_states:
            for state in topic_state.partition_states:
                yield StopReplicaPartition(topic_state.topic_name, state.partition_index, state.leader_epoch,
                                           state.delete_partition)
