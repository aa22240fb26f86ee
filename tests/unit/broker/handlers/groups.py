"""Classic-group requests (JoinGroup, SyncGroup, Heartbeat) for the group handlers' test modules."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from strom.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from tests.support.broker_harness import BrokerHarness

SESSION_MS = 10_000  # within Kafka's default [6 s, 30 min]
REBALANCE_MS = 5_000
PROTOCOLS = (("range", b"range-meta"), ("roundrobin", b"rr-meta"))


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
