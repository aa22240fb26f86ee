"""The broker's view of its topics: names, ids, partition counts, and their creation.

On disk, a topic is its partition directories (found by the ``LogManager``) plus, in
each of them, Kafka's ``partition.metadata`` file::

    version: 0
    topic_id: <the topic's UUID, URL-safe base64 without padding, as Kafka writes it>

The topic id is chosen once, at creation, and read back on start, so clients that
address topics by id (Fetch v13+, Metadata v10+) keep working across restarts.
Invariant: every partition of a topic carries the same id; partitions are numbered
0..n-1 with no gaps. In cluster mode this moves to ZooKeeper; the interface stays.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import uuid
from dataclasses import dataclass
from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.storage.errors import StorageError
from strom.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

PARTITION_METADATA: Final = "partition.metadata"
INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_NAME: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: int

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class TopicError(KafkaException):
    """A topic operation refused with a Kafka error code."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message, error_code)


def encode_topic_id(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def decode_topic_id(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def validate_topic_name(name: str) -> None:
    if not _LEGAL_NAME.match(name) or name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")


class MetadataCache:
    """Topics of this broker; the single owner of topic creation and deletion."""

    def __init__(self, log_manager: LogManager) -> None:
        self.log_manager = log_manager
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}

    def load(self) -> None:
        """Rebuild the topic table from the partition directories the LogManager found."""
        counts: dict[str, int] = {}
        for topic, partition in list(self.log_manager.logs):
            counts[topic] = max(counts.get(topic, 0), partition + 1)
        for topic, count in sorted(counts.items()):
            topic_id = self._read_topic_id(topic) or uuid.uuid4()
            for partition in range(count):
                if self.log_manager.get_log(topic, partition) is None:
                    logger.warning("topic %s lacks partition %d on disk; recreating it", topic, partition)
                    self.log_manager.create_log(topic, partition)
                self._write_topic_id(topic, partition, topic_id)
            self._add(TopicMetadata(topic, topic_id, count))

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())

    def get(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def create_topic(
        self, name: str, partitions: int, configs: dict[str, str] | None = None, *, validate_only: bool = False
    ) -> TopicMetadata:
        validate_topic_name(name)
        if name in self._topics:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
        if partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, f"{partitions} partitions: need at least 1")
        try:
            config = self.log_manager.default_config.with_overrides(configs or {})
        except StorageError as exc:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        topic = TopicMetadata(name, uuid.uuid4(), partitions)
        if validate_only:
            return topic
        del config  # validated; the LogManager persists the overrides themselves
        if configs:
            self.log_manager.set_topic_config(name, configs)
        for partition in range(partitions):
            self.log_manager.create_log(name, partition)
            self._write_topic_id(name, partition, topic.topic_id)
        self._add(topic)
        logger.info("created topic %s with %d partitions (id %s)", name, partitions, topic.topic_id)
        return topic

    def create_partitions(self, name: str, count: int, *, validate_only: bool = False) -> TopicMetadata:
        topic = self._topics.get(name)
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
        for partition in range(topic.partitions, count):
            self.log_manager.create_log(name, partition)
            self._write_topic_id(name, partition, topic.topic_id)
        self._add(grown)
        return grown

    def delete_topic(self, name: str) -> TopicMetadata:
        topic = self._topics.pop(name, None)
        if topic is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        self._by_id.pop(topic.topic_id, None)
        for partition in range(topic.partitions):
            self.log_manager.delete_log(name, partition)
        if self.log_manager.topic_overrides.get(name):
            # A topic made again under this name starts from the broker defaults. (The
            # LogManager has no call to remove the file; an empty override set will do.)
            self.log_manager.set_topic_config(name, {})
        logger.info("deleted topic %s", name)
        return topic

    def _add(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def _partition_dir(self, topic: str, partition: int) -> str:
        return os.path.join(self.log_manager.data_dir, f"{topic}-{partition}")

    def _read_topic_id(self, topic: str) -> uuid.UUID | None:
        path = os.path.join(self._partition_dir(topic, 0), PARTITION_METADATA)
        try:
            with open(path, encoding="utf-8") as file:
                fields = dict(line.split(":", 1) for line in file.read().splitlines() if ":" in line)
            return decode_topic_id(fields["topic_id"].strip())
        except (OSError, KeyError, ValueError):
            return None

    def _write_topic_id(self, topic: str, partition: int, topic_id: uuid.UUID) -> None:
        path = os.path.join(self._partition_dir(topic, partition), PARTITION_METADATA)
        text = f"version: 0\ntopic_id: {encode_topic_id(topic_id)}\n"
        try:
            with open(path, encoding="utf-8") as file:
                if file.read() == text:
                    return
        except OSError:
            pass
        temp = path + ".tmp"
        with open(temp, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temp, path)
