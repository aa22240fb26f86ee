"""ZkAdminManager: creating, growing and deleting topics in a ZooKeeper cluster.

Kafka's ``ZkAdminManager`` and ``AdminZkClient``: the broker that takes a CreateTopics,
CreatePartitions or DeleteTopics request (the controller, since others answer
NOT_CONTROLLER; any broker for Metadata's auto-creation and the offsets topic) validates
it, places the replicas on the live brokers it knows from the controller's
UpdateMetadata, and writes ZooKeeper. It never touches a log or a partition: the
controller sees the new znodes, elects leaders and tells the brokers (LeaderAndIsr), and
only then do the partitions exist anywhere. So a topic just created answers
LEADER_NOT_AVAILABLE for a moment, as in Kafka.

Invariants (who writes what):

- A topic's config znode is written before its assignment znode (Kafka's order, "not
  transactional"): the controller, triggered by the assignment, always finds the config.
- The assignment znode is created, never overwritten, by creation (NodeExists →
  TOPIC_ALREADY_EXISTS); growth rewrites it conditionally on the version read, so two
  concurrent CreatePartitions cannot both win.
- Deletion only marks the topic (``/admin/delete_topics/<t>``); the controller deletes.

The calls block on ZooKeeper (a loopback round trip or two, milliseconds) and are made
from the event loop, as the single-node AdminManager's disk writes are: they are rare
admin operations, and their callers (three handlers and the group coordinator) are
synchronous.

A replication factor may be anything from 1 to the number of live brokers (Kafka's
INVALID_REPLICATION_FACTOR and words beyond, from the placement); a manual assignment
names live brokers only and gives every partition the same number of replicas.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from strom.broker.metadata_cache import (
    MetadataCache,
    TopicError,
    TopicMetadata,
    validate_topic_name,
)
from strom.cluster.replica_assignment import (
    BrokerPlacement,
    ReplicaAssignmentError,
    assign_new_partitions,
    assign_replicas_to_brokers,
)
from strom.cluster.zk_client import KafkaZkClient, TopicExistsError
from strom.cluster.zk_data import TopicAssignment, new_kafka_uuid
from strom.protocol.error_codes import ErrorCode
from strom.storage.config import LogConfig
from strom.storage.errors import StorageError

logger = logging.getLogger(__name__)

# How often a CreateTopics/CreatePartitions waiting for its leaders looks at the metadata cache.
LEADER_POLL_S = 0.005


class ZkAdminManager:
    def __init__(self, zk: KafkaZkClient, metadata: MetadataCache, default_config: Callable[[], LogConfig],
                 live_brokers: Callable[[], Sequence[BrokerPlacement]], default_replication_factor: int) -> None:
        self.zk = zk
        self.metadata = metadata
        self._default_config = default_config
        self._live_brokers = live_brokers
        self.default_replication_factor = default_replication_factor

    def load(self) -> None:
        """Nothing to load: in a cluster the topic table comes from the controller."""

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     validate_only: bool = False, replication_factor: int = -1,
                     assignment: Mapping[int, Sequence[int]] | None = None) -> TopicMetadata:
        """Validate and place a new topic, then write its config and assignment znodes."""
        validate_topic_name(name)
        self._check_session()
        configs = dict(configs or {})
        try:
            self._default_config().with_overrides(configs)
        except StorageError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if assignment:
            replicas = self._checked_assignment(assignment, 0)
        else:
            if partitions < 1:
                raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            factor = self.default_replication_factor if replication_factor == -1 else replication_factor
            replicas = self._place(lambda brokers: assign_replicas_to_brokers(brokers, partitions, factor))
        if self.zk.topic_exists(name):
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        topic = TopicMetadata(name, new_kafka_uuid(), len(replicas))
        if validate_only:
            return topic
        try:
            self.zk.create_topic(name, TopicAssignment(topic.topic_id, replicas), configs)
        except TopicExistsError:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
        logger.info("created topic %s with %d partitions (id %s): %s", name, len(replicas), topic.topic_id,
                    replicas)
        return topic

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignment: Sequence[Sequence[int]] | None = None) -> TopicMetadata:
        """Grow a topic to ``count`` partitions: a conditional rewrite of its assignment."""
        self._check_session()
        current, version = self.zk.get_topic_assignment_with_version(name)
        if current is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        existing = dict(current.partitions)
        if count <= len(existing):
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {len(existing)} partitions, which is higher than the "
                             f"requested {count}." if count < len(existing) else
                             f"Topic already has {len(existing)} partitions.")
        if assignment is not None:
            if len(assignment) != count - len(existing):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Increasing the number of partitions by {count - len(existing)} but "
                                 f"{len(assignment)} assignments provided.")
            added = self._checked_assignment(dict(enumerate(assignment)), len(existing))
        else:
            added = self._place(lambda brokers: assign_new_partitions(name, existing, brokers, count))
        grown = TopicMetadata(name, current.topic_id, count)
        if validate_only:
            return grown
        if not self.zk.set_topic_assignment_if_version(
                name, TopicAssignment(current.topic_id, {**existing, **added}), version):
            raise TopicError(ErrorCode.REASSIGNMENT_IN_PROGRESS,
                             f"Topic {name} changed while its partitions were being added; try again.")
        logger.info("topic %s grows to %d partitions: %s", name, count, added)
        return grown

    def delete_topic(self, name: str) -> TopicMetadata:
        """Mark the topic for deletion; the controller deletes it (StopReplica, then the znodes)."""
        self._check_session()
        topic = self.metadata.get(name)
        if topic is None and not self.zk.topic_exists(name):
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        self.zk.mark_topic_for_deletion(name)
        logger.info("topic %s marked for deletion", name)
        return topic or TopicMetadata(name, new_kafka_uuid(), 0)

    async def wait_for_leaders(self, wanted: Mapping[str, int], timeout_ms: int) -> set[str]:
        """Kafka's DelayedCreatePartitions: wait until every partition of each topic (name ->
        partition count) has a leader in this broker's metadata (the controller's
        UpdateMetadata), up to ``timeout_ms``; the topics still waiting then."""
        deadline = time.monotonic() + max(timeout_ms, 0) / 1000
        waiting = dict(wanted)
        while True:
            waiting = {topic: count for topic, count in waiting.items() if not self._led(topic, count)}
            if not waiting or time.monotonic() >= deadline:
                return set(waiting)
            await asyncio.sleep(LEADER_POLL_S)

    def _led(self, topic: str, partitions: int) -> bool:
        for index in range(partitions):
            state = self.metadata.partition_state(topic, index)
            if state is None or state.leader < 0:
                return False
        return True

    def _check_session(self) -> None:
        """Without a ZooKeeper session, refuse at once rather than block the loop in kazoo's retries."""
        if not self.zk.connected:
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR, "not connected to ZooKeeper")

    # -- placement -----------------------------------------------------------------------
    def _place(self, assign: Callable[[Sequence[BrokerPlacement]], dict[int, tuple[int, ...]]]
               ) -> dict[int, tuple[int, ...]]:
        brokers = self._live_brokers()
        try:
            return assign(brokers)
        except ReplicaAssignmentError as exc:
            raise TopicError(ErrorCode(exc.error_code or ErrorCode.UNKNOWN_SERVER_ERROR), str(exc)) from None

    def _checked_assignment(self, assignment: Mapping[int, Sequence[int]], first: int
                            ) -> dict[int, tuple[int, ...]]:
        """A manual assignment (Kafka's validateReplicaAssignment): live brokers, no repeats."""
        live = {broker.id for broker in self._live_brokers()}
        placed: dict[int, tuple[int, ...]] = {}
        factors = set()
        for offset, (_, replicas) in enumerate(sorted(assignment.items())):
            if not replicas:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Replica list cannot be empty.")
            if len(set(replicas)) != len(replicas):
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Duplicate brokers not allowed in replica assignment: {list(replicas)}.")
            unknown = sorted(set(replicas) - live)
            if unknown:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker(s) in replica assignment: {unknown}.")
            factors.add(len(replicas))
            placed[first + offset] = tuple(replicas)
        if len(factors) > 1:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "All partitions should have the same number of replicas.")
        return placed
