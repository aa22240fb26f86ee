"""FindCoordinator (10): the broker that coordinates a group; transactions are not built.

v0-v3 ask for one key, v4+ for a batch (``coordinator_keys``). On one node this broker
coordinates every group, and the first group lookup creates ``__consumer_offsets`` if
it does not exist yet. In cluster mode (Kafka's ZooKeeper-mode
``handleFindCoordinatorRequest``) the coordinator is the leader of the group's offsets
partition, read from the metadata cache: no leader, or a leader not alive, is
COORDINATOR_NOT_AVAILABLE (clients retry); a missing offsets topic is created (ZooKeeper
writes through the cluster's AdminManager, refused while fewer brokers are alive than
``offsets.topic.replication.factor``) and answered COORDINATOR_NOT_AVAILABLE until the
controller has elected its leaders. The coordinator's endpoint is on the listener the
client connected through; a leader without it is COORDINATOR_NOT_AVAILABLE, as in Kafka. Key type 1 (transaction) is answered
COORDINATOR_NOT_AVAILABLE, and any other type (2 = share group, v6) INVALID_REQUEST,
each with a log line.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.log_throttle import LogThrottle
from strom.broker.metadata_cache import TopicError
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
    if key_type == TRANSACTION:
        logger.info("FindCoordinator for transactional id %r: transactions are not supported", key)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, "transactions are not supported")
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


def _find_in_cluster(broker: Broker, key: str) -> Coordinator:
    """The leader of the group's offsets partition, as the controller last described it."""
    metadata = broker.metadata
    if metadata.get(OFFSETS_TOPIC) is None:
        create_offsets_topic(broker)
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
    partition = broker.group_coordinator.manager.partition_for(key)
    state = metadata.partition_state(OFFSETS_TOPIC, partition)
    leader = None if state is None or state.leader < 0 else metadata.live_broker(state.leader)
    endpoint = None if leader is None else leader.endpoint(broker.request_listener())  # Kafka: the client's listener
    if leader is None or endpoint is None:
        return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC}-{partition} has no live leader")
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
