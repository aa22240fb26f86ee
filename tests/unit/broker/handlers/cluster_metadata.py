"""A cluster-mode broker for handler tests: ``zookeeper.connect`` set but never contacted, its
metadata fed as the controller's UpdateMetadata would, topic creation recorded (shared by
the FindCoordinator and transaction admin handler tests)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Mapping

from strom.broker.group.offsets_topic import OFFSETS_TOPIC
from strom.broker.metadata_cache import BrokerEndpoint, LiveBroker, MetadataCache, PartitionState
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.topic_partition import TopicPartition
from tests.support.broker_harness import BrokerHarness

ME, OTHER, GONE = 1, 2, 3
PARTITIONS = 3
CLUSTER = {
    "zookeeper.connect": "127.0.0.1:1/never-contacted",
    "broker.id": str(ME),
    "offsets.topic.num.partitions": str(PARTITIONS),
    "offsets.topic.replication.factor": "2",
    "offsets.topic.segment.bytes": "1048576",
}
BROKERS = [LiveBroker(ME, (BrokerEndpoint("127.0.0.1", 9001),)), LiveBroker(OTHER, (BrokerEndpoint("127.0.0.2", 9002),))]
controller_epochs = itertools.count(1)


class RecordingAdmin:
    """Stands in for the cluster's AdminManager: records each creation, or refuses it."""

    def __init__(self, refuse: KafkaException | None = None) -> None:
        self.created: list[tuple[str, int, dict[str, str], int]] = []
        self.refuse = refuse

    def create_topic(self, name: str, partitions: int, configs: Mapping[str, str] | None = None, *,
                     replication_factor: int = -1) -> None:
        self.created.append((name, partitions, dict(configs or {}), replication_factor))
        if self.refuse is not None:
            raise self.refuse



def update_metadata(h: BrokerHarness, brokers: list[LiveBroker], leaders: Mapping[int, int]) -> None:
    states: list[tuple[TopicPartition, PartitionState]] = [
        ((OFFSETS_TOPIC, p), PartitionState(leader, 0, (leader,), (leader,))) for p, leader in leaders.items()]

    def apply(cache: MetadataCache) -> list[TopicPartition]:
        return cache.update_metadata(ME, brokers, states, {OFFSETS_TOPIC: uuid.uuid4()} if leaders else {})

    assert h.broker.replica_manager.maybe_update_metadata_cache(next(controller_epochs), apply)[0] == ErrorCode.NONE
