"""CreatePartitions (37): grow topics on this node, or only validate (``validate_only``).

Kafka's checks, in its order: a topic named twice is INVALID_REQUEST (answered once), an unknown one
UNKNOWN_TOPIC_OR_PARTITION, a count that adds nothing INVALID_PARTITIONS; explicit
assignments must name one replica list per new partition, each exactly this node
(the only broker, and replication factor 1), else INVALID_REPLICA_ASSIGNMENT.

The answer lists the topics named once first, in the request's order, then each name given
more than once, as Kafka 3.9 does (its handler appends the duplicates' errors to the
admin manager's results; the differential suite compares it).

In cluster mode only the controller grows topics: any other broker answers each topic
NOT_CONTROLLER, as Kafka's ZooKeeper mode does.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from strom.broker.authorizer import AclOperation, ResourceType, allowed
from strom.broker.metadata_cache import TopicError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = CreatePartitionsRequest
VERSIONS = range(0, 4)


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, CreatePartitionsRequest)
    if not broker.is_controller():  # a cluster's broker that is not the controller: as Kafka's ZK mode
        return CreatePartitionsResponse(results=tuple(  # one per name: Kafka answers from a map
            _result(name, ErrorCode.NOT_CONTROLLER, None) for name in dict.fromkeys(t.name for t in body.topics)))
    named = Counter(topic.name for topic in body.topics)
    results = [_grow(broker, topic, body.validate_only) for topic in body.topics if named[topic.name] == 1]
    # One answer per name given twice or more (Counter keeps the order first named), in Kafka's words.
    results += [_result(name, ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                for name, times in named.items() if times > 1]
    if not body.validate_only and body.timeout_ms > 0:
        # As Kafka's ZooKeeper mode: answer once every new partition has a leader, or time out.
        counts = {t.name: t.count for t in body.topics if named[t.name] == 1}
        grown = {r.name: counts[r.name] for r in results if r.error_code == ErrorCode.NONE}
        late = await broker.admin_manager.wait_for_leaders(grown, body.timeout_ms)
        results = [_result(r.name, ErrorCode.REQUEST_TIMED_OUT, None) if r.name in late else r for r in results]
    return CreatePartitionsResponse(results=tuple(results))


def _grow(broker: Broker, topic: CreatePartitionsTopic, validate_only: bool) -> CreatePartitionsTopicResult:
    if (authorizer := broker.authorizer) is not None and not allowed(authorizer, AclOperation.ALTER,
                                                                     ResourceType.TOPIC, topic.name):
        return _result(topic.name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed.")
    if broker.cluster is not None:  # ZooKeeper's AdminManager places (or checks) the new replicas
        assignment = None if topic.assignments is None else [tuple(a.broker_ids) for a in topic.assignments]
        try:
            broker.admin_manager.create_partitions(topic.name, topic.count, validate_only=validate_only,
                                                   assignment=assignment)
        except TopicError as exc:
            return _result(topic.name, exc.error_code, str(exc))
        return _result(topic.name, ErrorCode.NONE, None)
    try:
        current = broker.metadata.get(topic.name)
        broker.admin_manager.create_partitions(topic.name, topic.count, validate_only=True)
        assert current is not None  # create_partitions refused an unknown topic
        problem = _check_assignments(broker.node_id, topic, topic.count - current.partitions)
        if problem is not None:
            return _result(topic.name, ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        if not validate_only:
            broker.admin_manager.create_partitions(topic.name, topic.count)
    except TopicError as exc:
        return _result(topic.name, exc.error_code, str(exc))
    return _result(topic.name, ErrorCode.NONE, None)


def _check_assignments(node: int, topic: CreatePartitionsTopic, added: int) -> str | None:
    if topic.assignments is None:
        return None
    if len(topic.assignments) != added:
        return f"adding {added} partitions but {len(topic.assignments)} assignments given"
    if any(tuple(a.broker_ids) != (node,) for a in topic.assignments):
        return f"each assignment must be [{node}]: the only broker, replication factor 1"
    return None


def _result(name: str, error: ErrorCode, message: str | None) -> CreatePartitionsTopicResult:
    return CreatePartitionsTopicResult(name=name, error_code=error, error_message=message)
