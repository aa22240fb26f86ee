"""Metadata (3): the brokers, and every requested topic with each partition's leader, epoch and ISR.

Unknown topics are created when ``auto.create.topics.enable`` is on and the request
allows it (v4+), as Kafka does (the internal ``__consumer_offsets`` and
``__transaction_state`` with their own settings, as its AutoTopicCreationManager); a
single node creates them at once, so the reply already carries the new topic rather
than LEADER_NOT_AVAILABLE. Authorized operations (v8+), when asked for, come from
``authorizer``.

In cluster mode the answer comes only from the ``MetadataCache`` (the controller's
UpdateMetadata), as Kafka's ZK-mode ``ZkMetadataCache.getTopicMetadata``: the live
brokers, the controller's id, each partition's leader (a leader that is not alive,
or -1, is LEADER_NOT_AVAILABLE with leader -1), replicas, ISR and offline replicas;
v0 lists only live replicas and says REPLICA_NOT_AVAILABLE when it leaves one out.
Endpoints are those of the listener the client connected through (Kafka's
``request.context.listenerName``): a broker without it is left out, and a leader without
it is LISTENER_NOT_FOUND (v6+). An
auto-created topic is LEADER_NOT_AVAILABLE until the controller has told the brokers.
A cluster's answer is asked for far more often than it changes and, for a topic of
1,000 partitions, costs ~6 ms to build and encode: each topic's encoded bytes (per
version and authorized-operations value) are kept by the MetadataCache until an
UpdateMetadata touches the topic or the live brokers, and spliced into the encoded
brokers and controller (``strom.protocol.encoded``), byte for byte what the generated
encoder would write for the whole answer.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from strom.broker.authorizer import (
    CLUSTER_NAME,
    AclOperation,
    ResourceType,
    allowed,
    authorized_operations,
    cluster_operations,
)
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.metadata_cache import (
    INTERNAL_TOPICS,
    TopicError,
    TopicMetadata,
    validate_topic_name,
)
from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strom.protocol.encoded import ArraySlot, encoded_type
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request
    from strom.protocol.messages.metadata_request import MetadataRequestTopic
    from strom.security.acl.authorizer import AclAuthorizer

logger = logging.getLogger(__name__)

REQUEST = MetadataRequest
VERSIONS = range(0, 13)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, MetadataRequest)
    if broker.config.cluster_mode:
        return _cluster_metadata(broker, body, request.api_version)
    authorizer = broker.authorizer
    refusals: list[MetadataResponseTopic] = []
    if body.topics is None or (request.api_version == 0 and not body.topics):
        topics = [_describe(broker, topic) for topic in broker.metadata.topics()
                  if authorizer is None or allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)]
    else:
        wanted, refusals = (body.topics, []) if authorizer is None else _screen(broker, authorizer, body)
        topics = [_lookup(broker, t.name, t.topic_id, body.allow_auto_topic_creation) for t in wanted]
    if body.include_topic_authorized_operations:  # v8+; Kafka fills it in errors too
        topics = [replace(t, topic_authorized_operations=authorized_operations(ResourceType.TOPIC, t.name or "",
                                                                               authorizer=authorizer))
                  for t in topics]
    endpoint = broker.request_endpoint()
    return MetadataResponse(
        brokers=(MetadataResponseBroker(broker.node_id, endpoint.host, endpoint.port, None),),
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        topics=(*refusals, *topics),
        cluster_authorized_operations=cluster_operations(  # v8 to v10
            authorizer, requested=body.include_cluster_authorized_operations),
    )


def _screen(broker: Broker, authorizer: AclAuthorizer, body: MetadataRequest
            ) -> tuple[list[MetadataRequestTopic], list[MetadataResponseTopic]]:
    """The topics asked for that the principal may see, and the answers for the rest (Kafka's
    ``handleTopicMetadataRequest``): without Describe, TOPIC_AUTHORIZATION_FAILED whether the
    topic exists or not (its existence is not disclosed; by id, the id is given back); a topic
    that would be auto-created without Create on the cluster or the topic, the same."""
    wanted: list[MetadataRequestTopic] = []
    refusals: list[MetadataResponseTopic] = []
    creating = body.allow_auto_topic_creation and broker.config.auto_create_topics_enable
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    for topic in body.topics or ():
        name = topic.name
        if name is None:  # v10+: by id; an unknown id is answered UNKNOWN_TOPIC_ID by the lookup
            found = broker.metadata.by_id(topic.topic_id)
            if found is not None and not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, found.name):
                refusals.append(MetadataResponseTopic(error_code=refused, name=None, topic_id=topic.topic_id))
                continue
        elif not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            refusals.append(MetadataResponseTopic(error_code=refused, name=name))
            continue
        elif creating and broker.metadata.get(name) is None and not (
                allowed(authorizer, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                or allowed(authorizer, AclOperation.CREATE, ResourceType.TOPIC, name)):
            refusals.append(MetadataResponseTopic(error_code=refused, name=name, is_internal=name in INTERNAL_TOPICS))
            continue
        wanted.append(topic)
    return wanted, refusals


def _lookup(broker: Broker, name: str | None, topic_id: object, allow_create: bool) -> MetadataResponseTopic:
    if name is None:  # v10+: by topic id
        found = broker.metadata.by_id(topic_id)  # type: ignore[arg-type]
        if found is None:
            return MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id)  # type: ignore[arg-type]
        return _describe(broker, found)
    topic = broker.metadata.get(name)
    if topic is not None:
        return _describe(broker, topic)
    try:
        validate_topic_name(name)
    except TopicError as exc:
        return MetadataResponseTopic(error_code=exc.error_code, name=name)
    if not (allow_create and broker.config.auto_create_topics_enable):
        return MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name)
    try:
        if name == OFFSETS_TOPIC:  # with its own settings, as Kafka's AutoTopicCreationManager
            broker.group_coordinator.ensure_offsets_topic()
            topic = broker.metadata.get(name)
            assert topic is not None
        elif name == TRANSACTION_STATE_TOPIC:  # likewise, with transaction.state.log.* settings
            broker.transaction_coordinator.state_manager.ensure_topic()
            topic = broker.metadata.get(name)
            assert topic is not None
        else:
            topic = broker.admin_manager.create_topic(name, broker.config.num_partitions)
    except TopicError as exc:
        logger.warning("auto-creating topic %s failed: %s", name, exc)
        return MetadataResponseTopic(error_code=exc.error_code, name=name)
    return _describe(broker, topic)


def _describe(broker: Broker, topic: TopicMetadata) -> MetadataResponseTopic:
    hosted = broker.replica_manager.partitions
    partitions = []
    for index in range(topic.partitions):
        partition = hosted.get((topic.name, index))
        if partition is None:  # known to the cache but not (yet) hosted: no leader
            partitions.append(MetadataResponsePartition(
                error_code=ErrorCode.LEADER_NOT_AVAILABLE, partition_index=index, leader_id=-1))
            continue
        partitions.append(MetadataResponsePartition(
            error_code=0,
            partition_index=index,
            leader_id=partition.leader_id,
            leader_epoch=partition.leader_epoch,
            replica_nodes=partition.replicas,
            isr_nodes=tuple(sorted(partition.isr)),
            offline_replicas=(),
        ))
    return MetadataResponseTopic(
        error_code=0,
        name=topic.name,
        topic_id=topic.topic_id,
        is_internal=topic.is_internal,
        partitions=tuple(partitions),
    )


# -- cluster mode: the controller's view ----------------------------------------------
def _cluster_metadata(broker: Broker, body: MetadataRequest, version: int) -> Message:
    """The answer, spliced from each topic's encoded bytes (remembered by the MetadataCache
    until the topic or the live brokers change) into the encoded brokers and controller."""
    cache = broker.metadata
    authorizer = broker.authorizer
    refusals: list[MetadataResponseTopic] = []
    if body.topics is None or (version == 0 and not body.topics):
        found: list[TopicMetadata | MetadataResponseTopic] = [
            topic for topic in cache.topics()
            if authorizer is None or allowed(authorizer, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name)]
    else:
        wanted, refusals = (body.topics, []) if authorizer is None else _screen(broker, authorizer, body)
        found = [_cluster_lookup(broker, t.name, t.topic_id, body.allow_auto_topic_creation) for t in wanted]
    asked = body.include_topic_authorized_operations
    listener = broker.request_listener()
    topics = [encode_topic(refusal, version) for refusal in refusals]
    topics += [_encoded_topic(broker, topic, version, asked, listener) for topic in found]
    brokers = []
    for live in cache.live_brokers():
        endpoint = live.endpoint(listener)  # a broker without the client's listener is left out, as Kafka
        if endpoint is not None:
            brokers.append(MetadataResponseBroker(live.id, endpoint.host, endpoint.port, live.rack))
    without_topics = MetadataResponse(
        brokers=tuple(brokers),
        cluster_id=broker.cluster_id,
        controller_id=cache.controller_id,
        cluster_authorized_operations=cluster_operations(
            authorizer, requested=body.include_cluster_authorized_operations),
    )
    return _ENCODED_RESPONSE(version, _topics_slot(without_topics, version).splice(topics))


_ENCODED_RESPONSE = encoded_type(MetadataResponse)


def _topics_slot(response: MetadataResponse, version: int) -> ArraySlot:
    """Where the topics go in ``response`` (encoded with none): after them come the cluster's
    authorized operations (v8 to v10) and the tagged fields (flexible versions, v9+)."""
    tail = (4 if 8 <= version <= 10 else 0) + (1 if version >= 9 else 0)
    return ArraySlot.locate(response.encode(version), tail, compact=version >= 9)


def _encoded_topic(broker: Broker, topic: TopicMetadata | MetadataResponseTopic, version: int, asked: bool,
                   listener: str) -> bytes:
    """One topic as the generated encoder writes it in ``version`` for a client of ``listener``; a
    known topic's bytes are remembered by the cache (an error is cheap and not kept)."""
    name = topic.name or ""
    operations = (authorized_operations(ResourceType.TOPIC, name, authorizer=broker.authorizer) if asked
                  else MetadataResponseTopic().topic_authorized_operations)
    if isinstance(topic, MetadataResponseTopic):
        return encode_topic(replace(topic, topic_authorized_operations=operations), version)
    key = (version, operations, listener)
    encoded = broker.metadata.topic_answer(name, key)
    if encoded is None:
        described = _cluster_describe(broker, topic, listener, version)
        encoded = encode_topic(replace(described, topic_authorized_operations=operations), version)
        broker.metadata.remember_topic_answer(name, key, encoded)
    return encoded


