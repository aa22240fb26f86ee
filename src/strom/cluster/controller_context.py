"""The controller's memory of the cluster: Kafka's ``ControllerContext``.

What the active controller knows, rebuilt from ZooKeeper when it takes over and kept in
step with its own writes and the watches it handles: the live brokers (with their broker
epochs, the czxid of their registration znodes), the brokers in controlled shutdown, every
topic's id and replica assignment, every partition's leader/ISR as last written, the
topics queued for deletion, and the controller's own epoch with the ``/controller_epoch``
znode version that fences its writes.

Pure and single-owner: it is touched only by the controller's event loop, one event at a
time, so it needs no locks, does no I/O and is tested as plain data. Queries follow
Kafka's names and meanings; in particular a *live* broker is one registered and **not**
shutting down (``live_broker_ids``), while ``live_or_shutting_down_*`` counts both, as
Kafka's ``liveBrokerIds`` and ``liveOrShuttingDownBrokerIds`` do.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from strom.cluster.zk_data import (
    BrokerInfo,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from strom.protocol.topic_partition import TopicPartition

# Kafka's LeaderAndIsr.NoEpoch and EpochDuringDelete: the leader epoch StopReplica carries
# for a partition with no known leadership, and for one whose topic is being deleted.
NO_EPOCH = -1
EPOCH_DURING_DELETE = -2
# KafkaController.InitialControllerEpoch / InitialControllerEpochZkVersion.
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0


@dataclass(frozen=True, slots=True)
class PartitionAndReplica:
    """One replica of one partition (Kafka's ``PartitionAndReplica``)."""

    topic_partition: TopicPartition
    replica: int


class ControllerContext:
    """The active controller's cluster state; see the module docstring."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget everything (on resignation, and before a new term), as Kafka's ``resetContext``."""
        self.epoch = INITIAL_CONTROLLER_EPOCH
        self.epoch_zk_version = INITIAL_CONTROLLER_EPOCH_ZK_VERSION
        self.shutting_down_broker_ids: set[int] = set()
        self._live_brokers: dict[int, BrokerInfo] = {}
        self.all_topics: set[str] = set()
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.topic_names: dict[uuid.UUID, str] = {}
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.topics_to_be_deleted: set[str] = set()
        self.topics_with_deletion_started: set[str] = set()
        self.topics_ineligible_for_deletion: set[str] = set()

    # -- brokers -------------------------------------------------------------------------
    def set_live_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        self._live_brokers.clear()
        self.add_live_brokers(brokers)

    def add_live_brokers(self, brokers: Iterable[BrokerInfo]) -> None:
        for broker in brokers:
            self._live_brokers[broker.id] = broker

    def remove_live_brokers(self, broker_ids: Iterable[int]) -> None:
        for broker_id in broker_ids:
            self._live_brokers.pop(broker_id, None)

    def update_broker_metadata(self, broker: BrokerInfo) -> None:
        """Replace a live broker's registration (new endpoints or rack, same session)."""
        self._live_brokers[broker.id] = broker

    @property
    def live_broker_ids(self) -> frozenset[int]:
        """Registered brokers that are not shutting down: the ones that may lead."""
        return frozenset(self._live_brokers.keys() - self.shutting_down_broker_ids)

    @property
    def live_or_shutting_down_broker_ids(self) -> frozenset[int]:
        return frozenset(self._live_brokers)

    @property
    def live_or_shutting_down_brokers(self) -> tuple[BrokerInfo, ...]:
        """Every registered broker, by id (what UpdateMetadata lists as live)."""
        return tuple(self._live_brokers[broker_id] for broker_id in sorted(self._live_brokers))

    def live_or_shutting_down_broker(self, broker_id: int) -> BrokerInfo | None:
        return self._live_brokers.get(broker_id)

    @property
    def live_broker_epochs(self) -> dict[int, int]:
        """Broker id -> broker epoch (czxid) of every registered broker (``liveBrokerIdAndEpochs``)."""
        return {broker_id: broker.epoch for broker_id, broker in self._live_brokers.items()}

    def broker_epoch(self, broker_id: int) -> int:
        """The broker epoch of a registered broker; ``KeyError`` for an unknown one."""
        return self._live_brokers[broker_id].epoch

    def is_replica_online(self, broker_id: int, topic_partition: TopicPartition,
                          include_shutting_down: bool = False) -> bool:
        """Whether ``broker_id``'s replica of the partition can serve (no log dirs go offline here)."""
        del topic_partition  # Kafka also consults failed log dirs, which Strom does not track
        if include_shutting_down:
            return broker_id in self._live_brokers
        return broker_id in self._live_brokers and broker_id not in self.shutting_down_broker_ids

    # -- topics and assignments ----------------------------------------------------------
    def set_all_topics(self, topics: Iterable[str]) -> None:
        self.all_topics = set(topics)

    def add_topic_id(self, topic: str, topic_id: uuid.UUID) -> None:
        """Record a topic's id; an id that contradicts the known one is a bug, as in Kafka."""
        if topic not in self.all_topics:
            raise ValueError(f"topic {topic} is not contained in all topics.")
        known = self.topic_ids.get(topic)
        if known is not None and known != topic_id:
            raise ValueError(f"topic ID map already contained ID for topic {topic} and new ID "
                             f"{topic_id} did not match existing ID {known}")
        named = self.topic_names.get(topic_id)
        if named is not None and named != topic:
            raise ValueError(f"topic name map already contained ID {topic_id} and new name "
                             f"{topic} did not match existing name {named}")
        self.topic_ids[topic] = topic_id
        self.topic_names[topic_id] = topic

    def add_topic(self, topic: str, assignment: TopicAssignment) -> None:
        """A topic as read from ``/brokers/topics/<topic>``: its id and every partition's replicas."""
        self.all_topics.add(topic)
        self.add_topic_id(topic, assignment.topic_id)
        for partition, replicas in assignment.partitions.items():
            self.update_partition_replica_assignment((topic, partition), replicas)

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.topic_names.get(topic_id)

    def update_partition_replica_assignment(self, topic_partition: TopicPartition,
                                            replicas: Sequence[int]) -> None:
        topic, partition = topic_partition
        self._assignments.setdefault(topic, {})[partition] = tuple(replicas)

    def partition_replica_assignment(self, topic_partition: TopicPartition) -> tuple[int, ...]:
        """The partition's replicas in preference order; empty for an unknown partition."""
        topic, partition = topic_partition
        return self._assignments.get(topic, {}).get(partition, ())

    def partition_replica_assignment_for_topic(self, topic: str) -> dict[TopicPartition, tuple[int, ...]]:
        return {(topic, partition): replicas
                for partition, replicas in sorted(self._assignments.get(topic, {}).items())}

    def partitions_for_topic(self, topic: str) -> set[TopicPartition]:
        return {(topic, partition) for partition in self._assignments.get(topic, {})}

    @property
    def all_partitions(self) -> set[TopicPartition]:
        return {(topic, partition)
                for topic, partitions in self._assignments.items() for partition in partitions}

    def partitions_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions with a replica on ``broker_id``."""
        return {(topic, partition)
                for topic, partitions in self._assignments.items()
                for partition, replicas in partitions.items() if broker_id in replicas}

    def replicas_on_brokers(self, broker_ids: Iterable[int]) -> set[PartitionAndReplica]:
        wanted = set(broker_ids)
        return {PartitionAndReplica((topic, partition), replica)
                for topic, partitions in self._assignments.items()
                for partition, replicas in partitions.items()
                for replica in replicas if replica in wanted}

    def replicas_for_topic(self, topic: str) -> set[PartitionAndReplica]:
        return {PartitionAndReplica((topic, partition), replica)
                for partition, replicas in self._assignments.get(topic, {}).items()
                for replica in replicas}

    def online_and_offline_replicas(self) -> tuple[set[PartitionAndReplica], set[PartitionAndReplica]]:
        """Every replica, split by whether its broker is live (not shutting down)."""
        online: set[PartitionAndReplica] = set()
        offline: set[PartitionAndReplica] = set()
        for topic, partitions in self._assignments.items():
            for partition, replicas in partitions.items():
                for replica in replicas:
                    target = online if self.is_replica_online(replica, (topic, partition)) else offline
                    target.add(PartitionAndReplica((topic, partition), replica))
        return online, offline

    def remove_topic(self, topic: str) -> None:
        """Forget a deleted topic: its id, assignment, leadership and deletion marks."""
        self.topics_to_be_deleted.discard(topic)
        self.topics_with_deletion_started.discard(topic)
        self.topics_ineligible_for_deletion.discard(topic)
        self.all_topics.discard(topic)
        topic_id = self.topic_ids.pop(topic, None)
        if topic_id is not None:
            self.topic_names.pop(topic_id, None)
        for partition in self._assignments.pop(topic, {}):
            self._leadership.pop((topic, partition), None)

    # -- leadership ----------------------------------------------------------------------
    def put_partition_leadership_info(self, topic_partition: TopicPartition,
                                      state: LeaderIsrAndControllerEpoch) -> None:
        self._leadership[topic_partition] = state

    def partition_leadership_info(self, topic_partition: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self._leadership.get(topic_partition)

    @property
    def partitions_leadership_info(self) -> Mapping[TopicPartition, LeaderIsrAndControllerEpoch]:
        return self._leadership

    def partition_leader_and_isr(self, topic_partition: TopicPartition) -> LeaderAndIsr | None:
        state = self._leadership.get(topic_partition)
        return None if state is None else state.leader_and_isr

    def clear_partition_leadership_info(self) -> None:
        self._leadership.clear()

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        """The epoch StopReplica carries: -2 while the topic is queued for deletion, -1 if unknown."""
        if topic_partition[0] in self.topics_to_be_deleted:
            return EPOCH_DURING_DELETE
        state = self._leadership.get(topic_partition)
        return NO_EPOCH if state is None else state.leader_and_isr.leader_epoch

    @property
    def partitions_with_leaders(self) -> set[TopicPartition]:
        """Partitions with a known state, topics queued for deletion excepted."""
        return {tp for tp in self._leadership if tp[0] not in self.topics_to_be_deleted}

    @property
    def partitions_with_offline_leader(self) -> set[TopicPartition]:
        """Partitions whose leader is not live (or is -1), topics queued for deletion excepted."""
        return {tp for tp, state in self._leadership.items()
                if tp[0] not in self.topics_to_be_deleted
                and not self.is_replica_online(state.leader_and_isr.leader, tp)}

    @property
    def online_partitions(self) -> set[TopicPartition]:
        """Partitions whose leader is live, topics queued for deletion excepted."""
        return {tp for tp, state in self._leadership.items()
                if tp[0] not in self.topics_to_be_deleted
                and self.is_replica_online(state.leader_and_isr.leader, tp)}

    def partition_leaders_on_broker(self, broker_id: int) -> set[TopicPartition]:
        """Partitions ``broker_id`` leads that another replica could take over.

        Kafka's ``partitionLeadersOnBroker``, used by controlled shutdown: partitions with a
        single replica are left out, since no election can move them.
        """
        return {tp for tp, state in self._leadership.items()
                if tp[0] not in self.topics_to_be_deleted
                and state.leader_and_isr.leader == broker_id
                and len(self.partition_replica_assignment(tp)) > 1}

    # -- topic deletion ------------------------------------------------------------------
    def queue_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_to_be_deleted.update(topics)

    def begin_topic_deletion(self, topics: Iterable[str]) -> None:
        self.topics_with_deletion_started.update(topics)

    def is_topic_queued_up_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted

    def is_topic_deletion_in_progress(self, topic: str) -> bool:
        return topic in self.topics_with_deletion_started

    def is_topic_eligible_for_deletion(self, topic: str) -> bool:
        return topic in self.topics_to_be_deleted and topic not in self.topics_ineligible_for_deletion
