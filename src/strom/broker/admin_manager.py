"""AdminManager: creating, growing and deleting topics on one node.

Kafka's ``ZkAdminManager`` and, behind it, the controller: on one node this broker is
its own controller, so the AdminManager validates the request, creates or deletes the
partitions through the ``ReplicaManager`` (which creates their logs), writes each
partition's topic id (``partition.metadata``), and then tells the ``MetadataCache``.
In cluster mode the controller takes this job and the brokers only apply its word;
the handlers keep calling the same three methods.

Invariants: the MetadataCache learns of a topic only after every one of its partition
directories exists with its topic id (a crash between leaves directories that
``load`` adopts at the next start), and forgets it before the first is deleted.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Protocol

from strom.broker.metadata_cache import (
    MetadataCache,
    TopicError,
    TopicMetadata,
    validate_topic_name,
)
from strom.broker.replica_manager import ReplicaManager
from strom.protocol.error_codes import ErrorCode
from strom.storage.errors import StorageError
from strom.storage.log_manager import LogManager
from strom.storage.partition_metadata import read_topic_id, write_topic_id

logger = logging.getLogger(__name__)


class TopicAdmin(Protocol):
    """What handlers and the group coordinator ask of topic administration: this module's
    AdminManager on one node, ``strom.cluster.zk_admin_manager.ZkAdminManager`` in a cluster."""

    def load(self) -> None: ...

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     validate_only: bool = False, replication_factor: int = -1,
                     assignment: Mapping[int, Sequence[int]] | None = None) -> TopicMetadata: ...

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignment: Sequence[Sequence[int]] | None = None) -> TopicMetadata: ...

    def delete_topic(self, name: str) -> TopicMetadata: ...

    async def wait_for_leaders(self, wanted: Mapping[str, int], timeout_ms: int) -> set[str]:
        """Wait until each topic (name -> partition count) has a leader for every partition,
        up to ``timeout_ms``; the topics still without. (Kafka's DelayedCreatePartitions.)"""
        ...


class AdminManager:
    def __init__(self, metadata: MetadataCache, replica_manager: ReplicaManager, log_manager: LogManager) -> None:
        self.metadata = metadata
        self.replica_manager = replica_manager
        self.log_manager = log_manager

    def load(self) -> None:
        """Rebuild the topic table from the partitions the ReplicaManager hosts."""
        counts: dict[str, int] = {}
        for topic, index in list(self.replica_manager.partitions):
            counts[topic] = max(counts.get(topic, 0), index + 1)
        for topic, count in sorted(counts.items()):
            topic_id = read_topic_id(self._partition_dir(topic, 0)) or uuid.uuid4()
            for index in range(count):
                if self.replica_manager.get_partition(topic, index) is None:
                    logger.warning("topic %s lacks partition %d on disk; recreating it", topic, index)
                self._create_partition(topic, index, topic_id)
            self.metadata.update_topic(TopicMetadata(topic, topic_id, count))

    def create_topic(
        self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *, validate_only: bool = False,
        replication_factor: int = -1, assignment: Mapping[int, Sequence[int]] | None = None,
    ) -> TopicMetadata:
        """One node: every partition's one replica is here. The CreateTopics handler refuses
        factors and assignments naming other brokers; internal topics pass theirs (Kafka's
        offsets.topic.replication.factor), which one node cannot honour and ignores, as before."""
        del replication_factor, assignment
        validate_topic_name(name)
        if self.metadata.get(name) is not None:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"{partitions} partitions: need at least 1")
        try:
            self.log_manager.default_config.with_overrides(configs or {})
        except StorageError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        topic = TopicMetadata(name, uuid.uuid4(), partitions)
        if validate_only:
            return topic
        if configs:  # validated above; the LogManager persists the overrides themselves
            self.log_manager.set_topic_config(name, dict(configs))
        for index in range(partitions):
            self._create_partition(name, index, topic.topic_id)
        self.metadata.update_topic(topic)
        logger.info("created topic %s with %d partitions (id %s)", name, partitions, topic.topic_id)
        return topic

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False,
                          assignment: Sequence[Sequence[int]] | None = None) -> TopicMetadata:
        del assignment  # one node: the handler has checked it names this broker only
        topic = self.metadata.get(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        if count <= topic.partitions:
            raise TopicError(
                ErrorCode.INVALID_PARTITIONS,
                f"topic {name!r} has {topic.partitions} partitions; {count} does not add any",
            )
        grown = TopicMetadata(name, topic.topic_id, count)
        if validate_only:
            return grown
        for index in range(topic.partitions, count):
            self._create_partition(name, index, topic.topic_id)
        self.metadata.update_topic(grown)
        return grown

    async def wait_for_leaders(self, wanted: Mapping[str, int], timeout_ms: int) -> set[str]:
        """One node leads what it creates, at once: nothing to wait for."""
        return set()

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self.metadata.remove_topic(name)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        for index in range(topic.partitions):
            self.replica_manager.delete_partition(name, index)
        if self.log_manager.topic_overrides.get(name):
            # A topic made again under this name starts from the broker defaults. (The
            # LogManager has no call to remove the file; an empty override set will do.)
            self.log_manager.set_topic_config(name, {})
        logger.info("deleted topic %s", name)
        return topic

    def _create_partition(self, topic: str, index: int, topic_id: uuid.UUID) -> None:
        self.replica_manager.create_partition(topic, index)
        write_topic_id(self._partition_dir(topic, index), topic_id)

    def _partition_dir(self, topic: str, index: int) -> str:
        return os.path.join(self.log_manager.data_dir, f"{topic}-{index}")
