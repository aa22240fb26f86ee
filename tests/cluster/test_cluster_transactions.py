"""Transactions in a cluster: the coordinator is the leader of the id's ``__transaction_state``
partition, markers reach partitions led by other brokers (WriteTxnMarkers), and when the
coordinator's broker dies right after a commit was answered, the partition's new leader
finishes the commit from its own load. A leader verifies a transactional Produce with a
coordinator on another broker (KIP-890 part 1, AddPartitionsToTxn v4 VerifyOnly).

Three brokers, one cluster for the module; a real transactional client (confluent-kafka).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC, partition_for
from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.records import build_record_batch
from tests.support.broker_process import raw_request
from tests.support.cluster import StromCluster
from tests.support.zookeeper import zookeeper as zookeeper

pytestmark = pytest.mark.zookeeper

TXN_PARTITIONS = 3
OVERRIDES = {
    "transaction.state.log.num.partitions": str(TXN_PARTITIONS),
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}
TOPIC = "txn-out"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    directory = Path(tmp_path_factory.mktemp("txn-cluster"))
    with StromCluster(directory, f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:8]}",
                      overrides=OVERRIDES) as started:
        admin = AdminClient({"bootstrap.servers": started.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(30)
        started.wait_until(lambda: sorted(started.leaders(TOPIC).values()) == [1, 2, 3],
                           what=f"each partition of {TOPIC} led by another broker")
        yield started


def transaction_coordinator(cluster: StromCluster, txn_id: str) -> int:
    """The node FindCoordinator (key type 1) names; -1 while there is none."""
    frame = encode_request(FindCoordinatorRequest(key=txn_id, key_type=1), 3, correlation_id=3, client_id="test")
    answer = raw_request(cluster.brokers[cluster.live()[0]], frame)
    assert answer is not None
    _, response = decode_response(answer, FindCoordinatorRequest.API_KEY, 3)
    return int(response.node_id) if response.error_code == 0 else -1


def high_watermarks(cluster: StromCluster) -> list[int]:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks",
                         "isolation.level": "read_uncommitted"})
    try:
        return [int(consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10, cached=False)[1])
                for p in range(3)]
    finally:
        consumer.close()


def commit_one_per_partition(cluster: StromCluster, txn_id: str) -> None:
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(60)
    producer.begin_transaction()
    for partition in range(3):
        producer.produce(TOPIC, f"{txn_id}-{partition}".encode(), partition=partition)
    producer.commit_transaction(60)


def test_the_coordinator_is_the_state_partitions_leader_and_markers_reach_every_leader(
        cluster: StromCluster) -> None:
    txn_id = "spread"
    commit_one_per_partition(cluster, txn_id)
    leader = cluster.leaders(TRANSACTION_STATE_TOPIC)[partition_for(txn_id, TXN_PARTITIONS)]
    assert transaction_coordinator(cluster, txn_id) == leader
    # One record and one COMMIT marker on each partition, two of them led by other brokers.
    cluster.wait_until(lambda: high_watermarks(cluster) == [2, 2, 2], what="a marker on every partition")


def settled_coordinator(cluster: StromCluster, txn_id: str) -> int:
    """The id's coordinator node, once there is one."""
    cluster.wait_until(lambda: transaction_coordinator(cluster, txn_id) >= 0, what=f"a coordinator for {txn_id}")
    return transaction_coordinator(cluster, txn_id)


def init_producer_id(cluster: StromCluster, txn_id: str) -> tuple[int, int] | None:
    """InitProducerId (v4) from the id's coordinator: (producer id, epoch), None until it answers."""
    frame = encode_request(InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=60000,
                                                 producer_id=-1, producer_epoch=-1), 4, correlation_id=4, client_id="test")
    answer = raw_request(cluster.brokers[transaction_coordinator(cluster, txn_id)], frame)
    assert answer is not None
    _, response = decode_response(answer, InitProducerIdRequest.API_KEY, 4)
    return (int(response.producer_id), int(response.producer_epoch)) if response.error_code == 0 else None


def transactional_produce(cluster: StromCluster, txn_id: str, producer: tuple[int, int], partition: int) -> int:
    """A transactional Produce (v9) to the partition's leader: its error code."""
    records = bytes(build_record_batch([(None, b"not added", (), None)], producer_id=producer[0],
                                       producer_epoch=producer[1], base_sequence=0, is_transactional=True))
    request = ProduceRequest(transactional_id=txn_id, acks=-1, timeout_ms=10000, topic_data=(
        TopicProduceData(TOPIC, (PartitionProduceData(partition, records),)),))
    answer = raw_request(cluster.brokers[cluster.leaders(TOPIC)[partition]], encode_request(
        request, 9, correlation_id=5, client_id="test"))
    assert answer is not None
    _, response = decode_response(answer, ProduceRequest.API_KEY, 9)
    return int(response.responses[0].partition_responses[0].error_code)


def test_a_leader_verifies_with_a_coordinator_on_another_broker(cluster: StromCluster) -> None:
    txn_id = "verified-remotely"
    coordinator = settled_coordinator(cluster, txn_id)
    partition = next(p for p, leader in cluster.leaders(TOPIC).items() if leader != coordinator)
    before = high_watermarks(cluster)[partition]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    producer.init_transactions(60)
    producer.begin_transaction()
    producer.produce(TOPIC, b"verified", partition=partition)
    producer.commit_transaction(60)
    cluster.wait_until(lambda: high_watermarks(cluster)[partition] == before + 2, what="the record and its marker")
    # A batch of a partition never added to the transaction: the leader asks the coordinator
    # (another broker), which answers TRANSACTION_ABORTABLE, INVALID_TXN_STATE for Produce v9.
    raw_id = f"{txn_id}-raw"
    raw_coordinator = settled_coordinator(cluster, raw_id)
    raw_partition = next(p for p, leader in cluster.leaders(TOPIC).items() if leader != raw_coordinator)
    raw_producer = cluster.wait_until(lambda: init_producer_id(cluster, raw_id), what="a producer id")
    assert transactional_produce(cluster, raw_id, raw_producer, raw_partition) == ErrorCode.INVALID_TXN_STATE


def test_the_next_coordinator_completes_a_commit_whose_coordinator_died(cluster: StromCluster) -> None:
    txn_id = "orphaned"
    before = high_watermarks(cluster)
    commit_one_per_partition(cluster, txn_id)
    coordinator = transaction_coordinator(cluster, txn_id)
    cluster.kill(coordinator)  # PrepareCommit is on its followers; the markers may not be
    cluster.wait_until(lambda: transaction_coordinator(cluster, txn_id) not in (-1, coordinator),
                       what="another broker coordinating the id")
    cluster.wait_until(lambda: all(leader >= 0 for leader in cluster.leaders(TOPIC).values()),
                       what=f"{TOPIC} led again")
    # Every partition has its marker (a marker written twice is harmless: an empty transaction's).
    cluster.wait_until(lambda: all(now >= was + 2 for now, was in zip(high_watermarks(cluster), before, strict=True)),
                       what="the markers of the orphaned commit")
    # The id's next producer gets its epoch once the transaction is complete.
    successor = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": txn_id})
    successor.init_transactions(60)
    successor.begin_transaction()
    successor.produce(TOPIC, b"after", partition=0)
    successor.commit_transaction(60)
    cluster.restart(coordinator)
