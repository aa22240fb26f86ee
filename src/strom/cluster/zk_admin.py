"""The znode writes any broker may make (Kafka's AdminZkClient and ZkProducerIdManager).

Part of KafkaZkClient (its base class), kept apart so each module stays one screenful of ideas.
These writes are not controller-fenced: Kafka lets any broker create a topic or change a
config, and the controller reacts to the znodes through its watches.

- Topic creation: ``/config/topics/<t>`` first, then ``/brokers/topics/<t>``, not atomic
  (as Kafka): NodeExists on the assignment is TopicExistsError; a config without an
  assignment is simply overwritten by the next creation attempt.
- Adding partitions: a conditional set on the assignment's version, so two concurrent
  CreatePartitions cannot both extend the same assignment.
- Config changes: set (or create) ``/config/topics/<t>``, then a sequential
  ``/config/changes/config_change_`` node naming ``topics/<t>``; brokers watch the children.
- Producer ids: ``/latest_producer_id_block`` read with its version, the next block written
  conditionally on that version, retried on BadVersion: blocks never overlap across brokers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from strom.cluster import zk_data
from strom.cluster.zk_data import ProducerIdBlock, TopicAssignment
from strom.cluster.zk_errors import (
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
)
from strom.cluster.zk_multi_read import read_many
from strom.protocol.errors import KafkaException

T = TypeVar("T")
ENTITY_WRITE_ATTEMPTS = 10  # conditional writes of one /config/<entity> znode before giving up


def validate_assignment(topic: str, assignment: TopicAssignment) -> None:
    """Kafka's checks before writing an assignment: partitions 0..n-1, each with replicas,
    no broker twice in one partition, one replication factor for all."""
    if not assignment.partitions:
        raise InvalidPartitionsError(f"topic {topic!r}: the number of partitions must be larger than 0")
    if sorted(assignment.partitions) != list(range(len(assignment.partitions))):
        raise InvalidReplicaAssignmentError(
            f"topic {topic!r}: partitions should be a consecutive 0-based integer sequence, got {sorted(assignment.partitions)}")
    factors = {len(replicas) for replicas in assignment.partitions.values()}
    if 0 in factors or len(factors) != 1:
        raise InvalidReplicaAssignmentError(f"topic {topic!r}: every partition needs the same, non-zero number of replicas")
    for partition, replicas in assignment.partitions.items():
        if len(set(replicas)) != len(replicas):
            raise InvalidReplicaAssignmentError(f"topic {topic!r} partition {partition}: duplicate replicas {replicas}")


class AdminZkOperations:
    """Topic creation, partition addition, topic configs, producer id blocks."""

    _zk: KazooClient

    def _call(self, operation: Callable[[], T]) -> T:
        raise NotImplementedError

    def create_topic(self, name: str, assignment: TopicAssignment, configs: Mapping[str, str]) -> None:
        """Write the topic's config, then its assignment; the controller's watch does the rest."""
        validate_assignment(name, assignment)
        data = zk_data.encode_topic_assignment(assignment)

        def create() -> None:
            if self._zk.exists(zk_data.delete_topic_path(name)):
                raise TopicExistsError(f"Topic '{name}' is marked for deletion.")
            existing = self._zk.exists(zk_data.topic_path(name))
            if existing is not None and self._zk.get(zk_data.topic_path(name))[0] != data:
                raise TopicExistsError(f"Topic '{name}' already exists.")  # before touching its config
            self._set_or_create_config(name, configs)
            try:
                self._zk.create(zk_data.topic_path(name), data, makepath=True)
            except NodeExistsError:
                if self._zk.get(zk_data.topic_path(name))[0] != data:  # not a replay of ours
                    raise TopicExistsError(f"Topic '{name}' already exists.") from None
        self._call(create)

    def add_partitions(self, name: str, assignment: TopicAssignment) -> None:
        """Extend the topic's assignment: existing partitions keep their replicas; written only
        if the assignment is still the one this call read (else InvalidPartitionsError)."""
        validate_assignment(name, assignment)
        written: list[bytes] = []  # what an earlier attempt wrote, before its answer was lost

        def extend() -> None:
            path = zk_data.topic_path(name)
            try:
                current_data, stat = self._zk.get(path)
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
            current = zk_data.decode_topic_assignment(name, current_data)
            merged = TopicAssignment(current.topic_id, assignment.partitions)
            data = zk_data.encode_topic_assignment(merged)
            if written and current_data == written[-1]:
                return  # an earlier attempt's write went through
            if len(assignment.partitions) <= len(current.partitions):
                raise InvalidPartitionsError(
                    f"Topic '{name}' already has {len(current.partitions)} partitions; "
                    f"asked for {len(assignment.partitions)}")
            if any(assignment.partitions[p] != replicas for p, replicas in current.partitions.items()):
                raise InvalidReplicaAssignmentError(f"Topic '{name}': existing partitions must keep their replicas")
            written.append(data)
            try:
                self._zk.set(path, data, version=stat.version)
            except BadVersionError:
                raise InvalidPartitionsError(f"Topic '{name}' changed while adding partitions; retry") from None
        self._call(extend)

    def topic_exists(self, name: str) -> bool:
        return bool(self._call(lambda: self._zk.exists(zk_data.topic_path(name))))

    def get_topic_assignment_with_version(self, name: str) -> tuple[TopicAssignment | None, int]:
        """The assignment and its znode version (for ``set_topic_assignment_if_version``);
        (None, -1) if the topic does not exist."""
        def read() -> tuple[TopicAssignment | None, int]:
            try:
                data, stat = self._zk.get(zk_data.topic_path(name))
            except NoNodeError:
                return None, -1
            return zk_data.decode_topic_assignment(name, data), int(stat.version)
        return self._call(read)

    def set_topic_assignment_if_version(self, name: str, assignment: TopicAssignment, version: int) -> bool:
        """Rewrite the assignment only if its znode is still at ``version`` (False otherwise, or
        if the topic is gone): CreatePartitions' guard against a concurrent change."""
        data = zk_data.encode_topic_assignment(assignment)
        attempted: list[bool] = []

        def write() -> bool:
            try:
                attempted.append(True)
                self._zk.set(zk_data.topic_path(name), data, version=version)
                return True
            except BadVersionError:  # a concurrent change, or our own write replayed after a lost answer
                return len(attempted) > 1 and bool(self._zk.get(zk_data.topic_path(name))[0] == data)
            except NoNodeError:
                return False
        return self._call(write)

    def set_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides and announce the change to every broker."""
        def change() -> None:
            if not self._zk.exists(zk_data.topic_path(name)):
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            self._set_or_create_config(name, configs)
            self._zk.create(
                f"{zk_data.CONFIG_CHANGES}/{zk_data.CONFIG_CHANGE_PREFIX}",
                zk_data.encode_config_change(zk_data.topic_entity_path(name)), sequence=True, makepath=True)
        self._call(change)

    def _set_or_create_config(self, name: str, configs: Mapping[str, str]) -> None:
        data = zk_data.encode_topic_config(configs)
        try:
            self._zk.set(zk_data.topic_config_path(name), data)
        except NoNodeError:
            try:
                self._zk.create(zk_data.topic_config_path(name), data, makepath=True)
            except NodeExistsError:
                self._zk.set(zk_data.topic_config_path(name), data)

    def get_topic_config(self, name: str) -> dict[str, str]:
        """The topic's config overrides ({} if it has none)."""
        def read() -> dict[str, str]:
            try:
                return zk_data.decode_topic_config(self._zk.get(zk_data.topic_config_path(name))[0])
            except NoNodeError:
                return {}
        return self._call(read)

    def get_entity_config(self, entity_path: str) -> dict[str, str] | None:
        """``/config/<entity_path>``'s config map (``users/alice``, ``clients/app``, ...); None
        when the znode does not exist."""
        def read() -> dict[str, str] | None:
            try:
                return zk_data.decode_topic_config(self._zk.get(f"{zk_data.CONFIG_ROOT}/{entity_path}")[0])
            except NoNodeError:
                return None
        return self._call(read)

    def update_entity_config(self, entity_path: str, update: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Read-modify-write ``/config/<entity_path>`` and announce it in ``/config/changes``.

        Several kinds of config share one znode (a user's SCRAM credentials and its quotas),
        each writer changing only its own keys: ``update`` gets what the znode holds now and
        returns the new map; the write is conditional on the version read and retried on a
        concurrent change, so no writer loses another's keys (Kafka's ``AdminZkClient``
        ``changeEntityConfig`` reads, merges and writes the same way).
        """
        path = f"{zk_data.CONFIG_ROOT}/{entity_path}"

        def change() -> None:
            for _ in range(ENTITY_WRITE_ATTEMPTS):
                try:
                    data, stat = self._zk.get(path)
                    configs, version = zk_data.decode_topic_config(data), stat.version
                except NoNodeError:
                    configs, version = {}, None
                encoded = zk_data.encode_topic_config(update(dict(configs)))
                try:
                    if version is None:
                        self._zk.create(path, encoded, makepath=True)
                    else:
                        self._zk.set(path, encoded, version=version)
                    break
                except (NodeExistsError, BadVersionError):
                    continue
            else:
                raise ZooKeeperError(f"{path} kept changing while it was written")
            self._zk.create(f"{zk_data.CONFIG_CHANGES}/{zk_data.CONFIG_CHANGE_PREFIX}",
                            zk_data.encode_config_change(entity_path), sequence=True, makepath=True)
        self._call(change)

    def get_config_changes(self, after: int = -1) -> list[tuple[int, str]]:
        """Config change notifications with a sequence number above ``after``, oldest first:
        (sequence, entity path such as ``topics/<t>``)."""
        def read() -> list[tuple[int, str]]:
            try:
                children = self._zk.get_children(zk_data.CONFIG_CHANGES)
            except NoNodeError:
                return []
            sequences = sorted(
                (zk_data.config_change_sequence(child), child)
                for child in children if child.startswith(zk_data.CONFIG_CHANGE_PREFIX))
            found = read_many(self._zk, {sequence: f"{zk_data.CONFIG_CHANGES}/{child}"
                                         for sequence, child in sequences if sequence > after})
            # A notification purged meanwhile is simply absent.
            return [(sequence, zk_data.decode_config_change(data)) for sequence, (data, _) in found.items()]
        return self._call(read)

    def purge_config_changes(self, older_than_ms: int = 15 * 60 * 1000) -> int:
        """Delete notifications created more than ``older_than_ms`` ago (ZooKeeper's ctime), as
        every Kafka broker's ZkNodeChangeNotificationListener does (15 minutes); returns how many."""
        def purge() -> int:
            try:
                children = self._zk.get_children(zk_data.CONFIG_CHANGES)
            except NoNodeError:
                return 0
            paths = [f"{zk_data.CONFIG_CHANGES}/{child}" for child in children
                     if child.startswith(zk_data.CONFIG_CHANGE_PREFIX)]
            stats = [(path, self._zk.exists_async(path)) for path in paths]
            cutoff = time.time() * 1000 - older_than_ms
            old = [path for path, answer in stats if (stat := answer.get()) is not None and stat.ctime < cutoff]
            deletions = [self._zk.delete_async(path) for path in old]
            for answer in deletions:
                with contextlib.suppress(NoNodeError):  # another broker purged it first
                    answer.get()
            return len(old)
        return self._call(purge)

    def mark_topic_for_deletion(self, name: str) -> None:
        """Create ``/admin/delete_topics/<t>``; the controller deletes the topic (idempotent)."""
        def mark() -> None:
            if not self._zk.exists(zk_data.topic_path(name)):
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            with contextlib.suppress(NodeExistsError):
                self._zk.create(zk_data.delete_topic_path(name), None, makepath=True)
        self._call(mark)

    def claim_producer_id_block(self, broker_id: int, block_size: int = zk_data.PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """The next block of producer ids for this broker, (first, last) inclusive."""
        def claim() -> tuple[int, int]:
            while True:
                try:
                    data, stat = self._zk.get(zk_data.PRODUCER_ID_BLOCK)
                except NoNodeError:
                    with contextlib.suppress(NodeExistsError):
                        self._zk.create(zk_data.PRODUCER_ID_BLOCK, None, makepath=True)
                    continue
                current = zk_data.decode_producer_id_block(data)
                start = 0 if current is None else current.block_end + 1
                if start > (1 << 63) - 1 - block_size:
                    raise KafkaException("Have exhausted all producerIds.")
                block = ProducerIdBlock(broker_id, start, start + block_size - 1)
                try:
                    self._zk.set(zk_data.PRODUCER_ID_BLOCK, zk_data.encode_producer_id_block(block), stat.version)
                except BadVersionError:
                    continue  # another broker claimed one first: read again
                return block.block_start, block.block_end
        return self._call(claim)
