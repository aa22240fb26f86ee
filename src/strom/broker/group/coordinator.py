"""The group coordinator: Kafka's classic consumer group protocol on one event loop.

JoinGroup and SyncGroup answers are delayed: the handler awaits a future on the member
that the coordinator completes when the rebalance reaches the point Kafka's
``DelayedJoin``/``InitialDelayedJoin`` and ``SyncGroup`` callbacks would. A rebalance
ends when every known member has rejoined (or, after ``group.initial.rebalance.delay.ms``
for a group that was Empty, extended while new members keep arriving up to the rebalance
timeout), or when the largest rebalance timeout of the members runs out; members that
did not rejoin are then dropped (dynamic ones only, as in Kafka). Each member has one
timer for its session: a heartbeat moves its deadline, the timer re-arms itself and
removes the member once the deadline has passed while it is not waiting in a
JoinGroup or SyncGroup. The broker only relays assignments, so every client-side
assignor (range, round-robin, sticky, cooperative-sticky) works unchanged.

Durable changes (offsets, group metadata at the end of a rebalance, deletions) go
through ``GroupMetadataManager`` before the answer; commits and group metadata are
answered once replicated (``offsets.commit.required.acks``). Everything runs on the
broker's event loop: no locks; the coordinator is the one owner of the groups. Where
an answer waits for replication, the group may move on meanwhile, so what the wait
was for is applied only if the group is still where it was (Kafka's callbacks under
the group lock do the same).

Transactions (KIP-98, KIP-447): TxnOffsetCommit's offsets are written as the producer's
transactional batch and kept pending per producer id, invisible to OffsetFetch, until
WriteTxnMarkers appends the transaction's marker to the group's partition and calls
``on_transaction_completed``; RequireStable fetches answer UNSTABLE_OFFSET_COMMIT
meanwhile. With member information the commit must come from the current generation.

On one node this broker coordinates every group. In cluster mode it coordinates the
groups whose ``__consumer_offsets`` partition it leads: the ReplicaManager's leadership
listener loads a partition it gains and unloads one it loses (``on_election`` /
``on_resignation``), and every group API answers COORDINATOR_LOAD_IN_PROGRESS or
NOT_COORDINATOR for the groups of partitions loading or not led here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from strom.broker.group.group_config import GroupConfig
from strom.broker.group.group_metadata import (
    GroupMetadata,
    JoinResult,
    OffsetAndMetadata,
    SyncResult,
)
from strom.broker.group.group_metadata_manager import GroupMetadataManager
from strom.broker.group.offsets_expiration import expire_offsets
from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.group.rebalance import (
    COMPLETING,
    DEAD,
    EMPTY,
    PREPARING,
    STABLE,
    GroupRebalancer,
    Protocols,
    complete_join,
    complete_sync,
)
from strom.broker.periodic import every
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.admin_manager import TopicAdmin
    from strom.broker.config import BrokerConfig
    from strom.broker.metadata_cache import MetadataCache
    from strom.broker.replica_manager import ReplicaManager

logger = logging.getLogger(__name__)

# (transactional id, producer id, producer epoch, group id) -> NONE, or why not to write
TxnOffsetVerifier = Callable[[str, int, int, str], Awaitable[ErrorCode]]



class GroupCoordinator:
    def __init__(
        self, config: GroupConfig, manager: GroupMetadataManager, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.config = config
        self.manager = manager
        self.monotonic = monotonic
        self.rebalancer = GroupRebalancer(config, manager, monotonic)
        self._expiry_task: asyncio.Task[None] | None = None
        # KIP-890 part 1: the transaction coordinator's check that the group's offsets
        # partition is in the producer's ongoing transaction, before a TxnOffsetCommit is
        # written (Kafka's verification guard). None: not verified, as Kafka with
        # transaction.partition.verification.enable=false.
        self.txn_offset_verifier: TxnOffsetVerifier | None = None
        self._started = False  # on the event loop: groups loaded from now on arm their own timers

    @property
    def groups(self) -> dict[str, GroupMetadata]:
        return self.manager.groups

    @classmethod
    def build(
        cls, config: BrokerConfig, metadata: MetadataCache, admin_manager: TopicAdmin, replica_manager: ReplicaManager
    ) -> GroupCoordinator:
        """The broker's coordinator; in cluster mode it follows the offsets partitions' leadership."""
        group_config = GroupConfig.from_broker(config)
        manager = GroupMetadataManager(
            group_config, metadata, admin_manager, replica_manager, cluster_mode=config.cluster_mode
        )
        coordinator = cls(group_config, manager)
        if config.cluster_mode:
            replica_manager.leadership_listeners.append(coordinator.on_leadership_change)
        return coordinator

    # -- lifecycle -----------------------------------------------------------------------
    def load(self) -> None:
        self.manager.load()

    def start(self) -> None:
        """Arm session timers for loaded members, and the offsets expiration task."""
        self._started = True
        for group in self.groups.values():
            for member in group.members.values():
                self.rebalancer.schedule_session(group, member)
        self._expiry_task = asyncio.create_task(
            every(
                self.config.offsets_retention_check_interval_ms,
                lambda: self.expire_offsets(self.rebalancer.now_ms()),
                "offsets expiration",
            )
        )

    async def shutdown(self) -> None:
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry_task
        await self.manager.shutdown()
        for group in self.groups.values():
            _stop_group(group)

    # -- cluster mode: gaining and losing offsets partitions -----------------------------
    def on_leadership_change(
        self, now_leading: Sequence[TopicPartition], stopped_leading: Sequence[TopicPartition]
    ) -> None:
        """The ReplicaManager's leadership listener (Kafka's ``onLeadershipChange``)."""
        for topic, partition in stopped_leading:
            if topic == OFFSETS_TOPIC:
                self.on_resignation(partition)
        for topic, partition in now_leading:
            if topic == OFFSETS_TOPIC:
                self.on_election(partition)

    def on_election(self, partition: int) -> None:
        """This broker leads offsets ``partition``: load its groups (Kafka's ``onElection``)."""
        logger.info("elected leader of %s-%d: loading its groups", OFFSETS_TOPIC, partition)
        self.manager.schedule_load(partition, self._on_groups_loaded)

    def _on_groups_loaded(self, groups: list[GroupMetadata]) -> None:
        """Loaded groups come back Stable or Empty; their members' sessions start now
        (or at ``start``, for a load before it: timers need the running event loop)."""
        if not self._started:
            return
        for group in groups:
            for member in group.members.values():
                self.rebalancer.schedule_session(group, member)

    def on_resignation(self, partition: int) -> None:
        """Another broker leads offsets ``partition`` now: forget its groups (Kafka's
        ``onResignation``); members waiting in a JoinGroup or SyncGroup get NOT_COORDINATOR."""
        removed = self.manager.remove_partition(partition)
        logger.info("resigned as leader of %s-%d: %d groups unloaded", OFFSETS_TOPIC, partition, len(removed))
        now = self.rebalancer.now_ms()
        for group in removed:
            group.transition_to(DEAD, now)
            _stop_group(group)

    def _check_group(self, group_id: str) -> ErrorCode:
        """Kafka's ``validateGroupStatus``: COORDINATOR_LOAD_IN_PROGRESS while the group's
        offsets partition loads, NOT_COORDINATOR if this broker does not lead it."""
        return self.manager.coordinator_error(group_id)

    def ensure_offsets_topic(self) -> None:
        self.manager.ensure_offsets_topic()

    # -- JoinGroup -----------------------------------------------------------------------
    async def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: Protocols,
        *,
        require_known_member_id: bool,
        supports_skip_assignment: bool = True,
    ) -> JoinResult:
        error = self._check_group(group_id)
        if error:
            return JoinResult(error, member_id)
        if not group_id:
            return JoinResult(ErrorCode.INVALID_GROUP_ID, member_id)
        if not self.config.group_min_session_timeout_ms <= session_timeout_ms <= self.config.group_max_session_timeout_ms:
            logger.info(
                "JoinGroup %s: session timeout %d ms outside [%d, %d]", group_id, session_timeout_ms,
                self.config.group_min_session_timeout_ms, self.config.group_max_session_timeout_ms,
            )
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        if rebalance_timeout_ms < 0:  # JoinGroup v0 has only the session timeout
            rebalance_timeout_ms = session_timeout_ms
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
            group = self.groups[group_id] = GroupMetadata(group_id, current_state_timestamp=self.rebalancer.now_ms())
        if group.is_in(DEAD):
            return JoinResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(protocol_type, [name for name, _ in protocols]):
            logger.info("JoinGroup %s: protocols %s (%s) are not the group's", group_id, [n for n, _ in protocols], protocol_type)
            return JoinResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[JoinResult] = loop.create_future()
        if not member_id:
            if len(group.members) + len(group.pending_members) >= self.config.group_max_size and not (
                group_instance_id is not None and group_instance_id in group.static_members
            ):
                return JoinResult(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            new_member_id = f"{client_id}-{uuid.uuid4()}"
            if group_instance_id is not None:
                await self.rebalancer.join_static(
                    group, new_member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                    session_timeout_ms, protocol_type, protocols, future, supports_skip_assignment,
                )
            elif require_known_member_id:
                self.rebalancer.add_pending_member(group, new_member_id, session_timeout_ms)
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, new_member_id)
            else:
                self.rebalancer.add_member_and_rebalance(
                    group, new_member_id, None, client_id, client_host, rebalance_timeout_ms,
                    session_timeout_ms, protocol_type, protocols, future,
                )
        else:
            result = self.rebalancer.join_known(
                group, member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, protocols, future,
            )
            if result is not None:
                return result
        return await future

    # -- SyncGroup -----------------------------------------------------------------------
    async def sync_group(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
    ) -> SyncResult:
        error = self._check_group(group_id)
        if error:
            return SyncResult(error)
        if not group_id:
            return SyncResult(ErrorCode.INVALID_GROUP_ID)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self.rebalancer.validate_member(group, member_id, group_instance_id, generation_id)
        if error:
            return SyncResult(error)
        if (protocol_type is not None and protocol_type != group.protocol_type) or (
            protocol_name is not None and protocol_name != group.protocol_name
        ):
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member = group.members[member_id]
        if group.is_in(EMPTY):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_in(PREPARING):
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        self.rebalancer.touch(group, member)
        if group.is_in(STABLE):
            return SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name)
        future: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        complete_sync(member, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        member.sync_future = future
        if member_id == group.leader_id:
            await self._set_assignment(group, assignments)
        return await future

    async def _set_assignment(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        """The leader's SyncGroup: persist the assignment, then answer every member.

        Applied only if the group is still completing the same generation once stored
        (a member may have joined meanwhile), as Kafka's ``storeGroup`` callback.
        """
        generation = group.generation_id
        error = await self.manager.store_group(group, assignments)
        if not group.is_in(COMPLETING) or group.generation_id != generation:
            return
        if error:
            self.rebalancer.reset_and_propagate_assignment_error(group, error)
            self.rebalancer.maybe_prepare_rebalance(group, f"storing the assignment failed: {error.name}")
            return
        for member in group.members.values():
            member.assignment = assignments.get(member.member_id, b"")
        group.transition_to(STABLE, self.rebalancer.now_ms())
        logger.info("group %s: generation %d is Stable", group.group_id, group.generation_id)
        for member in group.members.values():
            complete_sync(member, SyncResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name))

    # -- Heartbeat and LeaveGroup --------------------------------------------------------
    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self._check_group(group_id)
        if error:
            return error
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self.rebalancer.validate_member(group, member_id, group_instance_id, generation_id)
        if error:
            return error
        if group.is_in(EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalancer.touch(group, group.members[member_id])
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_in(PREPARING) else ErrorCode.NONE

    def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """The group's error, and one per ``(member_id, group_instance_id)`` leaving."""
        error = self._check_group(group_id)
        if error:
            return error, []
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        group = self.groups.get(group_id)
        if group is None:  # Kafka: the request is fine, no member of it is known
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        return ErrorCode.NONE, [self._leave(group, member_id, instance_id) for member_id, instance_id in leaving]

    def _leave(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode:
        if instance_id is not None:
            owner = group.static_members.get(instance_id)
            if owner is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and owner != member_id:
                logger.info("LeaveGroup %s: %s is not the member of instance %s", group.group_id, member_id, instance_id)
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = owner
        elif member_id in group.pending_members:
            self.rebalancer.remove_pending(group, member_id)
            self.rebalancer.maybe_complete_join(group)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.rebalancer.remove_member_and_update_group(group, member, "left the group")
        return ErrorCode.NONE

    # -- offsets -------------------------------------------------------------------------
    async def commit_offsets(
        self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
        offsets: dict[TopicPartition, OffsetAndMetadata],
    ) -> dict[TopicPartition, ErrorCode]:
        error = self._validate_commit(group_id, member_id, group_instance_id, generation_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.groups.get(group_id)
        if group is None:  # a group that does not use the coordinator for membership
            group = self.groups[group_id] = GroupMetadata(group_id, current_state_timestamp=self.rebalancer.now_ms())
        member = group.members.get(member_id)
        if member is not None:
            self.rebalancer.touch(group, member)
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, offset in offsets.items():
            if len(offset.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = offset
        if valid:
            error = await self.manager.store_offsets(group, valid)
            results.update(dict.fromkeys(valid, error))
        return {tp: results[tp] for tp in offsets}

    def _validate_commit(self, group_id: str, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        error = self._check_group(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE if generation_id < 0 else ErrorCode.ILLEGAL_GENERATION
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_in(EMPTY):
            return ErrorCode.NONE
        if group.is_in(COMPLETING):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return self.rebalancer.validate_member(group, member_id, instance_id, generation_id)

    # -- transactional offsets (KIP-98, KIP-447) -----------------------------------------
    async def commit_transactional_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
        group_instance_id: str | None, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
        transactional_id: str = "",
    ) -> dict[TopicPartition, ErrorCode]:
        """TxnOffsetCommit (Kafka's ``handleTxnCommitOffsets``): the offsets are written as
        the producer's transactional batch and stay invisible to OffsetFetch until the
        transaction's marker reaches the group's partition (``on_transaction_completed``)."""
        error = self._check_group(group_id)
        if error:
            return dict.fromkeys(offsets, error)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, current_state_timestamp=self.rebalancer.now_ms())
        error = self._validate_txn_commit(group, member_id, group_instance_id, generation_id)
        if error:
            return dict.fromkeys(offsets, error)
        if self.txn_offset_verifier is not None:
            error = await self.txn_offset_verifier(transactional_id, producer_id, producer_epoch, group_id)
            if error:
                return dict.fromkeys(offsets, error)
        results: dict[TopicPartition, ErrorCode] = {}
        valid: dict[TopicPartition, OffsetAndMetadata] = {}
        for tp, offset in offsets.items():
            if len(offset.metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
            else:
                valid[tp] = offset
        if valid:
            error = await self.manager.store_txn_offsets(group, producer_id, producer_epoch, valid)
            results.update(dict.fromkeys(valid, error))
        return {tp: results[tp] for tp in offsets}

    def _validate_txn_commit(
        self, group: GroupMetadata, member_id: str, instance_id: str | None, generation_id: int
    ) -> ErrorCode:
        """Kafka's ``validateOffsetCommit(isTransactional = true)``: with member information
        (KIP-447's consumer group metadata) it must be the current member and generation;
        without it (a generation below 0, no member id, no instance id: older clients,
        admin commits) any group state is accepted, unlike a plain OffsetCommit."""
        if group.is_in(DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and not member_id and instance_id is None:
            return ErrorCode.NONE
        if group.is_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def on_transaction_completed(self, producer_id: int, partitions: Iterable[int], committed: bool) -> None:
        """A COMMIT or ABORT marker of ``producer_id`` is written (and replicated) on these
        ``__consumer_offsets`` partitions: its pending offsets there become committed ones,
        or are dropped (Kafka's ``onTransactionCompleted``; WriteTxnMarkers calls it)."""
        self.manager.complete_transaction(producer_id, partitions, committed)

    def unstable_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` with an offset commit still pending (a transactional one
        before its marker, a plain one before its replication): OffsetFetch with
        RequireStable answers them UNSTABLE_OFFSET_COMMIT, so the consumer retries rather
        than start from an offset about to move."""
        group = self.groups.get(group_id)
        if group is None or not (group.pending_txn_offsets or group.pending_offset_commits):
            return set()
        return {tp for tp in partitions if group.has_pending_offset_commit(tp)}

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[ErrorCode, dict[TopicPartition, OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); every one if ``partitions`` is None.

        A plain commit waiting for replication is not applied yet, and a transactional
        one not before its transaction commits: the partitions of either are
        ``unstable_offsets``.
        """
        error = self._check_group(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None and not group.is_in(DEAD) else {}
        if partitions is None:
            return ErrorCode.NONE, dict(sorted(committed.items()))
        return ErrorCode.NONE, {tp: committed.get(tp) for tp in partitions}

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        error = self._check_group(group_id)
        if error:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        results: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(EMPTY):
            deletable = list(partitions)
        else:
            subscribed = group.subscribed_topics()
            if subscribed is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            deletable = [tp for tp in partitions if tp[0] not in subscribed]
            results.update({tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions if tp[0] in subscribed})
        error = self.manager.delete_offsets(group, deletable)
        if error == ErrorCode.NONE:  # Kafka's removeOffsets: a pending transactional one goes too
            group.drop_pending_txn_offsets(deletable)
        results.update(dict.fromkeys(deletable, error))
        return ErrorCode.NONE, {tp: results[tp] for tp in partitions}

    # -- groups --------------------------------------------------------------------------
    def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        results: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            results[group_id] = self._delete_group(group_id)
        return results

    def _delete_group(self, group_id: str) -> ErrorCode:
        error = self._check_group(group_id)
        if error:
            return error
        group = self.groups.get(group_id)
        if group is None or group.is_in(DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND
        if not group.is_in(EMPTY):
            return ErrorCode.NON_EMPTY_GROUP
        error = self.manager.delete_group(group)
        if error == ErrorCode.NONE:
            group.transition_to(DEAD, self.rebalancer.now_ms())
            logger.info("group %s deleted", group_id)
        return error

    def list_groups(self, states: set[str] | None = None) -> list[GroupMetadata]:
        """Groups not Dead; ``states`` (lower-case names) filters as ListGroups v4 does."""
        return [
            group for group in self.groups.values()
            if not group.is_in(DEAD) and (not states or group.state.value.lower() in states)
        ]

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupMetadata | None]:
        error = self._check_group(group_id)
        if error:
            return error, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, (group if group is not None and not group.is_in(DEAD) else None)

    # -- offsets expiration --------------------------------------------------------------
    def expire_offsets(self, now_ms: int) -> int:
        """Expire offsets and remove groups left with none (``offsets_expiration``);
        the number of offsets expired."""
        return expire_offsets(list(self.groups.values()), self.manager, self.config.offsets_retention_ms, now_ms)


def _stop_group(group: GroupMetadata) -> None:
    """Cancel the group's timers and answer its waiting members NOT_COORDINATOR."""
    if group.join_timer is not None:
        group.join_timer.cancel()
        group.join_timer = None
    for handle in group.pending_members.values():
        if handle is not None:
            handle.cancel()
    for member in group.members.values():
        if member.timer is not None:
            member.timer.cancel()
            member.timer = None
        complete_join(member, JoinResult(ErrorCode.NOT_COORDINATOR, member.member_id))
        complete_sync(member, SyncResult(ErrorCode.NOT_COORDINATOR))
