"""Building Fetch requests and reading their answers, for the Fetch handler's test modules."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from strom.protocol.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
    ReplicaState,
)

REPLICA_STATE_FROM = 15  # Fetch v15 moved replica_id into replica_state (KIP-903)
MiB = 1 << 20


def fetch(
    partitions: Sequence[tuple[str, int, int]],
    *,
    version: int = 12,
    topic_ids: dict[str, uuid.UUID] | None = None,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
    max_bytes: int = MiB,
    partition_max_bytes: int = MiB,
    current_leader_epoch: int = -1,
    session_id: int = 0,
    session_epoch: int = -1,
    forgotten: Sequence[tuple[str, int]] = (),
    replica_id: int = -1,
) -> FetchRequest:
    """A Fetch of ``(topic, partition, offset)``s; by topic id from v13 (``topic_ids``)."""
    by_topic: dict[str, list[FetchPartition]] = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            partition_max_bytes=partition_max_bytes,
        ))
    ids = topic_ids or {}
    forgotten_by_topic: dict[str, list[int]] = {}
    for topic, partition in forgotten:
        forgotten_by_topic.setdefault(topic, []).append(partition)
    replica = (
        {"replica_state": ReplicaState(replica_id=replica_id)} if version >= REPLICA_STATE_FROM
        else {"replica_id": replica_id}
    )
    return FetchRequest(
        **replica,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=tuple(
            FetchTopic(topic=topic, topic_id=ids.get(topic, uuid.UUID(int=0)), partitions=tuple(parts))
            for topic, parts in by_topic.items()
        ),
        forgotten_topics_data=tuple(
            ForgottenTopic(topic=topic, topic_id=ids.get(topic, uuid.UUID(int=0)), partitions=tuple(parts))
            for topic, parts in forgotten_by_topic.items()
        ),
    )


def partitions_of(response: Any) -> dict[tuple[str | uuid.UUID, int], Any]:
    """Answered partitions by (topic name, or topic id from v13, partition)."""
    return {
        (topic.topic or topic.topic_id, partition.partition_index): partition
        for topic in response.responses
        for partition in topic.partitions
    }
