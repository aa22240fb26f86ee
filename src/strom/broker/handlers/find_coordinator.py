"""FindCoordinator (10): the broker that coordinates a group or a transactional id.

v0-v3 ask for one key, v4+ for a batch (``coordinator_keys``). On one node this broker
coordinates every group, and the first group lookup creates ``__consumer_offsets`` if
it does not exist yet. In cluster mode (Kafka's ZooKeeper-mode
``handleFindCoordinatorRequest``) the coordinator is the leader of the group's offsets
partition, read from the metadata cache: no leader, or a leader not alive, is
COORDINATOR_NOT_AVAILABLE (clients retry); a missing offsets topic is created (ZooKeeper
writes through the cluster's AdminManager, refused while fewer brokers are alive than
``offsets.topic.replication.factor``) and answered COORDINATOR_NOT_AVAILABLE until the
controller has elected its leaders. The coordinator's endpoint is on the listener the
client connected through; a leader without it is COORDINATOR_NOT_AVAILABLE, as in Kafka.
Key type 1 (a transactional id) is answered the same way with ``__transaction_state``
(``transaction.state.log.*`` settings): this node on one node, the leader of the id's
partition in a cluster. Any other type (2 = share group, v6) is INVALID_REQUEST, with a
log line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.log_throttle import LogThrottle
from strom.broker.metadata_cache import TopicError
from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.message import Message
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import Coordinator, FindCoordinatorResponse

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

logger = logging.getLogger(__name__)
_throttled = LogThrottle(logger)  # clients retry FindCoordinator every few ms while a cluster starts

REQUEST = FindCoordinatorRequest
VERSIONS = range(0, 7)
GROUP, TRANSACTION = 0, 1


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, FindCoordinatorRequest)
    if request.api_version >= 4:
        return FindCoordinatorResponse(coordinators=tuple(_find(broker, key, body.key_type) for key in body.coordinator_keys))
    found = _find(broker, body.key, body.key_type)
    return FindCoordinatorResponse(
        error_code=found.error_code,
        # Kafka 3.9 says "NONE" (Errors.NONE.message()) here, and "" in a v4+ coordinator.
        error_message="NONE" if found.error_code == 0 else found.error_message,
        node_id=found.node_id,
        host=found.host,
        port=found.port,
    )


def _find(broker: Broker, key: str, key_type: int) -> Coordinator:
    if (authorizer := broker.authorizer) is not None and key_type in (GROUP, TRANSACTION):  # Describe on the key
        resource_type, refusal = ((ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED) if key_type == GROUP
                                  else (ResourceType.TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        if not allowed(authorizer, AclOperation.DESCRIBE, resource_type, key):
            return _error(key, refusal, refusal.message)
    if key_type == TRANSACTION:
        return _find_transaction_coordinator(broker, key)
    if key_type != GROUP:
        logger.info("FindCoordinator with key type %d for %r: not supported", key_type, key)
        return _error(key, ErrorCode.INVALID_REQUEST, f"unsupported key type {key_type}")
    if broker.config.cluster_mode:
        return _find_in_cluster(broker, key)
    try:
        broker.group_coordinator.ensure_offsets_topic()
    except TopicError as exc:
        logger.error("cannot create the offsets topic: %s", exc)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
    endpoint = broker.request_endpoint()
    return Coordinator(key=key, node_id=broker.node_id, host=endpoint.host, port=endpoint.port, error_code=0, error_message="")


def _find_transaction_coordinator(broker: Broker, key: str) -> Coordinator:
    """The leader of the id's ``__transaction_state`` partition; the topic is created on
    first use, as the offsets topic is."""
    manager = broker.transaction_coordinator.state_manager
    if broker.config.cluster_mode:
        if broker.metadata.get(TRANSACTION_STATE_TOPIC) is None:
            create_transaction_state_topic(broker)
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{TRANSACTION_STATE_TOPIC} is being created")
        return _leader_of(broker, key, TRANSACTION_STATE_TOPIC, manager.partition_for(key))
    try:
        manager.ensure_topic()
    except TopicError as exc:
        logger.error("cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc))
    endpoint = broker.request_endpoint()
    return Coordinator(key=key, node_id=broker.node_id, host=endpoint.host, port=endpoint.port, error_code=0, error_message="")


def _find_in_cluster(broker: Broker, key: str) -> Coordinator:
    """The leader of the group's offsets partition, as the controller last described it."""
    metadata = broker.metadata
    if metadata.get(OFFSETS_TOPIC) is None:
        create_offsets_topic(broker)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
    return _leader_of(broker, key, OFFSETS_TOPIC, broker.group_coordinator.manager.partition_for(key))


def _leader_of(broker: Broker, key: str, topic: str, partition: int) -> Coordinator:
    state = broker.metadata.partition_state(topic, partition)
    leader = None if state is None or state.leader < 0 else broker.metadata.live_broker(state.leader)
    endpoint = None if leader is None else leader.endpoint(broker.request_listener())  # Kafka: the client's listener
    if leader is None or endpoint is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{topic}-{partition} has no live leader")
    return Coordinator(key=key, node_id=leader.id, host=endpoint.host, port=endpoint.port, error_code=0, error_message="")


def create_offsets_topic(broker: Broker) -> None:
    """Kafka's internal-topic creation: not while fewer brokers live than its replication factor."""
    config = broker.group_coordinator.config
    alive = len(broker.metadata.live_brokers())
    if alive < config.offsets_topic_replication_factor:
        _throttled.log(logging.ERROR,
            "Number of alive brokers '%d' does not meet the required replication factor '%d' for the offsets "
            "topic (configured via 'offsets.topic.replication.factor'). This error can be ignored if the cluster "
            "is starting up and not all brokers are up yet.", alive, config.offsets_topic_replication_factor,
        )
        return
    manager = broker.group_coordinator.manager
    try:
        broker.admin_manager.create_topic(
            OFFSETS_TOPIC, config.offsets_topic_num_partitions, manager.offsets_topic_configs(),
            replication_factor=config.offsets_topic_replication_factor,
        )
    except KafkaException as exc:  # refused (TopicError), or ZooKeeper unreachable
        if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:  # another broker's lookup was first
            _throttled.log(logging.ERROR, "cannot create %s: %s", OFFSETS_TOPIC, exc)


def _error(key: str, error: ErrorCode, message: str) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message)


def create_transaction_state_topic(broker: Broker) -> None:
    """As ``create_offsets_topic``, for ``__transaction_state`` and its own settings."""
    config = broker.transaction_coordinator.config
    alive = len(broker.metadata.live_brokers())
    if alive < config.replication_factor:
        _throttled.log(logging.ERROR,
            "Number of alive brokers '%d' does not meet the required replication factor '%d' for the transactions "
            "state topic (configured via 'transaction.state.log.replication.factor'). This error can be ignored if "
            "the cluster is starting up and not all brokers are up yet.", alive, config.replication_factor,
        )
        return
    manager = broker.transaction_coordinator.state_manager
    try:
        broker.admin_manager.create_topic(TRANSACTION_STATE_TOPIC, config.num_partitions, manager.topic_configs(),
                                          replication_factor=config.replication_factor)
    except KafkaException as exc:
        if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
            _throttled.log(logging.ERROR, "cannot create %s: %s", TRANSACTION_STATE_TOPIC, exc)
