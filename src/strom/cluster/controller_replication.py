"""The controller's replication events: controlled shutdown, AlterPartition, unclean election.

A base class of ``Controller`` (strom.cluster.controller), kept apart so each file stays
readable; it runs on the controller's one event task like every handler there and uses
the controller's context, ZooKeeper client and request batches (declared below). The
rules are Kafka 3.9's ZooKeeper-mode controller's:

- Controlled shutdown (``doControlledShutdown``): the broker joins the shutting-down set;
  each partition it leads that has another replica gets the first in-sync replica that is
  not shutting down (leader epoch + 1, the shutting-down brokers leave the ISR), told to
  every replica by LeaderAndIsr; where it follows, it gets StopReplica (keeping its log)
  and leaves the ISR (``OfflineReplica``: leader epoch + 1, the last member stays). The
  answer lists what it still leads (no eligible successor), and the broker asks again.
- AlterPartition: checked by ``strom.cluster.alter_partition``, written fenced and
  conditional on the partition epoch, then UpdateMetadata to every broker; the leader
  learns the new state from the answer.
- Unclean election is decided per topic (``/config/topics/<t>``, else the broker's
  ``unclean.leader.election.enable``), read only for partitions with no live in-sync
  replica, as Kafka does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kazoo.exceptions import BadVersionError

from strom.cluster import alter_partition
from strom.cluster.controller_channel import ControllerRequestBatch
from strom.cluster.controller_context import ControllerContext
from strom.cluster.leader_election import elect_for_controlled_shutdown, remove_replica_from_isr
from strom.cluster.zk_client import KafkaZkClient
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_partition_request import AlterPartitionRequest
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger("strom.cluster.controller")


@dataclass(slots=True)
class ControllerEvent:
    """One thing for the controller to handle; ``done`` answers a waiting request, with
    ``not_controller`` if this broker turns out not to be the controller."""

    kind: str
    topic: str = ""
    args: tuple[Any, ...] = ()
    done: asyncio.Future[Any] | None = field(default=None, repr=False)
    not_controller: Any = field(default=None, repr=False)


class ReplicationEvents:
    """Controlled shutdown, AlterPartition and unclean election; see the module docstring."""

    broker_id: int
    zk: KafkaZkClient
    context: ControllerContext
    _loop: asyncio.AbstractEventLoop | None
    _unclean_default: Callable[[], bool]

    @property
    def is_active(self) -> bool:
        raise NotImplementedError

    def put(self, event: ControllerEvent) -> None:
        raise NotImplementedError

    def _batch(self) -> ControllerRequestBatch:
        raise NotImplementedError

    async def _write_states(self, updates: dict[TopicPartition, LeaderAndIsr]) -> dict[TopicPartition, Exception]:
        raise NotImplementedError

    async def _send_leadership(self, partitions: Iterable[TopicPartition], only_to: set[int] | frozenset[int] | None,
                               *, is_new: bool = False) -> None:
        raise NotImplementedError

    def _send_update_metadata(self, brokers: Iterable[int], partitions: set[TopicPartition]) -> None:
        raise NotImplementedError

    async def _elect_offline(self, partitions: Iterable[TopicPartition], *, take_dead_leaders_offline: bool = True
                             ) -> None:
        raise NotImplementedError

    # -- controlled shutdown ------------------------------------------------------------
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int
                                  ) -> tuple[ErrorCode, tuple[TopicPartition, ...]]:
        """ControlledShutdown (7), answered by the active controller: (error, partitions still led)."""
        assert self._loop is not None
        done: asyncio.Future[tuple[ErrorCode, tuple[TopicPartition, ...]]] = self._loop.create_future()
        self.put(ControllerEvent("controlled_shutdown", args=(broker_id, broker_epoch), done=done,
                                 not_controller=(ErrorCode.NOT_CONTROLLER, ())))
        return await done

    async def _on_controlled_shutdown(self, event: ControllerEvent) -> None:
        broker_id, broker_epoch = event.args
        assert event.done is not None
        ctx = self.context
        if not self.is_active:
            event.done.set_result((ErrorCode.NOT_CONTROLLER, ()))
            return
        current = ctx.live_or_shutting_down_broker(broker_id)
        if current is None:
            event.done.set_result((ErrorCode.BROKER_NOT_AVAILABLE, ()))
            return
        if broker_epoch != -1 and broker_epoch < current.epoch:
            event.done.set_result((ErrorCode.STALE_BROKER_EPOCH, ()))
            return
        ctx.shutting_down_broker_ids.add(broker_id)
        # Kafka's partitionsToActOn: with another replica, a known state, not being deleted.
        act_on = {tp for tp in ctx.partitions_on_broker(broker_id)
                  if len(ctx.partition_replica_assignment(tp)) > 1 and not ctx.is_topic_queued_up_for_deletion(tp[0])
                  and ctx.partition_leadership_info(tp) is not None}
        led = {tp for tp in act_on if self._leader_and_isr(tp).leader == broker_id}
        live_or_shutting_down, shutting_down = ctx.live_or_shutting_down_broker_ids, frozenset(ctx.shutting_down_broker_ids)
        moves: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in led:
            result = elect_for_controlled_shutdown(self._leader_and_isr(tp), ctx.partition_replica_assignment(tp),
                                                   live_or_shutting_down, shutting_down)
            if result.leader_and_isr is not None:
                moves[tp] = result.leader_and_isr
        failed = await self._write_states(moves)
        await self._send_leadership(set(moves) - set(failed), live_or_shutting_down)
        # Where it follows: StopReplica (keep the log), then out of the ISR (OfflineReplica).
        followed = act_on - led
        batch = self._batch()
        for tp in sorted(followed):
            batch.add_stop_replica([broker_id], tp, delete=False)
        batch.send_requests_to_brokers(ctx.epoch)
        shrinks = {tp: state for tp in followed
                   if (state := remove_replica_from_isr(self._leader_and_isr(tp), broker_id)) is not None}
        failed = await self._write_states(shrinks)
        await self._send_leadership(set(shrinks) - set(failed), live_or_shutting_down - {broker_id})
        remaining = tuple(sorted(ctx.partition_leaders_on_broker(broker_id)))
        logger.info("controller: broker %d shutting down; %d leaders moved, %d still led", broker_id, len(moves),
                    len(remaining))
        event.done.set_result((ErrorCode.NONE, remaining))

    def _leader_and_isr(self, tp: TopicPartition) -> LeaderAndIsr:
        state = self.context.partition_leader_and_isr(tp)
        assert state is not None, tp
        return state

    # -- AlterPartition ------------------------------------------------------------------
    async def alter_partition(self, request: AlterPartitionRequest, version: int) -> AlterPartitionResponse:
        """AlterPartition (56), answered by the active controller (``alter_partition``'s rules)."""
        assert self._loop is not None
        done: asyncio.Future[AlterPartitionResponse] = self._loop.create_future()
        self.put(ControllerEvent("alter_partition", args=(request, version), done=done,
                                 not_controller=AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)))
        return await done

    async def _on_alter_partition(self, event: ControllerEvent) -> None:
        request, version = event.args
        assert event.done is not None and isinstance(request, AlterPartitionRequest)
        ctx = self.context
        if not self.is_active:
            event.done.set_result(event.not_controller)
            return
        if ctx.live_broker_epochs.get(request.broker_id) != request.broker_epoch:
            logger.info("controller: AlterPartition from broker %d with stale broker epoch %d ignored",
                        request.broker_id, request.broker_epoch)
            event.done.set_result(AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH))
            return
        changes, unknown = alter_partition.requested_changes(request, version, ctx.topic_name)
        outcomes: dict[TopicPartition, alter_partition.Outcome] = {}
        writes: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, change in changes.items():
            current = ctx.partition_leader_and_isr(tp)
            outcome = alter_partition.check_isr_change(request.broker_id, version, current, change, ctx.live_broker_ids)
            if isinstance(outcome, LeaderAndIsr) and outcome != current:
                writes[tp] = outcome
            else:
                outcomes[tp] = outcome
        failed = await self._write_states(writes)
        for tp in writes:
            error = failed.get(tp)
            outcomes[tp] = (self._leader_and_isr(tp) if error is None else ErrorCode.INVALID_UPDATE_VERSION
                            if isinstance(error, BadVersionError) else ErrorCode.UNKNOWN_SERVER_ERROR)
        if writes:
            logger.info("controller: ISR of %s changed by broker %d", sorted(set(writes) - set(failed)), request.broker_id)
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, set(changes) & ctx.partitions_with_leaders)
        event.done.set_result(alter_partition.response(version, outcomes, unknown, ctx.topic_ids))

    # -- unclean leader election -------------------------------------------------------------
    def enable_topic_unclean_leader_election(self, topic: str) -> None:
        """The topic's ``unclean.leader.election.enable`` became true: elect where nobody could."""
        self.put(ControllerEvent("unclean_enabled", topic))

    async def _on_unclean_enabled(self, event: ControllerEvent) -> None:
        ctx = self.context
        await self._elect_offline({tp for tp in ctx.partitions_with_offline_leader if tp[0] == event.topic})

    async def _unclean_allowed(self, topics: set[str]) -> set[str]:
        """Topics whose unclean election is on: the topic's config in ZooKeeper, else the broker's
        (Kafka reads it at each such election); a topic whose config cannot be read is off."""
        if not topics:
            return set()
        default = self._unclean_default()

        def read() -> set[str]:
            allowed = set()
            for topic in topics:
                try:
                    value = self.zk.get_topic_config(topic).get("unclean.leader.election.enable")
                except Exception as exc:
                    logger.warning("controller: topic %s's config unreadable (%s): no unclean election", topic, exc)
                    continue
                if (default if value is None else value.strip().lower() == "true"):
                    allowed.add(topic)
            return allowed
        return await asyncio.to_thread(read)

