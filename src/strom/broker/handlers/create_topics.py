"""CreateTopics (19): create on this node, or only validate (``validate_only``).

The configs given become the topic's overrides; deprecated ones Kafka 3.9 still accepts
(``message.format.version`` ...) are taken and ignored, with a warning once per topic and
value. v5+ answers with the new topic's every setting and its source, as DescribeConfigs
would describe it (dynamic broker layers included).

In cluster mode only the controller creates topics: any other broker answers every
entry NOT_CONTROLLER, as Kafka's ZooKeeper mode does (clients re-send to Metadata's
``controller_id``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from strom.broker.authorizer import CLUSTER_NAME, AclOperation, ResourceType, allowed, refused
from strom.broker.handlers.alter_configs import warn_deprecated
from strom.broker.handlers.describe_configs import topic_source, topic_synonyms
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = CreateTopicsRequest
VERSIONS = range(0, 8)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, CreateTopicsRequest)
    if not broker.is_controller():  # a cluster's broker that is not the controller: as Kafka's ZK mode
        return CreateTopicsResponse(topics=tuple(
            CreatableTopicResult(name=topic.name, error_code=ErrorCode.NOT_CONTROLLER) for topic in body.topics))
    counts = Counter(topic.name for topic in body.topics)
    results = []
    # ACLs: Create on the cluster, else on each topic; the new topic's configs only with DescribeConfigs.
    authorizer = broker.authorizer
    may_not_create = refused(
        None if authorizer is None or allowed(authorizer, AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
        else authorizer, AclOperation.CREATE, ResourceType.TOPIC, counts)
    configs_hidden = refused(authorizer, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, counts)
    for topic in body.topics:
        if counts[topic.name] > 1:
            # As Kafka: a name given twice is refused in each entry, and neither copy is created.
            results.append(_failed(topic.name, ErrorCode.INVALID_REQUEST, "topic named twice in one request"))
        elif topic.name in may_not_create:
            results.append(replace(_failed(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."),
                                   topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
                                   if topic.name in configs_hidden else ErrorCode.NONE))
        elif topic.name in configs_hidden:
            result = _create(broker, topic, body.validate_only)
            results.append(result if result.error_code else replace(
                result, num_partitions=-1, replication_factor=-1, configs=(),
                topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        else:
            results.append(_create(broker, topic, body.validate_only))
    if not body.validate_only and body.timeout_ms > 0:
        # As Kafka's ZooKeeper mode: answer once every new partition has a leader, or time out.
        created = {r.name: r.num_partitions for r in results if r.error_code == ErrorCode.NONE}
        late = await broker.admin_manager.wait_for_leaders(created, body.timeout_ms)
        results = [replace(r, error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=None) if r.name in late else r
                   for r in results]
    return CreateTopicsResponse(topics=tuple(results))


def _create(broker: Broker, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    if broker.cluster is not None:
        return _create_in_cluster(broker, topic, validate_only)
    node = broker.node_id
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _failed(topic.name, ErrorCode.INVALID_REQUEST, "assignments given with a partition count")
        if any(set(a.broker_ids) != {node} for a in topic.assignments):
            return _failed(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"only broker {node} exists")
        partitions = len(topic.assignments)
    else:
        partitions = broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        if topic.replication_factor not in (-1, 1):
            return _failed(
                topic.name,
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {topic.replication_factor} is larger than the 1 available broker",
            )
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        created = broker.admin_manager.create_topic(topic.name, partitions, configs, validate_only=validate_only)
    except TopicError as exc:
        return _failed(topic.name, exc.error_code, str(exc))
    warn_deprecated(topic.name, configs)
    return CreatableTopicResult(
        name=topic.name,
        topic_id=created.topic_id,
        error_code=0,
        error_message=None,
        num_partitions=created.partitions,
        replication_factor=1,
        configs=_configs(broker, configs),
    )


def _create_in_cluster(broker: Broker, topic: CreatableTopic, validate_only: bool) -> CreatableTopicResult:
    """A cluster: the factor or the manual assignment goes to ZooKeeper's AdminManager, which
    places the replicas on the live brokers (``strom.cluster.zk_admin_manager``)."""
    assignment: dict[int, tuple[int, ...]] | None = None
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return _failed(topic.name, ErrorCode.INVALID_REQUEST,
                           "Both numPartitions or replicationFactor and replicasAssignments were set. "
                           "Both cannot be used at the same time.")
        assignment = {a.partition_index: tuple(a.broker_ids) for a in topic.assignments}
        partitions = len(assignment)
        factor = len(next(iter(assignment.values())))
    else:
        partitions = broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions
        factor = (broker.config.default_replication_factor if topic.replication_factor == -1
                  else topic.replication_factor)
    configs = {c.name: c.value for c in topic.configs if c.value is not None}
    try:
        created = broker.admin_manager.create_topic(topic.name, partitions, configs, validate_only=validate_only,
                                                    replication_factor=factor, assignment=assignment)
    except TopicError as exc:
        return _failed(topic.name, exc.error_code, str(exc))
    warn_deprecated(topic.name, configs)
    return CreatableTopicResult(name=topic.name, topic_id=created.topic_id, error_code=0, error_message=None,
                                num_partitions=created.partitions, replication_factor=factor,
                                configs=_configs(broker, configs))


def _configs(broker: Broker, overrides: dict[str, str]) -> tuple[CreatableTopicConfigs, ...]:
    """KIP-525 (v5+): the new topic's every setting and where its value comes from."""
    effective = broker.log_manager.default_config.with_overrides(overrides).to_properties()
    return tuple(
        CreatableTopicConfigs(
            name=name, value=value, read_only=False,
            config_source=topic_source(topic_synonyms(broker, name, value, overrides)),
            is_sensitive=False,
        )
        for name, value in sorted(effective.items())
    )


def _failed(name: str, error: ErrorCode, message: str) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=error, error_message=message)