def encode_topic(topic: MetadataResponseTopic, version: int) -> bytes:
    """``topic``'s bytes in a Metadata answer of ``version`` (the generated encoder's, taken out)."""
    empty = MetadataResponse()
    return _topics_slot(empty, version).element(replace(empty, topics=(topic,)).encode(version))


def _cluster_lookup(broker: Broker, name: str | None, topic_id: object,
                    allow_create: bool) -> TopicMetadata | MetadataResponseTopic:
    """The topic asked for, or the answer for one the cache does not know (an error)."""
    cache = broker.metadata
    if name is None:  # v10+: by topic id
        found = cache.by_id(topic_id)  # type: ignore[arg-type]
        if found is None:
            return MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=topic_id)  # type: ignore[arg-type]
        return found
    topic = cache.get(name)
    if topic is not None:
        return topic
    internal = name in INTERNAL_TOPICS
    try:
        validate_topic_name(name)
    except TopicError as exc:
        return MetadataResponseTopic(error_code=exc.error_code, name=name, is_internal=internal)
    if not (allow_create and broker.config.auto_create_topics_enable):
        return MetadataResponseTopic(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, is_internal=internal)
    if name == OFFSETS_TOPIC:  # its own partitions, RF and configs, once enough brokers live (Kafka)
        from strom.broker.handlers.find_coordinator import create_offsets_topic

        create_offsets_topic(broker)
        return MetadataResponseTopic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, is_internal=internal)
    if name == TRANSACTION_STATE_TOPIC:
        from strom.broker.handlers.find_coordinator import create_transaction_state_topic

        create_transaction_state_topic(broker)
        return MetadataResponseTopic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, is_internal=internal)
    try:
        broker.admin_manager.create_topic(name, broker.config.num_partitions)
    except TopicError as exc:
        if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            logger.warning("auto-creating topic %s failed: %s", name, exc)
            return MetadataResponseTopic(error_code=exc.error_code, name=name, is_internal=internal)
    # Created (or being created): no leader until the controller's UpdateMetadata, as Kafka answers.
    return MetadataResponseTopic(error_code=ErrorCode.LEADER_NOT_AVAILABLE, name=name, is_internal=internal)


