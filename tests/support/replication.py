"""Helpers for replication tests on a real cluster (tests/cluster/test_replication_*.py): one
partition placed on chosen brokers, its leader and ISR read from ZooKeeper, records produced
and read back as a client does, and each replica's batches read from its segment files."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

from strom.cluster.zk_data import LeaderAndIsr
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.protocol.records.header import iter_batches
from strom.storage.checkpoint import read_offset_checkpoint
from strom.storage.fs import FileSystem
from strom.storage.log_manager import REPLICATION_OFFSET_CHECKPOINT
from strom.storage.segment import LOG_SUFFIX
from tests.support.cluster import StromCluster

TIMEOUT = 60.0
Batch = tuple[int, int, int]  # base offset, last offset, CRC


def zk_chroot(zookeeper: ZooKeeperEnsemble) -> str:
    return f"{zookeeper.connect_string}/trunc-{uuid.uuid4().hex[:8]}"


def create_partition(cluster: StromCluster, topic: str, replicas: list[int], **configs: str) -> None:
    """One partition on ``replicas`` (the first is the preferred leader); waits until ZooKeeper
    names that leader with every replica in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    new = NewTopic(topic, num_partitions=1, replica_assignment=[replicas], config=dict(configs))
    admin.create_topics([new], operation_timeout=60)[topic].result(60)
    await_state(cluster, topic, lambda s: s.leader == replicas[0] and sorted(s.isr) == sorted(replicas),
                 f"{topic} led by {replicas[0]} with ISR {replicas}")


def partition_state(cluster: StromCluster, topic: str) -> LeaderAndIsr | None:
    cluster.zk.sync()
    found = cluster.zk.get_partition_states({(topic, 0)}).get((topic, 0))
    return None if found is None else found.leader_and_isr


def await_state(cluster: StromCluster, topic: str, condition: Callable[[LeaderAndIsr], bool],
                 what: str) -> LeaderAndIsr:
    def reached() -> LeaderAndIsr | None:
        state = partition_state(cluster, topic)
        return state if state is not None and condition(state) else None

    found = cluster.wait_until(reached, TIMEOUT, what)
    assert found is not None
    return found


def produce_each(cluster: StromCluster, topic: str, values: list[bytes], acks: str = "all") -> None:
    """Each value its own batch (a flush each), acknowledged, or the test fails."""
    from confluent_kafka import Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": acks, "linger.ms": 0,
                         "message.timeout.ms": 60000, "enable.idempotence": False, "retries": 100})
    for value in values:
        producer.produce(topic, value=value, partition=0,
                         on_delivery=lambda error, _message: errors.append(error) if error else None)
        assert producer.flush(TIMEOUT) == 0, f"{value!r} not acknowledged in time"
    assert errors == [], f"produce errors: {errors}"


def read_partition(cluster: StromCluster, topic: str) -> list[tuple[int, bytes]]:
    """Every record of partition 0 up to the high watermark, as (offset, value), in the order
    a consumer receives them. Asked again while the client's metadata is behind a leader
    change (an unknown partition, a leader gone)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": f"reader-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        _, high = cluster.wait_until(lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10),
                                     TIMEOUT, f"{topic}'s high watermark")
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen: list[tuple[int, bytes]] = []

        def caught_up() -> bool:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                if message.error() is None:
                    offset, value = message.offset(), message.value()
                    assert offset is not None and value is not None
                    seen.append((offset, bytes(value)))
            return high == 0 or (bool(seen) and seen[-1][0] >= high - 1)

        cluster.wait_until(caught_up, TIMEOUT, f"{topic} read up to {high}")
        return seen
    finally:
        consumer.close()


def replica_batches(cluster: StromCluster, node_id: int, topic: str) -> list[Batch]:
    """Every batch of ``topic``-0 in broker ``node_id``'s segment files, in offset order."""
    directory = cluster.brokers[node_id].data_dir / f"{topic}-0"
    out: list[Batch] = []
    for segment in sorted(directory.glob(f"*{LOG_SUFFIX}")):
        data = segment.read_bytes()
        out += [(h.base_offset, h.base_offset + h.last_offset_delta, h.crc) for _, h in iter_batches(data)]
    return out


def assert_monotonic(batches: list[Batch]) -> None:
    """Offsets never go backwards: each batch starts right after the one before."""
    for before, after in itertools.pairwise(batches):
        assert after[0] == before[1] + 1, f"offsets go from {before} to {after}"


def checkpointed_hw(cluster: StromCluster, node_id: int, topic: str) -> int:
    path = cluster.brokers[node_id].data_dir / REPLICATION_OFFSET_CHECKPOINT
    if not path.exists():
        return 0
    return read_offset_checkpoint(FileSystem(), str(path)).get((topic, 0), 0)


def stop_all(cluster: StromCluster) -> None:
    for node_id in cluster.live():
        cluster.terminate(node_id)
