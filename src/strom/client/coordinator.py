"""A consumer's membership in its group: Kafka's classic group protocol, client side.

The member finds its group coordinator (FindCoordinator, key type 0), joins
(JoinGroup, offering every configured assignor with its subscription), and learns its
partitions (SyncGroup; the leader computes everyone's first). A background task then
heartbeats every ``heartbeat.interval.ms`` to keep the session and enforces
``max.poll.interval.ms`` (``heartbeat.py``); the subscription and assignment bytes
are Kafka's ConsumerProtocol (``strom.protocol.consumer_protocol``). Rejoining
happens on the consumer's own task, from ``ensure_active_group`` in its poll, so the
rebalance listener always runs there, never in the heartbeat task.

The rebalance protocol is cooperative when every configured assignor supports it
(KIP-429: only partitions taken away are revoked, after the join, and the member
rejoins so they can be handed on), else eager (everything is revoked before joining).

The coordinator talks to its broker over a connection of its own, as the Java client
does: a broker serves a connection's requests one at a time, so a heartbeat must not
queue behind a long-polling Fetch to the same broker.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Protocol

from strom.client.assignors import (
    ASSIGNORS,
    decode_assignment,
    decode_subscription,
    encode_assignment,
)
from strom.client.cluster import Cluster
from strom.client.config import ConsumerConfig
from strom.client.coordinator_link import COORDINATOR_GONE, CoordinatorLink, Retry
from strom.client.errors import (
    ConfigError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    UnsupportedVersionError,
)
from strom.client.heartbeat import Heartbeat
from strom.client.offsets import (
    OFFSET_COMMIT_VERSIONS,
    OFFSET_FETCH_VERSIONS,
    CommitFailedError,
    OffsetAndMetadata,
    offset_commit_errors,
    offset_commit_request,
    offset_fetch_request,
    offset_fetch_result,
)
from strom.protocol import consumer_protocol
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from strom.protocol.messages.join_group_response import JoinGroupResponse, JoinGroupResponseMember
from strom.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from strom.protocol.messages.offset_commit_request import OffsetCommitRequest
from strom.protocol.messages.offset_commit_response import OffsetCommitResponse
from strom.protocol.messages.offset_fetch_request import OffsetFetchRequest
from strom.protocol.messages.offset_fetch_response import OffsetFetchResponse
from strom.protocol.messages.sync_group_request import SyncGroupRequest, SyncGroupRequestAssignment
from strom.protocol.messages.sync_group_response import SyncGroupResponse
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

__all__ = ["CommitFailedError", "ConsumerCoordinator", "OffsetAndMetadata", "RebalanceListener"]

PROTOCOL_TYPE = "consumer"
# The consumer's positions for auto-commit: offsets alone, or with metadata and epoch.
Positions = Callable[[], Mapping[TopicPartition, OffsetAndMetadata | int]]


class RebalanceListener(Protocol):
    """Told when partitions come and go; each method may be a plain or an async function.

    ``on_partitions_revoked``: given up in an orderly way (commit what is processed).
    ``on_partitions_lost``: already someone else's (the member fell out of the group);
    committing is no longer possible. ``on_partitions_assigned``: newly owned.
    """

    def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> Awaitable[None] | None: ...

    def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> Awaitable[None] | None: ...

    def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> Awaitable[None] | None: ...


@dataclass(frozen=True, slots=True)
class Generation:
    generation_id: int = -1
    member_id: str = ""
    protocol_name: str | None = None


NO_GENERATION = Generation()


class ConsumerCoordinator:
    """One consumer's group membership, offsets and rebalance callbacks."""

    def __init__(self, cluster: Cluster, config: ConsumerConfig, listener: RebalanceListener | None = None,
                 *, positions: Positions | None = None,
                 released: Callable[[frozenset[TopicPartition]], None] | None = None) -> None:
        if config.group_id is None:
            raise ConfigError("a consumer coordinator needs group.id")
        self.cluster = cluster
        self.config = config
        self.group_id: str = config.group_id
        self.listener = listener
        self._positions = positions
        self._released = released  # told after the listener when partitions go (the fetcher forgets them)
        self._assignors = [ASSIGNORS[name] for name in config.assignors]
        self.cooperative = all(assignor.supports_cooperative for assignor in self._assignors)
        self._link = CoordinatorLink(cluster, config, self.group_id)
        self._generation = NO_GENERATION
        self._stable = False  # joined and synced, not rebalancing
        self._rejoin_reason: str | None = "not joined yet"
        self._needs_join_prepare = True
        self._subscription: frozenset[str] | None = None
        self._joined_subscription: frozenset[str] = frozenset()
        self._assignment: frozenset[TopicPartition] = frozenset()
        self._leader_snapshot: dict[str, int] | None = None
        self._join_lock = asyncio.Lock()
        self._heartbeat = Heartbeat(self, config, self._link)
        self._next_auto_commit = time.monotonic() + config.auto_commit_interval_ms / 1000
        self._auto_commit_task: asyncio.Task[None] | None = None
        self._fatal: KafkaError | None = None
        self._listener_error: Exception | None = None
        self._closed = False

    # -- what the consumer reads ---------------------------------------------------------
    @property
    def assignment(self) -> frozenset[TopicPartition]:
        return self._assignment

    @property
    def generation(self) -> int:
        return self._generation.generation_id

    @property
    def member_id(self) -> str:
        return self._generation.member_id

    @property
    def protocol_name(self) -> str | None:
        return self._generation.protocol_name

    @property
    def is_leader(self) -> bool:
        return self._leader_snapshot is not None

    @property
    def stable(self) -> bool:
        """Joined and synced, not rebalancing."""
        return self._stable

    @property
    def current_generation(self) -> Generation:
        return self._generation

    @property
    def need_rejoin(self) -> bool:
        return self._rejoin_reason is not None or not self._stable

    def request_rejoin(self, reason: str) -> None:
        """Rejoin at the next ``ensure_active_group`` (a changed subscription, say)."""
        if self._rejoin_reason is None:
            logger.info("group %s: rejoin requested: %s", self.group_id, reason)
            self._rejoin_reason = reason

    def poll_called(self) -> None:
        """The consumer polled: reset the max.poll.interval.ms timer, auto-commit if due.

        Positions are read here, at the start of a poll, so an auto-commit covers only
        records the application got from earlier polls (at-least-once).
        """
        now = time.monotonic()
        self._heartbeat.poll()
        if (self._auto_commit_enabled and self._stable and now >= self._next_auto_commit
                and (self._auto_commit_task is None or self._auto_commit_task.done())):
            self._next_auto_commit = now + self.config.auto_commit_interval_ms / 1000
            offsets = self._current_positions()
            if offsets:
                self._auto_commit_task = asyncio.create_task(self._auto_commit(offsets))

    # -- joining ------------------------------------------------------------------------
    async def ensure_active_group(self, subscription: Collection[str]) -> None:
        """Join (or rejoin) if needed and return once this member is in a stable generation."""
        self._raise_fatal()
        if self._closed:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the consumer coordinator is closed")
        topics = frozenset(subscription)
        if self._subscription is not None and topics != self._joined_subscription:
            self.request_rejoin(f"subscription changed to {sorted(topics)}")
        self._subscription = topics
        self._check_leader_metadata()
        async with self._join_lock:
            while self.need_rejoin:
                await self._link.ensure()
                if self._needs_join_prepare:
                    self._needs_join_prepare = False
                    await self._on_join_prepare()
                try:
                    await self._join_and_sync()
                except Retry as retry:
                    logger.info("group %s: joining again: %s", self.group_id, retry)
                    if retry.backoff:
                        await asyncio.sleep(self.config.retry_backoff_ms / 1000)
                    continue
                self._needs_join_prepare = True
        self._heartbeat.poll()
        self._heartbeat.start()
        if self._listener_error is not None:
            error, self._listener_error = self._listener_error, None
            raise error

    async def _on_join_prepare(self) -> None:
        """Before (re)joining: commit, then give up what the protocol says to give up."""
        if self._generation.member_id and self._generation.generation_id >= 0:
            await self._commit_before_revocation()
        else:
            self._leader_snapshot = None
            if self._assignment:
                lost, self._assignment = self._assignment, frozenset()
                await self._invoke("on_partitions_lost", lost)
            return
        if not self.cooperative:
            revoked, self._assignment = self._assignment, frozenset()
        else:
            revoked = frozenset(tp for tp in self._assignment if tp[0] not in (self._subscription or ()))
            self._assignment -= revoked
        if revoked:
            await self._invoke("on_partitions_revoked", revoked)

    async def _join_and_sync(self) -> None:
        self._stable = False
        subscription = self._subscription or frozenset()
        rebalance_timeout_ms = self.config.rebalance_timeout_ms or self.config.max_poll_interval_ms
        metadata = self._subscription_metadata(subscription)
        reason = self._rejoin_reason or "joining"

        def join_request(version: int) -> JoinGroupRequest:
            if self.config.group_instance_id is not None and version < 5:
                raise UnsupportedVersionError(
                    f"group.instance.id needs JoinGroup v5+ (KIP-345); the coordinator speaks v{version}")
            return JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms if version >= 1 else -1,
                member_id=self._generation.member_id,
                group_instance_id=self.config.group_instance_id if version >= 5 else None,
                protocol_type=PROTOCOL_TYPE,
                protocols=tuple(JoinGroupRequestProtocol(name=a.name, metadata=metadata) for a in self._assignors),
                reason=reason if version >= 8 else None)

        # JoinGroup waits for the whole group, up to the rebalance timeout (Java adds 5 s).
        join_timeout = max(self.config.request_timeout_ms, rebalance_timeout_ms + 5000)
        self._rejoin_reason = None
        join, _ = await self._link.send(JoinGroupRequest.API_KEY, join_request, JoinGroupRequest.VALID_VERSIONS, join_timeout)
        assert isinstance(join, JoinGroupResponse)
        self._check_join_error(join)
        self._joined_subscription = subscription
        generation = Generation(join.generation_id, join.member_id, join.protocol_name)
        self._generation = generation
        assignments: tuple[SyncGroupRequestAssignment, ...] = ()
        self._leader_snapshot = None
        if join.leader == join.member_id and not join.skip_assignment:
            assignments = await self._perform_assignment(join.protocol_name or "", join.members)

        def sync_request(version: int) -> SyncGroupRequest:
            return SyncGroupRequest(
                group_id=self.group_id, generation_id=generation.generation_id, member_id=generation.member_id,
                group_instance_id=self.config.group_instance_id if version >= 3 else None,
                protocol_type=PROTOCOL_TYPE if version >= 5 else None,
                protocol_name=generation.protocol_name if version >= 5 else None,
                assignments=assignments)

        sync, _ = await self._link.send(SyncGroupRequest.API_KEY, sync_request, SyncGroupRequest.VALID_VERSIONS, join_timeout)
        assert isinstance(sync, SyncGroupResponse)
        self._check_sync_error(sync, generation)
        await self._on_join_complete(generation, decode_assignment(sync.assignment))

    def _check_join_error(self, join: JoinGroupResponse) -> None:
        error = ErrorCode.from_code(join.error_code)
        if error is ErrorCode.NONE:
            return
        if error is ErrorCode.MEMBER_ID_REQUIRED:  # KIP-394: join again with the id we were given
            self._generation = Generation(member_id=join.member_id)
            raise Retry("the broker assigned a member id", backoff=False)
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.reset_generation(f"JoinGroup: {error.name}", keep_member_id=False)
            raise Retry(error.name, backoff=False)
        if error in COORDINATOR_GONE:
            self._link.mark_unknown(error.name)
            raise Retry(error.name)
        if error in (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REBALANCE_IN_PROGRESS) or error.retriable:
            raise Retry(error.name)
        raise KafkaError(error, f"JoinGroup for group {self.group_id!r}")

    def _check_sync_error(self, sync: SyncGroupResponse, generation: Generation) -> None:
        error = ErrorCode.from_code(sync.error_code)
        if error is ErrorCode.NONE:
            return
        if error is ErrorCode.REBALANCE_IN_PROGRESS:
            raise Retry("the group rebalanced again during SyncGroup", backoff=False)
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            self.reset_generation(f"SyncGroup: {error.name}", keep_member_id=error is ErrorCode.ILLEGAL_GENERATION)
            raise Retry(error.name, backoff=False)
        if error in COORDINATOR_GONE:
            self._link.mark_unknown(error.name)
            raise Retry(error.name)
        if error.retriable:
            raise Retry(error.name)
        raise KafkaError(error, f"SyncGroup for group {self.group_id!r} generation {generation.generation_id}")

    async def _perform_assignment(self, protocol_name: str, members: tuple[JoinGroupResponseMember, ...],
                                  ) -> tuple[SyncGroupRequestAssignment, ...]:
        """The leader's part: every member's partitions, by the assignor the group chose."""
        assignor = ASSIGNORS.get(protocol_name)
        if assignor is None:
            raise KafkaError(ErrorCode.INCONSISTENT_GROUP_PROTOCOL,
                             f"the group chose assignor {protocol_name!r}, which this client lacks")
        subscriptions = {m.member_id: decode_subscription(m.metadata, m.group_instance_id) for m in members}
        topics = {topic for s in subscriptions.values() for topic in s.topics}
        metadata = await self.cluster.refresh(topics) if topics else self.cluster.metadata
        counts = {topic: len(info.partitions) for topic, info in metadata.topics.items()
                  if topic in topics and not info.error_code}
        result = assignor.assign(counts, subscriptions)
        self._leader_snapshot = counts
        logger.info("group %s: leader assigned with %s: %s", self.group_id, protocol_name,
                    {member: sorted(tps) for member, tps in result.items()})
        return tuple(SyncGroupRequestAssignment(member_id=member, assignment=encode_assignment(tps))
                     for member, tps in result.items())

    async def _on_join_complete(self, generation: Generation, assigned: frozenset[TopicPartition]) -> None:
        logger.info("group %s: generation %d, member %s, assigned %s", self.group_id, generation.generation_id,
                    generation.member_id, sorted(assigned))
        added = assigned
        # Synced: the generation is valid from here on, as in the Java client, so a
        # listener may commit in on_partitions_revoked (what a cooperative member must
        # do before handing partitions on).
        self._stable = True
        self._heartbeat.received()
        if self.cooperative:
            added = assigned - self._assignment
            revoked = self._assignment - assigned
            if revoked:
                self._assignment -= revoked
                await self._invoke("on_partitions_revoked", revoked)
                self.request_rejoin("partitions were revoked: the group must hand them on")
        self._assignment = assigned
        if any(topic not in self._joined_subscription for topic, _ in assigned):
            self.request_rejoin("the assignment has topics this member does not subscribe to")
        await self._invoke("on_partitions_assigned", added)

    def _subscription_metadata(self, topics: frozenset[str]) -> bytes:
        return consumer_protocol.encode_subscription(consumer_protocol.subscription(
            topics, self._assignment, generation_id=self._generation.generation_id,
            rack_id=self.config.client_rack or None))

    def _check_leader_metadata(self) -> None:
        """The leader rejoins when a topic the group reads gained partitions (Java does too)."""
        if self._leader_snapshot is None or not self._stable:
            return
        for topic, count in self._leader_snapshot.items():
            info = self.cluster.metadata.topics.get(topic)
            if info is not None and not info.error_code and len(info.partitions) != count:
                self.request_rejoin(f"topic {topic} now has {len(info.partitions)} partitions")
                return

    # -- leaving the group --------------------------------------------------------------
    def reset_generation(self, reason: str, *, keep_member_id: bool) -> None:
        """Out of the group: the partitions are lost, reported at the next join."""
        logger.info("group %s: member %s is out of generation %d: %s", self.group_id,
                    self._generation.member_id, self._generation.generation_id, reason)
        member_id = self._generation.member_id if keep_member_id else ""
        self._generation = Generation(member_id=member_id)
        self._stable = False
        self.request_rejoin(reason)

    async def maybe_leave_group(self, reason: str) -> None:
        """LeaveGroup, except for a static member: its instance keeps its place until the
        session times out, so a restart gets the same partitions without a rebalance."""
        generation = self._generation
        if self.config.group_instance_id is None and generation.member_id and self._link.known:
            def request(version: int) -> LeaveGroupRequest:
                if version >= 3:
                    identity = MemberIdentity(member_id=generation.member_id,
                                              reason=reason if version >= 5 else None)
                    return LeaveGroupRequest(group_id=self.group_id, members=(identity,))
                return LeaveGroupRequest(group_id=self.group_id, member_id=generation.member_id)

            try:
                await self._link.send(LeaveGroupRequest.API_KEY, request, LeaveGroupRequest.VALID_VERSIONS)
                logger.info("group %s: member %s left: %s", self.group_id, generation.member_id, reason)
            except (KafkaError, Retry) as exc:
                logger.info("group %s: LeaveGroup failed (%s); the session timeout will remove us",
                            self.group_id, exc)
        self.reset_generation(reason, keep_member_id=False)

    # -- offsets ------------------------------------------------------------------------
    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], *,
                     timeout_ms: int | None = None) -> None:
        """Commit ``offsets`` (the next offsets to read) for the group; retries what may pass.

        Raises ``KafkaError(REBALANCE_IN_PROGRESS)`` while the group rebalances (commit
        again after the next poll), and ``CommitFailedError`` when this member is no
        longer in the generation, as the Java client does.
        """
        if not offsets:
            return
        deadline = time.monotonic() + (timeout_ms or self.config.request_timeout_ms) / 1000
        while True:
            generation = self._commit_generation()

            def request(version: int, generation: Generation = generation) -> Message:
                return offset_commit_request(version, self.group_id, generation.generation_id,
                                             generation.member_id, self.config.group_instance_id, offsets)

            try:
                await self._link.ensure()
                response, _ = await self._link.send(OffsetCommitRequest.API_KEY, request, OFFSET_COMMIT_VERSIONS)
                assert isinstance(response, OffsetCommitResponse)
                errors = {e for e in offset_commit_errors(response).values() if e is not ErrorCode.NONE}
                if not errors:
                    return
                self._raise_commit_error(min(errors), generation)
            except (Retry, KafkaConnectionError, KafkaTimeoutError) as exc:
                reason = str(exc)
            except KafkaError as exc:
                if not exc.retriable or isinstance(exc, CommitFailedError):
                    raise
                reason = str(exc)
            if time.monotonic() + self.config.retry_backoff_ms / 1000 > deadline:
                raise KafkaTimeoutError(f"OffsetCommit for group {self.group_id!r} did not succeed: {reason}")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    def _commit_generation(self) -> Generation:
        if self._subscription is None:
            return NO_GENERATION  # not a group member: manual assignment with a group id
        if self._generation.generation_id < 0 and not self._join_lock.locked():
            raise CommitFailedError(ErrorCode.ILLEGAL_GENERATION,
                                    "this member is not in the group's generation (it left or was removed)")
        if not self._stable:
            raise KafkaError(ErrorCode.REBALANCE_IN_PROGRESS,
                             f"group {self.group_id!r} is rebalancing; commit after it completes")
        return self._generation

    def _raise_commit_error(self, error: ErrorCode, generation: Generation) -> None:
        if error in COORDINATOR_GONE or error is ErrorCode.REQUEST_TIMED_OUT:
            self._link.mark_unknown(error.name)
            raise Retry(error.name)
        if error is ErrorCode.REBALANCE_IN_PROGRESS:
            self.request_rejoin("OffsetCommit: the group is rebalancing")
            raise KafkaError(error, f"group {self.group_id!r} is rebalancing; commit after it completes")
        if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            if generation == self._generation and generation is not NO_GENERATION:
                self.reset_generation(f"OffsetCommit: {error.name}", keep_member_id=error is ErrorCode.ILLEGAL_GENERATION)
            raise CommitFailedError(error, "the group rebalanced without this member (polls too far apart, "
                                           "or the session expired); its partitions may have moved")
        raise KafkaError(error, f"OffsetCommit for group {self.group_id!r}")

    async def fetch_committed(self, partitions: Collection[TopicPartition], *,
                              timeout_ms: int | None = None) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset per partition (None where nothing is committed)."""
        if not partitions:
            return {}
        deadline = time.monotonic() + (timeout_ms or self.config.request_timeout_ms) / 1000
        while True:
            try:
                await self._link.ensure()
                response, version = await self._link.send(
                    OffsetFetchRequest.API_KEY, lambda v: offset_fetch_request(v, self.group_id, partitions), OFFSET_FETCH_VERSIONS)
                assert isinstance(response, OffsetFetchResponse)
                error, rows = offset_fetch_result(version, response)
                errors = {error} | {code for code, _ in rows.values()}
                errors.discard(ErrorCode.NONE)
                if not errors:
                    return {tp: rows[tp][1] if tp in rows else None for tp in partitions}
                first = min(errors)
                if first in COORDINATOR_GONE:
                    self._link.mark_unknown(first.name)
                elif not first.retriable:
                    raise KafkaError(first, f"OffsetFetch for group {self.group_id!r}")
                reason = first.name
            except (Retry, KafkaConnectionError, KafkaTimeoutError) as exc:
                reason = str(exc)
            if time.monotonic() + self.config.retry_backoff_ms / 1000 > deadline:
                raise KafkaTimeoutError(f"OffsetFetch for group {self.group_id!r} did not succeed: {reason}")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    @property
    def _auto_commit_enabled(self) -> bool:
        return self.config.enable_auto_commit and self._positions is not None

    def _current_positions(self) -> dict[TopicPartition, OffsetAndMetadata]:
        if self._positions is None:
            return {}
        return {tp: position if isinstance(position, OffsetAndMetadata) else OffsetAndMetadata(position)
                for tp, position in self._positions().items() if tp in self._assignment}

    async def _auto_commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self.commit(offsets)
        except KafkaError as exc:
            logger.warning("group %s: auto-commit of %d partitions failed: %s", self.group_id, len(offsets), exc)
            self._next_auto_commit = time.monotonic() + self.config.retry_backoff_ms / 1000

    async def _commit_before_revocation(self) -> None:
        """Auto-commit now: partitions are about to be revoked, or the consumer closes."""
        if self._auto_commit_task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._auto_commit_task
        if self._auto_commit_enabled and self._stable:
            offsets = self._current_positions()
            if offsets:
                await self._auto_commit(offsets)

    # -- callbacks and lifetime ----------------------------------------------------------
    async def _invoke(self, callback: str, partitions: frozenset[TopicPartition]) -> None:
        try:
            if self.listener is not None:
                result = getattr(self.listener, callback)(partitions)
                if inspect.isawaitable(result):
                    await result
        except Exception as exc:  # the listener's own bug: report it, finish the rebalance first
            logger.exception("group %s: %s raised", self.group_id, callback)
            if self._listener_error is None:
                self._listener_error = exc
        finally:
            if callback != "on_partitions_assigned" and self._released is not None:
                self._released(partitions)

    def fence(self, error: KafkaError) -> None:
        """Another member took this one's group.instance.id: every later call raises ``error``."""
        self._fatal = error

    def _raise_fatal(self) -> None:
        if self._fatal is not None:
            raise self._fatal

    async def close(self) -> None:
        """Commit (auto-commit), revoke, and leave the group; a static member does not leave."""
        if self._closed:
            return
        async with self._join_lock:
            await self._heartbeat.stop()
            try:
                if self._stable:
                    await self._commit_before_revocation()
            finally:
                revoked, self._assignment = self._assignment, frozenset()
                if revoked:
                    await self._invoke("on_partitions_revoked" if self._stable else "on_partitions_lost", revoked)
                if self._generation.member_id:
                    await self.maybe_leave_group("the consumer is being closed")
            self._closed = True
            await self._link.close()