def _cluster_describe(broker: Broker, topic: TopicMetadata, listener: str, version: int) -> MetadataResponseTopic:
    """Kafka 3.9's ``ZkMetadataCache.getPartitionMetadata`` for a client of ``listener``: a leader
    that is not alive is LEADER_NOT_AVAILABLE; one alive without that listener LISTENER_NOT_FOUND
    (v6+; LEADER_NOT_AVAILABLE before); v0 lists only replicas reachable on the listener
    (``errorUnavailableEndpoints``) and says REPLICA_NOT_AVAILABLE when it leaves one out."""
    cache = broker.metadata
    live_only = version == 0

    def reachable(broker_id: int) -> bool:
        live = cache.live_broker(broker_id)
        return live is not None and live.endpoint(listener) is not None

    partitions = []
    for index in range(topic.partitions):
        state = cache.partition_state(topic.name, index)
        if state is None:  # a gap in what the controller sent: nothing known of it
            continue
        replicas, isr = state.replicas, state.isr
        if live_only:
            replicas = tuple(r for r in replicas if reachable(r))
            isr = tuple(r for r in isr if reachable(r))
        leader = cache.live_broker(state.leader)
        if leader is None:
            error, leader_id = ErrorCode.LEADER_NOT_AVAILABLE, -1
        elif leader.endpoint(listener) is None:
            error = ErrorCode.LISTENER_NOT_FOUND if version >= 6 else ErrorCode.LEADER_NOT_AVAILABLE
            leader_id = -1
        elif len(replicas) < len(state.replicas) or len(isr) < len(state.isr):
            error, leader_id = ErrorCode.REPLICA_NOT_AVAILABLE, state.leader
        else:
            error, leader_id = ErrorCode.NONE, state.leader
        partitions.append(MetadataResponsePartition(
            error_code=error, partition_index=index, leader_id=leader_id, leader_epoch=state.leader_epoch,
            replica_nodes=replicas, isr_nodes=isr, offline_replicas=state.offline_replicas,
        ))
    return MetadataResponseTopic(
        error_code=0, name=topic.name, topic_id=topic.topic_id, is_internal=topic.is_internal,
        partitions=tuple(partitions),
    )
