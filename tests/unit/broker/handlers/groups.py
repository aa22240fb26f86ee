"""Classic-group requests (JoinGroup, SyncGroup, OffsetCommit, OffsetFetch) for the group handlers' test modules."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from strom.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from strom.protocol.messages.offset_commit_request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest, OffsetFetchRequestTopic
from strom.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.broker_harness import BrokerHarness

SESSION_MS = 10_000  # within Kafka's default [6 s, 30 min]
REBALANCE_MS = 5_000
PROTOCOLS = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))


def subscription(*topics: str) -> bytes:
    """A consumer's protocol metadata: version 0 of ConsumerProtocolSubscription, version-prefixed."""
    body = ConsumerProtocolSubscription(topics=topics).encode_into(0, bytearray())
    return struct.pack(">h", 0) + b"".join(bytes(chunk) for chunk in body)  # type: ignore[arg-type]


async def join(
    h: BrokerHarness,
    group: str,
    member_id: str = "",
    *,
    version: int = 9,
    instance: str | None = None,
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    protocol_type: str = "consumer",
    protocols: Sequence[tuple[str, bytes]] = PROTOCOLS,
) -> Any:
    request = JoinGroupRequest(
        group_id=group,
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms if version >= 1 else -1,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=tuple(JoinGroupRequestProtocol(name, metadata) for name, metadata in protocols),
    )
    return await h.request(request, version=version)


async def join_new(h: BrokerHarness, group: str, **kwargs: Any) -> Any:
    """A new member's join: from v4 the first answer is MEMBER_ID_REQUIRED with the id to rejoin with."""
    first = await join(h, group, **kwargs)
    if first.error_code != ErrorCode.MEMBER_ID_REQUIRED:
        return first
    assert first.member_id
    return await join(h, group, first.member_id, **kwargs)


async def sync(
    h: BrokerHarness,
    group: str,
    generation: int,
    member_id: str,
    assignments: dict[str, bytes] | None = None,
    *,
    version: int = 5,
    instance: str | None = None,
    protocol_type: str | None = "consumer",
    protocol_name: str | None = "range",
) -> Any:
    request = SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type if version >= 5 else None,
        protocol_name=protocol_name if version >= 5 else None,
        assignments=tuple(SyncGroupRequestAssignment(m, a) for m, a in (assignments or {}).items()),
    )
    return await h.request(request, version=version)


async def stable_member(h: BrokerHarness, group: str, *, instance: str | None = None) -> tuple[str, int]:
    """A lone member that joined and synced (it leads): its id and the group's generation."""
    joined = await join_new(h, group, instance=instance)
    assert joined.error_code == ErrorCode.NONE
    assert joined.leader == joined.member_id
    synced = await sync(h, group, joined.generation_id, joined.member_id, {joined.member_id: b"assigned"},
                        instance=instance)
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"assigned")
    return joined.member_id, joined.generation_id


STANDALONE = -1  # generation of a consumer that only stores offsets (no group membership)


def commit_request(group: str, offsets: dict[tuple[str, int], int], *, generation: int = STANDALONE,
                   member: str = "", metadata: str = "") -> OffsetCommitRequest:
    by_topic: dict[str, list[OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            OffsetCommitRequestPartition(partition, offset, committed_leader_epoch=0, committed_metadata=metadata)
        )
    return OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation, member_id=member,
        topics=tuple(OffsetCommitRequestTopic(topic, tuple(parts)) for topic, parts in by_topic.items()),
    )


async def commit(h: BrokerHarness, group: str, offsets: dict[tuple[str, int], int], *, version: int = 9,
                 **kwargs: Any) -> dict[tuple[str, int], int]:
    response = await h.request(commit_request(group, offsets, **kwargs), version=version)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def committed(h: BrokerHarness, group: str, topic: str, partitions: tuple[int, ...]) -> dict[int, int]:
    request = OffsetFetchRequest(group_id=group, topics=(OffsetFetchRequestTopic(topic, partitions),))
    response = await h.request(request, version=7)
    return {p.partition_index: p.committed_offset for t in response.topics for p in t.partitions}
