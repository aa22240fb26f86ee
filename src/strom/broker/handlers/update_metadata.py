"""UpdateMetadata (6): the controller's view of the cluster, which Metadata answers from.

Cluster mode only (``handlers.CLUSTER_SERVED``). Kafka's ``handleUpdateMetadataRequest``:
a request for an earlier registration of this broker (broker epoch, v5+) is refused
with STALE_BROKER_EPOCH; one from a controller older than the newest seen with
STALE_CONTROLLER_EPOCH; otherwise the live brokers, the controller id and the
partition states it carries replace or merge into the ``MetadataCache``.
v0 gives each broker one PLAINTEXT host and port; v1-2 endpoints without a listener
name (named after their security protocol, as Kafka does); v3+ listener names;
v4+ offline replicas; v5+ partitions grouped by topic; v7+ topic ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING
from uuid import UUID

from strom.broker.authorizer import cluster_action_allowed
from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache, PartitionState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.update_metadata_request import (
    UpdateMetadataBroker,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from strom.protocol.messages.update_metadata_response import UpdateMetadataResponse
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = UpdateMetadataRequest
VERSIONS = range(0, 9)

ENDPOINTS_FROM = 1
GROUPED_FROM = 5
TOPIC_IDS_FROM = 7
# The wire's security protocol ids (Kafka's SecurityProtocol), naming a listener before v3.
SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, UpdateMetadataRequest)
    if not cluster_action_allowed(broker):  # ACLs: the controller's requests need ClusterAction on the cluster
        return UpdateMetadataResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    if broker.is_broker_epoch_stale(body.broker_epoch):
        return UpdateMetadataResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
    version = request.api_version
    live_brokers = [_live_broker(b, version) for b in body.live_brokers]
    states = list(_partition_states(body, version))
    topic_ids: dict[str, UUID] = {}
    if version >= TOPIC_IDS_FROM:
        topic_ids = {t.topic_name: t.topic_id for t in body.topic_states}

    def update(cache: MetadataCache) -> list[TopicPartition]:
        return cache.update_metadata(body.controller_id, live_brokers, states, topic_ids)

    error, _deleted = broker.replica_manager.maybe_update_metadata_cache(body.controller_epoch, update)
    return UpdateMetadataResponse(error_code=error)


def _live_broker(broker: UpdateMetadataBroker, version: int) -> LiveBroker:
    if version < ENDPOINTS_FROM:
        return LiveBroker(broker.id, (BrokerEndpoint(broker.v0_host, broker.v0_port),), None)
    endpoints = tuple(
        BrokerEndpoint(e.host, e.port, e.listener or SECURITY_PROTOCOLS.get(e.security_protocol, "PLAINTEXT"),
                       e.security_protocol)
        for e in broker.endpoints
    )
    return LiveBroker(broker.id, endpoints, broker.rack or None)


def _partition_states(body: UpdateMetadataRequest, version: int) -> Iterator[tuple[TopicPartition, PartitionState]]:
    if version < GROUPED_FROM:
        for state in body.ungrouped_partition_states:
            yield (state.topic_name, state.partition_index), _state(state)
        return
    for topic in body.topic_states:
        for state in topic.partition_states:
            yield (topic.topic_name, state.partition_index), _state(state)


def _state(state: UpdateMetadataPartitionState) -> PartitionState:
    return PartitionState(
        leader=state.leader, leader_epoch=state.leader_epoch, isr=tuple(state.isr), replicas=tuple(state.replicas),
        offline_replicas=tuple(state.offline_replicas), partition_epoch=state.zk_version,
        controller_epoch=state.controller_epoch,
    )
