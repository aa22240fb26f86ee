"""Decoded responses turned into plain data with what legitimately differs between two
brokers replaced by placeholders, so Strom's and Kafka's answers compare with ``==`` and a
difference shows as pytest's field-by-field diff.

What legitimately differs: each broker's own node id (Kafka 3.9 is broker 0, Strom node 1),
its ports, the cluster id and topic ids (random per cluster/topic, but their presence must
match), throttle time, the wording of error messages (whether there is one must match),
the order of a topic's partitions and of a group's members in a list, and the producer and fetch session ids each
allocates (whether there is one must match).
"""

from __future__ import annotations

import dataclasses
from typing import Any
from uuid import UUID

from strom.protocol.message import Message

ZERO_UUID = UUID(int=0)
_NODE_FIELDS = frozenset({"node_id", "leader_id", "controller_id", "replica_nodes", "isr_nodes", "offline_replicas"})


def normalise(message: Message, own_node_id: int, members: dict[str, str] | None = None) -> dict[str, Any]:
    """``message`` as nested dicts and lists, ``own_node_id`` shown as ``"self"``; with
    ``members``, each member id as its label there (a new one labelled ``<member N>``)."""
    _MEMBERS[0] = members
    try:
        plain = _plain(message, own_node_id)
    finally:
        _MEMBERS[0] = None
    assert isinstance(plain, dict)
    return plain


# Member ids are random per broker (client id + UUID): shown as labels in the order each
# broker handed them out. A module-level slot keeps _plain's signature simple.
_MEMBERS: list[dict[str, str] | None] = [None]
_MEMBER_FIELDS = frozenset({"member_id", "leader"})


def _member(value: str) -> str:
    labels = _MEMBERS[0]
    if labels is None or not value:
        return value
    return labels.setdefault(value, f"<member {len(labels) + 1}>")


def _plain(value: Any, own_node_id: int) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            item.name: _field(item.name, getattr(value, item.name), own_node_id)
            for item in dataclasses.fields(value)
            if item.name not in ("unknown_tagged_fields", "throttle_time_ms")
        }
    if isinstance(value, tuple | list):
        items = [_plain(item, own_node_id) for item in value]
        if items and all(isinstance(item, dict) and "partition_index" in item for item in items):
            # Kafka lists a topic's partitions in its maps' hash order (0, 2, 3, 1 after a
            # CreatePartitions); no client reads meaning into the order.
            items.sort(key=lambda item: item["partition_index"])
        elif items and all(isinstance(item, dict) and "member_id" in item for item in items):
            # A JoinGroup leader's member list and DescribeGroups' members: Kafka's group
            # keeps its members in a hash map, so their order is arbitrary.
            items.sort(key=lambda item: str(item["member_id"]))
        return items
    return value


def _field(name: str, value: Any, own_node_id: int) -> Any:
    if name in _NODE_FIELDS:
        if isinstance(value, tuple):
            return [_node(node, own_node_id) for node in value]
        return _node(value, own_node_id)
    if name in _MEMBER_FIELDS and isinstance(value, str):
        return _member(value)
    if name == "port":
        return "<port>"
    if name == "cluster_id":
        return None if value is None else "<cluster id>"
    if name == "topic_id":
        return "<zero>" if value == ZERO_UUID else "<topic id>"
    if name == "producer_id":
        return value if value < 0 else "<producer id>"
    if name == "session_id":  # 0: no session
        return value if value == 0 else "<session id>"
    if name == "error_message":
        return None if value is None else "<message>"
    return _plain(value, own_node_id)


def _node(node_id: int, own_node_id: int) -> int | str:
    return "self" if node_id == own_node_id else node_id


def own_node_id(brokers: tuple[Any, ...]) -> int:
    """The node id of the only broker a single-node cluster lists."""
    assert len(brokers) == 1, f"expected one broker, got {brokers}"
    node_id: int = brokers[0].node_id
    return node_id
