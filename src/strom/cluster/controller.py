"""Controller: Kafka's ZooKeeper-mode controller, one event at a time on the broker's loop.

Every broker runs one; at most one is *active*, the one whose election multi created the
ephemeral ``/controller`` and bumped ``/controller_epoch``. The active controller places
leaders and tells brokers (LeaderAndIsr, UpdateMetadata, StopReplica through the
``ControllerChannelManager``); the others only watch ``/controller`` to stand for
election when it goes.

Invariants (who writes what, which epoch fences it):

- Every ZooKeeper write of the controller is a multi with ``check(/controller_epoch,
  epoch_zk_version)`` (``KafkaZkClient``): once another broker has won an election, a
  paused ex-controller cannot write anything. A failed check raises
  ``ControllerMovedError`` and the controller resigns: it forgets its context, stops its
  channel and watches, and waits for ``/controller`` to change.
- Partition state znodes are written only here, each conditionally on the version last
  read (the partition epoch); the leader epoch only goes up, by one per leadership change.
- Every control request carries this controller's epoch (brokers refuse older ones,
  STALE_CONTROLLER_EPOCH) and the target broker's epoch (the czxid of its registration;
  brokers refuse requests meant for an earlier incarnation, STALE_BROKER_EPOCH).
- A broker that registers (new, or bounced: same id, new czxid) gets UpdateMetadata before
  any LeaderAndIsr, so it knows the live brokers first.
- ZooKeeper events (kazoo's threads) are only queued; this class's state is touched by
  the one task draining the queue, so handlers see a consistent context and never race.
  Handlers re-read ZooKeeper and diff against the context (watches coalesce: state, not
  events, is what counts).

Replication (Kafka's ZooKeeper-mode rules):

- Partition leaders change their ISR through AlterPartition, answered here on the queue
  (``alter_partition``'s rules); the controller writes the state and tells every broker
  (UpdateMetadata), never the leader, which learns it from the answer.
- A controlled shutdown moves leadership of each partition the broker leads to another
  in-sync replica (leader epoch + 1), and takes the broker out of the ISR of the others.
- A dead broker leaves every ISR but never empties one (the last member stays, so the
  broker holding every committed record is known); its partitions get the first live
  in-sync replica, or, with ``unclean.leader.election.enable`` (the topic's, else the
  broker's), the first live replica. Otherwise they stay offline (leader -1) until an
  in-sync replica returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable

from strom.cluster.controller_channel import (
    ChannelConfig,
    ControllerChannelManager,
    ControllerRequestBatch,
)
from strom.cluster.controller_context import ControllerContext
from strom.cluster.controller_replication import ControllerEvent, ReplicationEvents
from strom.cluster.leader_election import (
    elect_offline,
    initial_leader_and_isr,
    remove_replica_from_isr,
)
from strom.cluster.zk_client import ControllerMovedError, KafkaZkClient
from strom.cluster.zk_data import (
    BROKER_IDS,
    CONTROLLER,
    DELETE_TOPICS,
    TOPICS,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    topic_path,
)
from strom.protocol.messages.stop_replica_response import StopReplicaResponse
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

ELECTION_RETRY_S = 1.0  # after a failed election or failover, stand again this much later


class Controller(ReplicationEvents):
    def __init__(self, broker_id: int, zk: KafkaZkClient,
                 channel_factory: Callable[[ChannelConfig], ControllerChannelManager] = ControllerChannelManager,
                 *, listener_name: str = "PLAINTEXT", unclean_leader_election_enable: Callable[[], bool] = lambda: False
                 ) -> None:
        self.broker_id = broker_id
        # The broker's unclean.leader.election.enable: what a topic without its own override gets.
        self._unclean_default = unclean_leader_election_enable
        # inter.broker.listener.name of this broker: the controller reaches brokers, and tells
        # them their leaders' endpoints, on the listener its own broker uses (as Kafka does).
        self.listener_name = listener_name
        self.zk = zk
        self.context = ControllerContext()
        self.active_controller_id = -1
        self._channel_factory = channel_factory
        self._channel: ControllerChannelManager | None = None
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._watches_live = False  # a term's watches hand events on only while it lasts
        self._term = 0
        # Topics being deleted: the (partition, replica) StopReplica answers still awaited.
        self._pending_deletion: dict[str, set[tuple[TopicPartition, int]]] = {}

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.broker_id and self._channel is not None

    # -- lifecycle -----------------------------------------------------------------------
    async def startup(self) -> None:
        """Watch ``/controller`` and stand for election (Kafka's ``Startup`` event)."""
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.create_task(self._run(), name="controller")
        await asyncio.to_thread(self.zk.watch_data, CONTROLLER, self._controller_changed)
        self.put(ControllerEvent("elect"))

    async def shutdown(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._resign()

    def put(self, event: ControllerEvent) -> None:
        """Queue an event; safe from any thread (kazoo's callbacks call it)."""
        loop = self._loop
        if loop is None:
            return
        if loop.is_closed():
            return
        loop.call_soon_threadsafe(self._queue.put_nowait, event)

    async def _run(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except ControllerMovedError as exc:
                logger.warning("controller %d: a write was fenced (%s); resigning", self.broker_id, exc)
                await self._resign()
                self.put(ControllerEvent("elect"))
                if event.done is not None and not event.done.done():
                    event.done.set_result(event.not_controller)
            except Exception as exc:  # keep the controller alive; Kafka logs and goes on too
                logger.exception("controller %d: handling %s failed", self.broker_id, event.kind)
                if event.done is not None and not event.done.done():
                    event.done.set_exception(exc)
                if event.kind == "elect":
                    await self._election_failed()

    async def _election_failed(self) -> None:
        """An election or failover that failed half way (ZooKeeper unreachable, say): as Kafka's
        ``triggerControllerMove``, give the role up (delete ``/controller``, fenced, so another
        broker or this one stands again) and try again after a pause, so a broker whose
        ZooKeeper came back does not wait for a watch that will never fire."""
        if self.is_active:
            epoch_zk_version = self.context.epoch_zk_version
            await self._resign()
            self.active_controller_id = -1
            try:
                await asyncio.to_thread(self.zk.delete_controller, epoch_zk_version)
            except Exception as exc:
                logger.warning("controller %d: could not give up /controller: %s", self.broker_id, exc)
        loop = self._loop
        if loop is not None:
            loop.call_later(ELECTION_RETRY_S, self.put_elect)

    async def _process(self, event: ControllerEvent) -> None:
        handler: Callable[[ControllerEvent], Awaitable[None]] = {
            "elect": self._elect, "expire": self._on_expire, "brokers": self._on_broker_change,
            "topics": self._on_topic_change, "partitions": self._on_partition_modifications,
            "deletions": self._on_topic_deletion, "stop_replica_answered": self._on_stop_replica_answered,
            "controlled_shutdown": self._on_controlled_shutdown, "alter_partition": self._on_alter_partition,
            "unclean_enabled": self._on_unclean_enabled,
        }[event.kind]
        if event.kind in ("elect", "expire", "controlled_shutdown", "alter_partition") or self.is_active:
            await handler(event)

    # -- ZooKeeper watches (kazoo's threads: queue and return) ------------------------------
    def _controller_changed(self, data: bytes | None, stat: object) -> None:
        self.put(ControllerEvent("elect"))

    def _watcher(self, kind: str, topic: str = "") -> Callable[..., bool]:
        term = self._term

        def changed(*_: object) -> bool:
            if not self._watches_live or term != self._term:
                return False  # this term is over: kazoo drops the watch
            self.put(ControllerEvent(kind, topic))
            return True
        return changed

    def put_elect(self) -> None:
        """Stand for election again (after re-registering on a new session)."""
        self.put(ControllerEvent("elect"))

    def session_expired(self) -> None:
        """The ZooKeeper session is gone (ephemerals too): resign at once (``Expire``)."""
        self.put(ControllerEvent("expire"))

    async def _on_expire(self, event: ControllerEvent) -> None:
        await self._resign()
        self.active_controller_id = -1

    # -- election ------------------------------------------------------------------------
    async def _elect(self, event: ControllerEvent) -> None:
        """Kafka's ``elect``: learn who leads, or try to become it; fail over if we win."""
        current = await asyncio.to_thread(self.zk.get_controller_id)
        if current == self.broker_id and not self.is_active:
            # Named but not acting (a resignation ZooKeeper did not hear, or an earlier
            # process's session): give the role back; the deletion's watch elects again.
            if await asyncio.to_thread(self.zk.delete_stale_controller, self.broker_id):
                logger.info("controller %d: deleted a /controller naming this broker, which is not "
                            "acting as controller", self.broker_id)
                self.active_controller_id = -1
                return
            current = await asyncio.to_thread(self.zk.get_controller_id)
        if current is not None:
            if current != self.broker_id and self.is_active:
                logger.info("controller %d: broker %d is the controller now; resigning", self.broker_id, current)
                await self._resign()
            self.active_controller_id = current
            return
        try:
            epoch, epoch_zk_version = await asyncio.to_thread(
                self.zk.register_controller_and_increment_epoch, self.broker_id)
        except ControllerMovedError:
            winner = await asyncio.to_thread(self.zk.get_controller_id)
            self.active_controller_id = -1 if winner is None else winner
            return
        self.active_controller_id = self.broker_id
        self.context.reset()
        self.context.epoch, self.context.epoch_zk_version = epoch, epoch_zk_version
        logger.info("broker %d is the controller, epoch %d", self.broker_id, epoch)
        await self._on_controller_failover()

    async def _on_controller_failover(self) -> None:
        """Read the cluster, tell every broker, elect what needs a leader (``onControllerFailover``)."""
        self._term += 1
        self._watches_live = True
        zk = self.zk
        ctx = self.context
        # Watches first, then the reads, so no change between them is missed.
        for path, kind in ((BROKER_IDS, "brokers"), (TOPICS, "topics"), (DELETE_TOPICS, "deletions")):
            await asyncio.to_thread(zk.watch_children, path, self._watcher(kind))
        brokers = await asyncio.to_thread(zk.get_all_brokers)
        ctx.set_live_brokers(brokers.values())
        topics = await asyncio.to_thread(zk.get_all_topics)
        ctx.set_all_topics(topics)
        assignments = await asyncio.to_thread(zk.get_topic_assignments, topics)
        for topic, assignment in assignments.items():
            ctx.add_topic(topic, assignment)
            await asyncio.to_thread(zk.watch_data, topic_path(topic), self._watcher("partitions", topic))
        states = await asyncio.to_thread(zk.get_partition_states, ctx.all_partitions)
        for tp, state in states.items():
            ctx.put_partition_leadership_info(tp, state)
        self._channel = self._channel_factory(ChannelConfig(controller_id=self.broker_id, listener_name=self.listener_name))
        for broker in ctx.live_or_shutting_down_brokers:
            self._channel.add_broker(broker)
        # Brokers learn the live brokers and every partition first, then their leadership.
        batch = self._batch()
        batch.add_update_metadata(ctx.live_or_shutting_down_broker_ids, ctx.all_partitions)
        batch.send_requests_to_brokers(ctx.epoch)
        new = {tp for tp in ctx.all_partitions if ctx.partition_leadership_info(tp) is None}
        await self._create_partition_states(new)
        await self._elect_offline(ctx.partitions_with_offline_leader)
        await self._send_leadership(ctx.all_partitions, ctx.live_or_shutting_down_broker_ids)
        ctx.queue_topic_deletion(await asyncio.to_thread(zk.get_topic_deletions))
        await self._resume_deletions()

    async def _resign(self) -> None:
        """Forget the term (``onControllerResignation``): watches, channel, context."""
        self._watches_live = False
        self._term += 1
        channel, self._channel = self._channel, None
        if channel is not None:
            await channel.shutdown()
        self.context.reset()
        self._pending_deletion.clear()

    # -- brokers -------------------------------------------------------------------------
    async def _on_broker_change(self, event: ControllerEvent) -> None:
        """Joins, leaves and bounces (same id, new czxid: KIP-380), as ``processBrokerChange``."""
        ctx = self.context
        current = await asyncio.to_thread(self.zk.get_all_brokers)
        known = {b.id: b for b in ctx.live_or_shutting_down_brokers}
        new = [b for i, b in current.items() if i not in known]
        dead = [i for i in known if i not in current]
        bounced = [b for i, b in current.items() if i in known and b.epoch != known[i].epoch]
        if not (new or dead or bounced):
            return
        logger.info("controller: brokers joined %s, left %s, bounced %s",
                    [b.id for b in new], dead, [b.id for b in bounced])
        assert self._channel is not None
        gone = dead + [b.id for b in bounced]
        for broker_id in gone:
            await self._channel.remove_broker(broker_id)
        ctx.remove_live_brokers(gone)
        ctx.shutting_down_broker_ids.difference_update(gone)
        if gone:
            await self._on_brokers_failure(gone)
        joined = new + bounced
        if joined:
            ctx.add_live_brokers(joined)
            for broker in joined:
                self._channel.add_broker(broker)
            await self._on_brokers_startup([b.id for b in joined])

    async def _on_brokers_failure(self, dead: list[int]) -> None:
        """``onReplicasBecomeOffline``: elect where the leader is gone, then the dead replicas
        leave every ISR (the last member stays), each change one leader epoch up."""
        ctx = self.context
        offline = ctx.partitions_with_offline_leader
        await self._elect_offline(offline, take_dead_leaders_offline=False)  # the loop below does it
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for broker_id in dead:
            for tp in ctx.partitions_on_broker(broker_id):
                current = ctx.partition_leader_and_isr(tp)
                if current is None or ctx.is_topic_queued_up_for_deletion(tp[0]):
                    continue
                changed = remove_replica_from_isr(updates.get(tp, current), broker_id)
                if changed is not None:
                    updates[tp] = changed
        await self._write_states(updates)
        live = ctx.live_or_shutting_down_broker_ids
        await self._send_leadership(set(updates), live)
        self._send_update_metadata(live, offline)

    async def _on_brokers_startup(self, joined: list[int]) -> None:
        """``onBrokerStartup``: full metadata to the newcomers first, the new broker list to all,
        then their replicas' leadership, then elections that were waiting for them."""
        ctx = self.context
        batch = self._batch()
        batch.add_update_metadata(joined, ctx.all_partitions)
        batch.send_requests_to_brokers(ctx.epoch)
        others = ctx.live_or_shutting_down_broker_ids - set(joined)
        self._send_update_metadata(others, set())
        replicas = set().union(*(ctx.partitions_on_broker(b) for b in joined))
        await self._send_leadership(replicas, set(joined))
        await self._elect_offline(ctx.partitions_with_offline_leader)
        await self._create_partition_states(
            {tp for tp in ctx.all_partitions if ctx.partition_leadership_info(tp) is None})
        await self._resume_deletions()

    # -- topics --------------------------------------------------------------------------
    async def _on_topic_change(self, event: ControllerEvent) -> None:
        ctx = self.context
        topics = await asyncio.to_thread(self.zk.get_all_topics)
        new = topics - ctx.all_topics
        removed = ctx.all_topics - topics
        for topic in removed:  # deleted behind our back: forget it
            ctx.remove_topic(topic)
        ctx.set_all_topics(topics)
        if not new:
            return
        assignments = await asyncio.to_thread(self.zk.get_topic_assignments, new)
        created: set[TopicPartition] = set()
        for topic, assignment in assignments.items():
            ctx.add_topic(topic, assignment)
            created |= ctx.partitions_for_topic(topic)
            await asyncio.to_thread(self.zk.watch_data, topic_path(topic), self._watcher("partitions", topic))
        logger.info("controller: new topics %s", sorted(new))
        await self._create_partition_states(created)

    async def _on_partition_modifications(self, event: ControllerEvent) -> None:
        """A topic's assignment grew (CreatePartitions): create the new partitions."""
        ctx = self.context
        topic = event.topic
        if topic not in ctx.all_topics or ctx.is_topic_queued_up_for_deletion(topic):
            return
        assignments = await asyncio.to_thread(self.zk.get_topic_assignments, {topic})
        assignment = assignments.get(topic)
        if assignment is None:
            return
        known = ctx.partitions_for_topic(topic)
        added = {(topic, p) for p in assignment.partitions} - known
        for tp in added:
            ctx.update_partition_replica_assignment(tp, assignment.partitions[tp[1]])
        if added:
            logger.info("controller: topic %s grows by %s", topic, sorted(p for _, p in added))
            await self._create_partition_states(added)

    async def _on_topic_deletion(self, event: ControllerEvent) -> None:
        ctx = self.context
        requested = await asyncio.to_thread(self.zk.get_topic_deletions)
        unknown = {t for t in requested if t not in ctx.all_topics}
        if unknown:  # nothing to delete: just clear the marks (Kafka does the same)
            await asyncio.to_thread(self.zk.delete_topic_deletion_flags, unknown, ctx.epoch_zk_version)
        ctx.queue_topic_deletion(requested - unknown)
        await self._resume_deletions()

    async def _resume_deletions(self) -> None:
        """Start deleting each queued topic whose replicas are all live (``TopicDeletionManager``).

        Brokers first forget the partitions (UpdateMetadata with leader -2), then every
        replica is told StopReplica(delete); the znodes go once all have answered.
        """
        ctx = self.context
        live = ctx.live_or_shutting_down_broker_ids
        for topic in sorted(ctx.topics_to_be_deleted - ctx.topics_with_deletion_started):
            assignment = ctx.partition_replica_assignment_for_topic(topic)
            pending = {(tp, r) for tp, replicas in assignment.items() for r in replicas}
            if not {r for _, r in pending} <= live:
                continue  # a replica is down: wait for it (deletion resumes on its return)
            ctx.begin_topic_deletion([topic])
            self._pending_deletion[topic] = pending
            batch = self._batch()
            batch.add_update_metadata(live, assignment)  # leader -2: the topic is queued for deletion
            for tp, replicas in assignment.items():
                batch.add_stop_replica(replicas, tp, delete=True)
            batch.send_requests_to_brokers(ctx.epoch)
            if not self._pending_deletion[topic]:
                await self._complete_deletion(topic)

    def _stop_replica_answered(self, broker_id: int, response: StopReplicaResponse,
                               deleted: frozenset[TopicPartition]) -> None:
        """The channel's task: note which deletions the broker did; the event loop sorts it out."""
        if response.error_code:
            errors = {tp: int(response.error_code) for tp in deleted}
        else:
            errors = {tp: 0 for tp in deleted}
            errors.update({(p.topic_name, p.partition_index): int(p.error_code) for p in response.partition_errors
                           if (p.topic_name, p.partition_index) in deleted})
        self.put(ControllerEvent("stop_replica_answered", args=(broker_id, errors)))

    async def _on_stop_replica_answered(self, event: ControllerEvent) -> None:
        broker_id, errors = event.args
        for topic, pending in list(self._pending_deletion.items()):
            for tp, error in errors.items():
                if tp[0] == topic and not error:
                    pending.discard((tp, broker_id))
            if not pending and topic in self.context.topics_with_deletion_started:
                await self._complete_deletion(topic)

    async def _complete_deletion(self, topic: str) -> None:
        ctx = self.context
        await asyncio.to_thread(self.zk.delete_topic_znodes, topic, ctx.epoch_zk_version)
        await asyncio.to_thread(self.zk.delete_topic_deletion_flags, {topic}, ctx.epoch_zk_version)
        self._pending_deletion.pop(topic, None)
        ctx.remove_topic(topic)
        logger.info("controller: deleted topic %s", topic)

    # -- partition states ----------------------------------------------------------------
    async def _create_partition_states(self, partitions: Iterable[TopicPartition]) -> None:
        """New partitions (``NewPartition -> OnlinePartition``): first live replica leads."""
        ctx = self.context
        live = ctx.live_broker_ids
        by_topic: dict[str, dict[int, LeaderIsrAndControllerEpoch]] = {}
        for tp in sorted(partitions):
            first = initial_leader_and_isr(ctx.partition_replica_assignment(tp), live)
            if first is None:
                logger.warning("controller: no replica of %s-%d is alive; it stays offline", *tp)
                continue
            by_topic.setdefault(tp[0], {})[tp[1]] = LeaderIsrAndControllerEpoch(first, ctx.epoch)
        created: set[TopicPartition] = set()
        for topic, states in by_topic.items():
            failed = await asyncio.to_thread(self.zk.create_partition_states, topic, states, ctx.epoch_zk_version)
            for partition, state in states.items():
                if partition in failed:
                    logger.warning("controller: creating the state of %s-%d failed: %s", topic, partition,
                                   failed[partition])
                    continue
                ctx.put_partition_leadership_info((topic, partition), state)  # a new znode: version 0
                created.add((topic, partition))
        await self._send_leadership(created, None, is_new=True)

    async def _elect_offline(self, partitions: Iterable[TopicPartition], *, take_dead_leaders_offline: bool = True
                             ) -> None:
        """Elect leaders where the leader is gone; no candidate: offline (leader -1, epoch + 1)
        if the leader is dead and ``take_dead_leaders_offline``."""
        ctx = self.context
        live = ctx.live_broker_ids
        states = {tp: state for tp in partitions if (state := ctx.partition_leader_and_isr(tp)) is not None}
        # The topic config is read only where it decides: no in-sync replica alive, another one alive.
        unclean = await self._unclean_allowed({tp[0] for tp, state in states.items()
                                               if not any(r in live for r in state.isr)
                                               and any(r in live for r in ctx.partition_replica_assignment(tp))})
        updates: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, current in states.items():
            result = elect_offline(current, ctx.partition_replica_assignment(tp), live, tp[0] in unclean)
            if result.leader_and_isr is not None:
                updates[tp] = result.leader_and_isr
                if result.leader_and_isr.leader not in current.isr:
                    logger.warning("controller: unclean election of %s-%d: broker %d leads, out of the ISR %s",
                                   tp[0], tp[1], result.leader_and_isr.leader, list(current.isr))
            elif (take_dead_leaders_offline and current.leader != -1
                  and current.leader not in ctx.live_or_shutting_down_broker_ids):
                # Nobody may lead: the dead leader goes (the replica state machine's OfflineReplica).
                offline = remove_replica_from_isr(current, current.leader)
                if offline is not None:
                    updates[tp] = offline
        await self._write_states(updates)
        await self._send_leadership(set(updates), None)

    async def _write_states(self, updates: dict[TopicPartition, LeaderAndIsr]) -> dict[TopicPartition, Exception]:
        """Write new leader/ISR states (fenced, conditional); the context follows what landed.
        Returns the partitions whose write failed (a stale partition epoch: BadVersionError)."""
        if not updates:
            return {}
        ctx = self.context
        written, failed = await asyncio.to_thread(self.zk.update_leader_and_isr, updates, ctx.epoch,
                                                  ctx.epoch_zk_version)
        for tp, state in written.items():
            ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(state, ctx.epoch))
        for tp, error in failed.items():
            logger.warning("controller: writing the state of %s-%d failed: %s", tp[0], tp[1], error)
        return failed

    # -- telling brokers -----------------------------------------------------------------
    def _batch(self) -> ControllerRequestBatch:
        assert self._channel is not None
        return ControllerRequestBatch(self.broker_id, self.context, self._channel, listener_name=self.listener_name,
                                      on_stop_replica_response=self._stop_replica_answered)

    async def _send_leadership(self, partitions: Iterable[TopicPartition], only_to: set[int] | frozenset[int] | None,
                               *, is_new: bool = False) -> None:
        """LeaderAndIsr to each partition's live replicas (or those in ``only_to``), then
        UpdateMetadata to every live broker."""
        ctx = self.context
        partitions = set(partitions)
        if not partitions:
            return
        live = ctx.live_or_shutting_down_broker_ids
        batch = self._batch()
        for tp in sorted(partitions):
            state = ctx.partition_leadership_info(tp)
            if state is None:
                continue
            replicas = ctx.partition_replica_assignment(tp)
            targets = [r for r in replicas if r in live and (only_to is None or r in only_to)]
            # Also queues UpdateMetadata of the partition for every live broker.
            batch.add_leader_and_isr(targets, tp, state, replicas, is_new)
        batch.send_requests_to_brokers(ctx.epoch)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: set[TopicPartition]) -> None:
        batch = self._batch()
        batch.add_update_metadata(set(brokers), partitions)
        batch.send_requests_to_brokers(self.context.epoch)
