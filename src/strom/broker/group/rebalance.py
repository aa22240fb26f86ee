"""Membership and rebalancing: Kafka's classic JoinGroup state machine and member sessions.

``GroupRebalancer`` holds the machinery the ``GroupCoordinator`` (the public API, which
owns one) drives: adding, updating and replacing members, preparing a rebalance, ending
it (Kafka's ``DelayedJoin``/``InitialDelayedJoin``), and the per-member session timers.
Its public methods are the coordinator's, not the handlers': they expect the group's
request already validated.

A rebalance ends when every known member has rejoined (never early while the initial
delay of a group that was Empty runs: that wait is extended by
``group.initial.rebalance.delay.ms`` while new members keep arriving, up to the rebalance
timeout), or when the largest rebalance timeout of the members runs out; dynamic members
that did not rejoin are then dropped, static ones are waited for until their session
ends. Each member has one timer: a heartbeat only moves its deadline, the timer re-arms
itself and removes the member once the deadline has passed while it is not waiting in
a JoinGroup or SyncGroup (those waits are bounded by the rebalance instead).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable

from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import (
    GroupMetadata,
    GroupState,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.protocol.error_codes import ErrorCode

logger = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)
Protocols = list[tuple[str, bytes]]


class GroupRebalancer:
    def __init__(
        self, config: GroupConfig, manager: GroupMetadataManager, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.manager = manager
        self.monotonic = monotonic

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    def now_ms(self) -> int:
        return self.manager.clock_ms()

    # -- joining -------------------------------------------------------------------------
    def join_known(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
        future: asyncio.Future[JoinResult],
    ) -> JoinResult | None:
        """A member that has its id; None means the answer will come through ``future``."""
        if member_id in group.pending_members:
            if instance_id is not None:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            self.remove_pending(group, member_id)
            self.add_member_and_rebalance(
                group, member_id, None, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, future,
            )
            return None
        if group.is_fenced(member_id, instance_id):
            logger.info("JoinGroup %s: member %s of instance %s is fenced", group.group_id, member_id, instance_id)
            return JoinResult(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or (instance_id is not None and instance_id not in group.static_members):
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.is_in(PREPARING):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        elif group.is_in(COMPLETING):
            if member.matches(protocols):
                self.touch(group, member)
                return self._generation_result(group, member.member_id, leader_view=member_id == group.leader_id)
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
        elif group.is_in(STABLE):
            if member_id == group.leader_id or not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, future)
            else:
                self.touch(group, member)
                return self._generation_result(group, member_id, leader_view=False)
        else:
            return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        return None

    async def join_static(
        self, group: GroupMetadata, new_member_id: str, instance_id: str, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
        future: asyncio.Future[JoinResult], supports_skip_assignment: bool,
    ) -> None:
        old_member_id = group.static_members.get(instance_id)
        if old_member_id is None:
            self.add_member_and_rebalance(
                group, new_member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, future,
            )
            return
        # The instance restarted: its new member id replaces the old one, which is fenced.
        previous_leader = group.leader_id
        old = group.members[old_member_id]
        complete_join(old, JoinResult(ErrorCode.FENCED_INSTANCE_ID, old_member_id))
        complete_sync(old, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        old_protocols = old.supported_protocols
        member = group.replace_static_member(instance_id, new_member_id)
        member.client_id, member.client_host = client_id, client_host
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        member.supported_protocols = protocols
        member.join_future = future
        self.touch(group, member)
        logger.info("group %s: static member %s rejoined as %s (was %s)", group.group_id, instance_id, new_member_id, old_member_id)
        if group.is_in(STABLE):
            if group.protocol_name == group.select_protocol():
                # Nothing the assignment depends on changed: persist the new id, no rebalance.
                error = await self.manager.store_group(group)
                if group.static_members.get(instance_id) != new_member_id or group.is_in(DEAD):
                    complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, new_member_id))
                    return  # replaced or unloaded while the store waited: nothing to answer for
                if error:
                    member.join_future = None
                    member.supported_protocols = old_protocols
                    group.replace_static_member(instance_id, old_member_id)
                    if not future.done():
                        future.set_result(JoinResult(error, new_member_id))
                    return
                is_leader = group.leader_id == new_member_id
                if supports_skip_assignment and is_leader:
                    result = self._generation_result(group, new_member_id, leader_view=True)
                    result = dataclasses.replace(result, skip_assignment=True)
                else:
                    # An older leader must not think it leads (it would assign, and a Stable
                    # group would never pass that on): answer with the previous leader id.
                    result = self._generation_result(group, new_member_id, leader_view=False)
                    result = dataclasses.replace(result, leader_id=previous_leader or "")
                complete_join(member, result)
            else:
                self.maybe_prepare_rebalance(group, f"static member {instance_id} changed the group's protocol")
        elif group.is_in(COMPLETING):
            self.maybe_prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    def add_pending_member(self, group: GroupMetadata, member_id: str, session_timeout_ms: int) -> None:
        """MEMBER_ID_REQUIRED (KIP-394): the id is reserved until the member rejoins with it."""
        loop = asyncio.get_running_loop()
        group.pending_members[member_id] = loop.call_later(
            session_timeout_ms / 1000, self._expire_pending, group, member_id
        )

    def _expire_pending(self, group: GroupMetadata, member_id: str) -> None:
        if member_id in group.pending_members:
            logger.info("group %s: pending member %s did not rejoin in time", group.group_id, member_id)
            self.remove_pending(group, member_id)
            if group.is_in(PREPARING):
                self.maybe_complete_join(group)

    def remove_pending(self, group: GroupMetadata, member_id: str) -> None:
        handle = group.pending_members.pop(member_id, None)
        if handle is not None:
            handle.cancel()

    def add_member_and_rebalance(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str, protocols: Protocols,
        future: asyncio.Future[JoinResult],
    ) -> None:
        member = MemberMetadata(
            member_id, instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
            protocol_type, protocols, join_future=future,
        )
        if group.is_in(PREPARING) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self.touch(group, member)
        self.maybe_prepare_rebalance(group, f"member {member_id} joined")
        if group.is_in(PREPARING):
            self.maybe_complete_join(group)

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, protocols: Protocols, rebalance_timeout_ms: int,
        session_timeout_ms: int, future: asyncio.Future[JoinResult],
    ) -> None:
        complete_join(member, JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.supported_protocols = protocols
        member.rebalance_timeout_ms, member.session_timeout_ms = rebalance_timeout_ms, session_timeout_ms
        member.join_future = future
        self.touch(group, member)
        self.maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        if group.is_in(PREPARING):
            self.maybe_complete_join(group)

    def _generation_result(self, group: GroupMetadata, member_id: str, *, leader_view: bool) -> JoinResult:
        members: tuple[tuple[str, str | None, bytes], ...] = ()
        if leader_view and group.protocol_name is not None:
            members = tuple(
                (m.member_id, m.group_instance_id, m.metadata(group.protocol_name)) for m in group.members.values()
            )
        return JoinResult(
            ErrorCode.NONE, member_id, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", members,
        )

    # -- rebalancing ---------------------------------------------------------------------
    def maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_in(COMPLETING):
            self.reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        loop = asyncio.get_running_loop()
        if group.join_timer is not None:
            group.join_timer.cancel()
        initial = group.is_in(EMPTY)
        group.transition_to(PREPARING, self.now_ms())
        logger.info("group %s: preparing rebalance for generation %d: %s", group.group_id, group.generation_id + 1, reason)
        if initial:
            delay = self.config.group_initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            group.new_member_added = False
            group.join_timer = loop.call_later(delay / 1000, self._initial_delay_expired, group, delay, remaining)
        else:
            group.join_timer = loop.call_later(group.rebalance_timeout_ms() / 1000, self._on_complete_join, group)
        group.initial_delay = initial
        # Kafka's tryCompleteElseWatch: a DelayedJoin whose members have all joined already
        # (e.g. the last one just left) completes now, not at the rebalance timeout.
        self.maybe_complete_join(group)

    def _initial_delay_expired(self, group: GroupMetadata, delay_ms: int, remaining_ms: int) -> None:
        """Kafka's InitialDelayedJoin: wait again while new members keep coming."""
        group.join_timer = None
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.config.group_initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = asyncio.get_running_loop().call_later(
                delay / 1000, self._initial_delay_expired, group, delay, max(remaining_ms - delay, 0)
            )
            return
        group.initial_delay = False
        self._on_complete_join(group)

    def maybe_complete_join(self, group: GroupMetadata) -> None:
        if group.is_in(PREPARING) and not group.initial_delay and group.all_members_joined():
            self._on_complete_join(group)

    def _on_complete_join(self, group: GroupMetadata) -> None:
        if group.join_timer is not None:
            group.join_timer.cancel()
            group.join_timer = None
        if not group.is_in(PREPARING):
            return
        for member in [m for m in group.members.values() if not m.is_awaiting_join and not m.is_static]:
            logger.info("group %s: member %s did not rejoin in time; removed", group.group_id, member.member_id)
            self._remove_member(group, member)
        if group.members and not any(m.is_awaiting_join for m in group.members.values()):
            # Only static members that have not rejoined: wait for them or their sessions.
            group.join_timer = asyncio.get_running_loop().call_later(
                group.rebalance_timeout_ms() / 1000, self._on_complete_join, group
            )
            return
        if group.leader_id is not None and not group.members[group.leader_id].is_awaiting_join:
            group.leader_id = next(m.member_id for m in group.members.values() if m.is_awaiting_join)
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.transition_to(EMPTY, self.now_ms())
            logger.info("group %s: generation %d with no members; Empty", group.group_id, group.generation_id)
            self.manager.store_group_in_background(group)
            return
        group.protocol_name = group.select_protocol()
        group.transition_to(COMPLETING, self.now_ms())
        logger.info(
            "group %s: generation %d, protocol %s, leader %s, %d members", group.group_id, group.generation_id,
            group.protocol_name, group.leader_id, len(group.members),
        )
        for member in group.members.values():
            if member.join_future is not None:
                result = self._generation_result(group, member.member_id, leader_view=member.member_id == group.leader_id)
                complete_join(member, result)
                self.touch(group, member)

    def reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            complete_sync(member, SyncResult(error))

    def _remove_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        complete_join(member, JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member.member_id))
        complete_sync(member, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        group.remove(member.member_id)

    def remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        logger.info("group %s: removing member %s: %s", group.group_id, member.member_id, reason)
        self._remove_member(group, member)
        if group.is_in(STABLE, COMPLETING):
            self.maybe_prepare_rebalance(group, reason)
        elif group.is_in(PREPARING):
            self.maybe_complete_join(group)

    # -- sessions ------------------------------------------------------------------------
    def touch(self, group: GroupMetadata, member: MemberMetadata) -> None:
        """A sign of life: the session deadline moves to now + session timeout."""
        member.heartbeat_deadline = self.monotonic() + member.session_timeout_ms / 1000
        if member.timer is None:
            self.schedule_session(group, member)

    def schedule_session(self, group: GroupMetadata, member: MemberMetadata) -> None:
        if member.heartbeat_deadline == 0.0:
            member.heartbeat_deadline = self.monotonic() + member.session_timeout_ms / 1000
        delay = max(member.heartbeat_deadline - self.monotonic(), 0.0)
        member.timer = asyncio.get_running_loop().call_later(delay, self._session_check, group, member)

    def _session_check(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.timer = None
        if group.members.get(member.member_id) is not member:
            return
        now = self.monotonic()
        if member.is_awaiting_join or member.is_awaiting_sync:
            member.heartbeat_deadline = max(member.heartbeat_deadline, now + member.session_timeout_ms / 1000)
        if now < member.heartbeat_deadline:
            self.schedule_session(group, member)
            return
        self.remove_member_and_update_group(group, member, "session timeout expired")

    def validate_member(self, group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE


def complete_join(member: MemberMetadata, result: JoinResult) -> None:
    future, member.join_future = member.join_future, None
    if future is not None and not future.done():
        future.set_result(result)


def complete_sync(member: MemberMetadata, result: SyncResult) -> None:
    future, member.sync_future = member.sync_future, None
    if future is not None and not future.done():
        future.set_result(result)

