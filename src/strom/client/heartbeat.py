"""A group member's heartbeat: the background task that keeps its session alive.

As Kafka's ``Heartbeat`` and ``AbstractCoordinator.HeartbeatThread``: every
``heartbeat.interval.ms`` a stable member sends Heartbeat for its generation. The
answer steers the member: REBALANCE_IN_PROGRESS asks for a rejoin; UNKNOWN_MEMBER_ID
or ILLEGAL_GENERATION mean it is out of the group (its partitions are lost);
FENCED_INSTANCE_ID means another process took its ``group.instance.id``, which is
fatal; a coordinator error makes the link look the coordinator up again.

The same task enforces ``max.poll.interval.ms``: a member whose application has not
polled within it leaves the group so that its partitions go to someone who will
process them; its next poll rejoins. And a member with no successful heartbeat within
``session.timeout.ms`` assumes its coordinator is gone and finds it again.

Rejoining never happens here, only on the consumer's own task (``ensure_active_group``),
so rebalance listeners never run in the heartbeat task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import TYPE_CHECKING, Protocol

from strom.client.config import ConsumerConfig
from strom.client.coordinator_link import COORDINATOR_GONE, CoordinatorLink, Retry
from strom.client.errors import KafkaError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.heartbeat_request import HeartbeatRequest
from strom.protocol.messages.heartbeat_response import HeartbeatResponse

if TYPE_CHECKING:
    from strom.client.coordinator import Generation

logger = logging.getLogger(__name__)



class GroupMember(Protocol):
    """What the heartbeat needs of the membership it keeps alive."""

    @property
    def group_id(self) -> str: ...

    @property
    def stable(self) -> bool: ...

    @property
    def current_generation(self) -> Generation: ...

    def request_rejoin(self, reason: str) -> None: ...

    def reset_generation(self, reason: str, *, keep_member_id: bool) -> None: ...

    def fence(self, error: KafkaError) -> None: ...

    async def maybe_leave_group(self, reason: str) -> None: ...


class Heartbeat:
    """The session's timers and the task that heartbeats while the member is stable."""

    def __init__(self, member: GroupMember, config: ConsumerConfig, link: CoordinatorLink) -> None:
        self.member = member
        self.config = config
        self.link = link
        self.last_poll = time.monotonic()
        self.last_received = time.monotonic()
        self._task: asyncio.Task[None] | None = None

    def poll(self) -> None:
        """The application polled: the ``max.poll.interval.ms`` timer starts again."""
        self.last_poll = time.monotonic()

    def received(self) -> None:
        """The coordinator answered for this generation: the session is alive."""
        self.last_received = time.monotonic()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run(), name=f"heartbeat {self.member.group_id}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        member, config = self.member, self.config
        interval = config.heartbeat_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            if not member.stable:
                continue
            now = time.monotonic()
            if now - self.last_poll > config.max_poll_interval_ms / 1000:
                logger.warning("group %s: no poll within max.poll.interval.ms (%d ms); leaving the group",
                               member.group_id, config.max_poll_interval_ms)
                await member.maybe_leave_group("consumer poll timeout has expired")
                continue
            if now - self.last_received > config.session_timeout_ms / 1000:
                self.link.mark_unknown("no successful heartbeat within session.timeout.ms")
            try:
                await self.beat()
            except (KafkaError, Retry) as exc:
                logger.info("group %s: heartbeat failed: %s", member.group_id, exc)

    async def beat(self) -> None:
        """One Heartbeat for the current generation, and what its answer means."""
        member = self.member
        generation = member.current_generation
        instance_id = self.config.group_instance_id

        def request(version: int) -> HeartbeatRequest:
            return HeartbeatRequest(
                group_id=member.group_id, generation_id=generation.generation_id, member_id=generation.member_id,
                group_instance_id=instance_id if version >= 3 else None)

        await self.link.ensure()
        response, _ = await self.link.send(HeartbeatRequest.API_KEY, request, HeartbeatRequest.VALID_VERSIONS)
        assert isinstance(response, HeartbeatResponse)
        error = ErrorCode.from_code(response.error_code)
        if generation != member.current_generation:
            return  # answered for a generation that is over
        if error is ErrorCode.NONE:
            self.received()
        elif error is ErrorCode.REBALANCE_IN_PROGRESS:
            self.received()
            member.request_rejoin("the group is rebalancing")
        elif error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
            member.reset_generation(f"heartbeat: {error.name}", keep_member_id=error is ErrorCode.ILLEGAL_GENERATION)
        elif error is ErrorCode.FENCED_INSTANCE_ID:
            member.reset_generation("heartbeat: FENCED_INSTANCE_ID", keep_member_id=False)
            member.fence(KafkaError(error, f"group.instance.id {instance_id!r} is used by another member"))
        elif error in COORDINATOR_GONE:
            self.link.mark_unknown(error.name)
