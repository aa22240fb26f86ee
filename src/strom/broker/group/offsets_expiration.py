"""Committed offsets expiring (Kafka's ``cleanupGroupMetadata`` with KIP-211's rules).

An Empty group's offsets expire ``offsets.retention.ms`` after it became Empty (or after
their commit, for groups without membership); an active consumer group's only for topics
it no longer subscribes to; an offset committed with an expire timestamp (OffsetCommit
v2-v4's retention time) at that time. A group left Empty with no offsets, committed or
pending in a transaction (Kafka's ``hasOffsets``), is removed. Run periodically by the
coordinator (``offsets.retention.check.interval.ms``) on its event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from strom.broker.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)


def expire_offsets(groups: Sequence[GroupMetadata], manager: GroupMetadataManager, retention_ms: int,
                   now_ms: int) -> int:
    """Delete the expired offsets of ``groups`` and the groups left with none; the number
    of offsets expired."""
    expired_total = 0
    for group in groups:
        if group.is_in(GroupState.EMPTY):
            base_on_state = group.protocol_type is not None and group.current_state_timestamp >= 0
            subscribed: set[str] | None = set()
        elif group.is_in(GroupState.STABLE) and group.protocol_type == "consumer":
            base_on_state = False
            subscribed = group.subscribed_topics()
        else:
            continue
        if subscribed is None:
            continue
        expired = [
            tp for tp, offset in group.offsets.items()
            if tp[0] not in subscribed and _is_expired(offset, group, base_on_state, retention_ms, now_ms)
        ]
        if expired and manager.delete_offsets(group, expired) == ErrorCode.NONE:
            expired_total += len(expired)
            logger.info("group %s: %d committed offsets expired", group.group_id, len(expired))
        removable = (group.is_in(GroupState.EMPTY) and not group.offsets and not group.pending_members
                     and not group.pending_txn_offsets)
        if removable and manager.delete_group(group) == ErrorCode.NONE:
            group.transition_to(GroupState.DEAD, now_ms)
            logger.info("group %s: Empty with no offsets; removed", group.group_id)
    return expired_total


def _is_expired(offset: OffsetAndMetadata, group: GroupMetadata, base_on_state: bool, retention_ms: int,
                now_ms: int) -> bool:
    if offset.expire_timestamp >= 0:
        return now_ms >= offset.expire_timestamp
    base = group.current_state_timestamp if base_on_state else offset.commit_timestamp
    return now_ms >= base + retention_ms
