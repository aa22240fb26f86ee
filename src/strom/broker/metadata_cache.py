"""MetadataCache: the broker's read-only view of the topics — names, ids, partition counts.

Handlers query it (Metadata, Fetch by topic id, configs); they never change it. It is
fed by whoever owns topic creation and deletion: on one node the ``AdminManager``
(``admin_manager``), in a cluster the controller's metadata updates. Topic ids are
chosen once, at creation, and kept with the partitions (``partition.metadata``, see
``storage.partition_metadata``), so clients that address topics by id (Fetch v13+,
Metadata v10+) keep working across restarts.
Invariant: every partition of a topic carries the same id; partitions are numbered
0..n-1 with no gaps.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException

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


def validate_topic_name(name: str) -> None:
    if not _LEGAL_NAME.match(name) or name in (".", ".."):
        raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"illegal topic name {name!r}")


class MetadataCache:
    """Topics of this broker, as the owner of topic creation last reported them."""

    def __init__(self) -> None:
        self._topics: dict[str, TopicMetadata] = {}
        self._by_id: dict[uuid.UUID, TopicMetadata] = {}

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())

    def get(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    # -- updates, from the owner of topic creation only ----------------------------------
    def update_topic(self, topic: TopicMetadata) -> None:
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def remove_topic(self, name: str) -> TopicMetadata | None:
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        return topic
