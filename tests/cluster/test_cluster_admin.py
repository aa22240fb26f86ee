"""Topic administration in a cluster: ZooKeeper holds it, the controller acts on it, every
broker follows. Real ZooKeeper, three ``strom serve`` processes, real admin clients."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.cluster.zookeeper_server import ZooKeeperEnsemble
from tests.support.cluster import StromCluster
from tests.support.zookeeper import zookeeper as zookeeper


@pytest.fixture
def cluster(tmp_path: Path, zookeeper: ZooKeeperEnsemble) -> Iterator[StromCluster]:
    with StromCluster(tmp_path, f"{zookeeper.connect_string}/c-{uuid.uuid4().hex[:8]}") as started:
        yield started


def _admin(cluster: StromCluster, via: int = 1):  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": cluster.brokers[via].bootstrap})


def _partition_dirs(cluster: StromCluster, topic: str) -> list[Path]:
    return [d for b in cluster.brokers.values() for d in b.data_dir.glob(f"{topic}-*") if d.is_dir()]


def test_a_topic_config_set_at_creation_reaches_every_broker_hosting_it(cluster: StromCluster) -> None:
    from confluent_kafka.admin import ConfigResource, NewTopic

    admin = _admin(cluster)
    admin.create_topics([NewTopic("compacted", 6, 1, config={"cleanup.policy": "compact",
                                                             "max.message.bytes": "12345"})])["compacted"].result(30)
    cluster.wait_until(lambda: all(v >= 0 for v in cluster.leaders("compacted").values()), what="leaders")
    # Each broker describes the topic with the override, whichever broker is asked.
    for node_id in (1, 2, 3):
        cluster.wait_until(lambda node_id=node_id: len(cluster.leaders("compacted", via=node_id)) == 6,
                           what=f"broker {node_id} knowing the topic")
        resource = ConfigResource("topic", "compacted")
        asked = _admin(cluster, node_id)  # kept alive until its answer is in
        described = asked.describe_configs([resource])[resource].result(30)
        assert described["cleanup.policy"].value == "compact"
        assert described["max.message.bytes"].value == "12345"
    # And every broker enforces it: a keyless record is refused by whichever broker leads.
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "retries": 0})
    failures: list[object] = []
    for partition in range(6):
        producer.produce("compacted", value=b"no key", partition=partition,
                         on_delivery=lambda err, msg: failures.append(err) if err else None)
    producer.flush(30)
    assert len(failures) == 6, failures


def test_a_config_change_reaches_every_broker(cluster: StromCluster) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

    admin = _admin(cluster)
    admin.create_topics([NewTopic("tunable", 3, 1)])["tunable"].result(30)
    for node_id in (1, 2, 3):
        cluster.wait_until(lambda node_id=node_id: len(cluster.leaders("tunable", via=node_id)) == 3,
                           what=f"broker {node_id} knowing the topic")
    assert set(cluster.leaders("tunable").values()) == {1, 2, 3}
    # The change goes to one broker; every leader must enforce it (the /config/changes watch).
    resource = ConfigResource("topic", "tunable", incremental_configs=[
        ConfigEntry("max.message.bytes", "2000", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    assert cluster.zk.get_topic_config("tunable") == {"max.message.bytes": "2000"}

    def refused_everywhere() -> bool:
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "retries": 0, "linger.ms": 0})
        errors: dict[int, str] = {}
        for p in range(3):
            producer.produce("tunable", value=b"x" * 5000, partition=p,
                             on_delivery=lambda err, msg: errors.__setitem__(msg.partition(), err.name() if err else ""))
        producer.flush(30)
        return errors == {p: "MSG_SIZE_TOO_LARGE" for p in range(3)}

    cluster.wait_until(refused_everywhere, what="every leader refusing records over the new max.message.bytes")


def test_partitions_added_get_leaders_and_a_deleted_topic_leaves_no_trace(cluster: StromCluster) -> None:
    from confluent_kafka.admin import NewPartitions, NewTopic

    admin = _admin(cluster)
    admin.create_topics([NewTopic("growing", 3, 1)])["growing"].result(30)
    cluster.wait_until(lambda: len(cluster.leaders("growing")) == 3, what="3 partitions")
    admin.create_partitions([NewPartitions("growing", 9)])["growing"].result(30)
    leaders = cluster.wait_until(
        lambda: (ls := cluster.leaders("growing")) and len(ls) == 9 and all(v >= 0 for v in ls.values()) and ls,
        what="9 partitions with leaders")
    assert set(leaders.values()) == {1, 2, 3}
    assert len(_partition_dirs(cluster, "growing")) == 9

    admin.delete_topics(["growing"])["growing"].result(30)
    cluster.wait_until(lambda: "growing" not in cluster.zk.get_all_topics(), what="the topic's znodes gone")
    cluster.wait_until(lambda: not _partition_dirs(cluster, "growing"), what="every broker's logs of it deleted")
    for node_id in (1, 2, 3):
        cluster.wait_until(lambda node_id=node_id: all(
            t.name != "growing" for t in cluster.metadata(via=node_id).topics), what=f"broker {node_id} forgetting it")
    assert cluster.zk.get_topic_deletions() == set()
    # The name can be used again, from scratch.
    admin.create_topics([NewTopic("growing", 2, 1)])["growing"].result(30)
    cluster.wait_until(lambda: len(cluster.leaders("growing")) == 2, what="the new topic")


def test_admin_requests_to_a_broker_that_is_not_the_controller_are_refused_not_controller(
        cluster: StromCluster) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    controller = cluster.controller_id()
    other = next(n for n in (1, 2, 3) if n != controller)
    from strom.protocol.headers import decode_response, encode_request
    from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
    from tests.support.broker_process import raw_request

    request = CreateTopicsRequest(topics=(CreatableTopic(name="direct", num_partitions=1, replication_factor=1),),
                                  timeout_ms=10000)
    answer = raw_request(cluster.brokers[other], encode_request(request, 5, correlation_id=7, client_id="t"))
    assert answer is not None
    _, response = decode_response(answer, CreateTopicsRequest.API_KEY, 5)
    assert [t.error_code for t in response.topics] == [41]  # NOT_CONTROLLER
    # kafka-python's admin follows Metadata's controller id and succeeds.
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[other].bootstrap)
    admin.create_topics([NewTopic("direct", 2, 1)])
    admin.close()
    cluster.wait_until(lambda: len(cluster.leaders("direct")) == 2, what="the topic")


def test_a_replication_factor_up_to_the_live_brokers_is_placed_and_beyond_refused(cluster: StromCluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin = _admin(cluster)
    admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(30)
    cluster.wait_until(lambda: len(cluster.leaders("replicated")) == 3
                       and all(v >= 0 for v in cluster.leaders("replicated").values()), what="the topic's leaders")
    (topic,) = cluster.metadata(["replicated"]).topics
    for partition in topic.partitions:  # every broker holds a replica, each leads one partition
        assert sorted(partition.replica_nodes) == [1, 2, 3] and sorted(partition.isr_nodes) == [1, 2, 3]
    assert sorted(p.leader_id for p in topic.partitions) == [1, 2, 3]
    with pytest.raises(KafkaException) as too_many:
        admin.create_topics([NewTopic("huge", 3, 4)])["huge"].result(30)
    assert "Replication factor: 4 larger than available brokers: 3." in str(too_many.value)
    assert "huge" not in cluster.zk.get_all_topics()


def test_producer_ids_from_every_broker_are_distinct(cluster: StromCluster) -> None:
    """3,000 InitProducerId requests spread over the three brokers: no id twice (ZooKeeper's blocks)."""
    from strom.protocol.headers import decode_response, encode_request
    from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
    from tests.support.broker_process import raw_request

    ids: list[int] = []
    for i in range(3000):
        broker = cluster.brokers[1 + i % 3]
        frame = encode_request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                               4, correlation_id=i, client_id="pid-test")
        answer = raw_request(broker, frame)
        assert answer is not None
        _, response = decode_response(answer, InitProducerIdRequest.API_KEY, 4)
        assert response.error_code == 0
        ids.append(response.producer_id)
    assert len(set(ids)) == 3000
    # Each broker drew from blocks of its own: at least three distinct blocks were claimed.
    assert len({pid // 1000 for pid in ids}) >= 3
