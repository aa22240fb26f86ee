"""MetadataCache: the broker's read-only view of the cluster — topics, partitions, brokers.

Handlers query it (Metadata, Fetch by topic id, configs); they never change it. It is
fed by whoever owns topic creation and deletion: on one node the ``AdminManager``
(``admin_manager``) through ``update_topic``/``remove_topic``; in a cluster only the
controller's UpdateMetadata requests, through ``update_metadata`` (Kafka's
``ZkMetadataCache.updateMetadata``): the live brokers with their endpoints and racks,
the controller's id, and each partition's leader, leader epoch, ISR, replicas and
offline replicas. Until the first UpdateMetadata a cluster broker knows no broker and
no topic, as in Kafka. Topic ids are chosen once, at creation, and kept with the
partitions (``partition.metadata``, see ``storage.partition_metadata``), so clients
that address topics by id (Fetch v13+, Metadata v10+) keep working across restarts.
Invariants: every partition of a topic carries the same id; the topic table
(``TopicMetadata``) and the partition states always describe the same topics (a
topic's ``partitions`` is one past its highest known partition); a topic without an
id (an UpdateMetadata older than v7) has the zero id and cannot be found by id.

Answers about a topic are expensive to build for a large topic (a Metadata answer for
1,000 partitions is ~26 KB) and asked for far more often than the topic changes, so the
cache keeps, per topic, what a handler chose to remember (``topic_answer``): it is
forgotten whenever anything the answer could depend on changes, i.e. the topic (its
partition states, id, existence) or the set of live brokers (which decides whether a
leader is available).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.topic_partition import TopicPartition

INTERNAL_TOPICS: Final = frozenset({"__consumer_offsets", "__transaction_state"})
_LEGAL_NAME: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
ZERO_TOPIC_ID: Final = uuid.UUID(int=0)
NO_CONTROLLER: Final = -1
LEADER_DURING_DELETE: Final = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: the partition is being deleted


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    partitions: int

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


@dataclass(frozen=True, slots=True)
class PartitionState:
    """One partition as the controller last described it (UpdateMetadata's partition state)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0  # the state znode's version (UpdateMetadata's ZkVersion)
    controller_epoch: int = 0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    host: str
    port: int
    listener: str = "PLAINTEXT"
    security_protocol: int = 0  # PLAINTEXT, as the wire numbers it


@dataclass(frozen=True, slots=True)
class LiveBroker:
    id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None = None

    def endpoint(self, listener: str | None = None) -> BrokerEndpoint | None:
        """The endpoint on ``listener`` (None: the first one); None if it has none there."""
        for endpoint in self.endpoints:
            if listener is None or endpoint.listener == listener:
                return endpoint
        return None


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
        # Cluster mode only (empty on one node): what UpdateMetadata said.
        self._partition_states: dict[str, dict[int, PartitionState]] = {}
        self._live_brokers: dict[int, LiveBroker] = {}
        self.controller_id: int = NO_CONTROLLER
        # Answers remembered per topic and key (see the module's docstring).
        self._answers: dict[str, dict[Hashable, bytes]] = {}

    def topics(self) -> list[TopicMetadata]:
        return list(self._topics.values())

    def get(self, name: str) -> TopicMetadata | None:
        return self._topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMetadata | None:
        return self._by_id.get(topic_id)

    def contains_partition(self, topic: str, index: int) -> bool:
        """Kafka's ``metadataCache.contains(tp)``: a partition the cluster has (hosted here or not)."""
        found = self._topics.get(topic)
        return found is not None and 0 <= index < found.partitions

    # -- cluster state (fed by UpdateMetadata) -------------------------------------------
    def partition_state(self, topic: str, index: int) -> PartitionState | None:
        states = self._partition_states.get(topic)
        return None if states is None else states.get(index)

    def live_brokers(self) -> list[LiveBroker]:
        """The brokers the controller last reported alive, by id."""
        return [self._live_brokers[broker_id] for broker_id in sorted(self._live_brokers)]

    def live_broker(self, broker_id: int) -> LiveBroker | None:
        return self._live_brokers.get(broker_id)

    # -- remembered answers ---------------------------------------------------------------
    def topic_answer(self, name: str, key: Hashable) -> bytes | None:
        """What ``remember_topic_answer`` kept for ``name`` under ``key``, if nothing changed since."""
        answers = self._answers.get(name)
        return None if answers is None else answers.get(key)

    def remember_topic_answer(self, name: str, key: Hashable, answer: bytes) -> None:
        """Keep ``answer``, built from the topic's current state, until the topic or the live brokers change."""
        if name in self._topics:
            self._answers.setdefault(name, {})[key] = answer

    def update_metadata(
        self,
        controller_id: int,
        live_brokers: Iterable[LiveBroker],
        partition_states: Iterable[tuple[TopicPartition, PartitionState]],
        topic_ids: Mapping[str, uuid.UUID] | None = None,
    ) -> list[TopicPartition]:
        """Apply one UpdateMetadata (Kafka's ``ZkMetadataCache.updateMetadata``); the deleted partitions.

        The live brokers and the controller are replaced; partition states are merged
        (an UpdateMetadata may carry only the partitions that changed), a leader of -2
        (``LEADER_DURING_DELETE``) removing the partition. ``topic_ids`` (v7+) set a
        topic's id; the zero id takes it away, as Kafka does for a pre-v7 request.
        """
        brokers = {broker.id: broker for broker in live_brokers}
        if brokers != self._live_brokers:
            self._answers.clear()
        self._live_brokers = brokers
        self.controller_id = controller_id if controller_id >= 0 else NO_CONTROLLER
        touched: set[str] = set()
        ids = {t.name: t.topic_id for t in self._topics.values()}
        for name, topic_id in (topic_ids or {}).items():
            ids[name] = topic_id
            touched.add(name)
        deleted: list[TopicPartition] = []
        for (topic, index), state in partition_states:
            touched.add(topic)
            states = self._partition_states.setdefault(topic, {})
            if state.leader == LEADER_DURING_DELETE:
                if states.pop(index, None) is not None:
                    deleted.append((topic, index))
            else:
                states[index] = state
        for topic in touched:
            self._refresh_topic(topic, ids.get(topic, ZERO_TOPIC_ID))
        return deleted

    def _refresh_topic(self, name: str, topic_id: uuid.UUID) -> None:
        """Keep the topic table in step with the topic's partition states."""
        self._answers.pop(name, None)
        states = self._partition_states.get(name)
        if not states:
            self._partition_states.pop(name, None)
            self.remove_topic(name)
            return
        old = self._topics.get(name)
        if old is not None and old.topic_id != topic_id:
            self._by_id.pop(old.topic_id, None)
        topic = TopicMetadata(name, topic_id, max(states) + 1)
        self._topics[name] = topic
        if topic_id != ZERO_TOPIC_ID:
            self._by_id[topic_id] = topic

    # -- updates, from the owner of topic creation only (one node) -----------------------
    def update_topic(self, topic: TopicMetadata) -> None:
        self._answers.pop(topic.name, None)
        self._topics[topic.name] = topic
        self._by_id[topic.topic_id] = topic

    def remove_topic(self, name: str) -> TopicMetadata | None:
        self._answers.pop(name, None)
        topic = self._topics.pop(name, None)
        if topic is not None:
            self._by_id.pop(topic.topic_id, None)
        return topic

