"""Golden bytes for every znode payload: exactly what Kafka 3.9 (ZooKeeper mode) writes.

The fixed-key payloads were read out of the ZooKeeper of a running Kafka 3.9
(tests/support/reference_broker.py) and pinned here; the hash-ordered maps (partition numbers,
topic configs) are checked against the same broker's bytes for a 12-partition topic and a
multi-key config.
"""

from __future__ import annotations

import uuid

import pytest

from strom.cluster import zk_data
from strom.cluster.zk_data import (
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ProducerIdBlock,
    TopicAssignment,
    ZkDataError,
)

TOPIC_ID = zk_data.parse_kafka_uuid("m3Jtm1mVQwexy5e5Qyo2Cw")


def test_paths() -> None:
    assert zk_data.broker_id_path(3) == "/brokers/ids/3"
    assert zk_data.topic_path("t") == "/brokers/topics/t"
    assert zk_data.partition_state_path("t", 7) == "/brokers/topics/t/partitions/7/state"
    assert zk_data.topic_config_path("t") == "/config/topics/t"
    assert zk_data.delete_topic_path("t") == "/admin/delete_topics/t"
    assert zk_data.config_change_sequence("config_change_0000000042") == 42
    with pytest.raises(ZkDataError):
        zk_data.config_change_sequence("isr_change_0000000042")


def test_kafka_uuid_strings_are_22_url_safe_chars_without_padding() -> None:
    value = uuid.UUID("fbffbefb-0000-0000-0000-000000000001")
    assert zk_data.kafka_uuid_string(value) == "-_---wAAAAAAAAAAAAAAAQ"
    assert zk_data.parse_kafka_uuid(zk_data.kafka_uuid_string(value)) == value
    fresh = zk_data.new_kafka_uuid()
    assert len(zk_data.kafka_uuid_string(fresh)) == 22 and not zk_data.kafka_uuid_string(fresh).startswith("-")
    with pytest.raises(ZkDataError):
        zk_data.parse_kafka_uuid("short")


def test_cluster_id() -> None:
    data = zk_data.encode_cluster_id("lMlYrCJSR1OsAKGYxAMqOw")
    assert data == b'{"version":"1","id":"lMlYrCJSR1OsAKGYxAMqOw"}'
    assert zk_data.decode_cluster_id(data) == "lMlYrCJSR1OsAKGYxAMqOw"


def test_broker_registration_version_5() -> None:
    info = BrokerInfo(1, (EndPoint("localhost", 9092),))
    data = zk_data.encode_broker_info(info, timestamp_ms=1764016954242)
    assert data == (
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"port":9092,"host":"localhost",'
        b'"version":5,"timestamp":"1764016954242"}')
    assert zk_data.decode_broker_info(1, data, czxid=77) == BrokerInfo(1, info.endpoints, None, 77)


def test_broker_registration_with_rack_and_no_plaintext_listener() -> None:
    endpoints = (EndPoint("::1", 9093, "INTERNAL", "SSL"),)
    data = zk_data.encode_broker_info(BrokerInfo(2, endpoints, rack="r1"), timestamp_ms=5)
    assert data == (
        b'{"features":{},"listener_security_protocol_map":{"INTERNAL":"SSL"},'
        b'"endpoints":["INTERNAL://[::1]:9093"],"rack":"r1","jmx_port":-1,"port":-1,"host":null,'
        b'"version":5,"timestamp":"5"}')
    assert zk_data.decode_broker_info(2, data) == BrokerInfo(2, endpoints, "r1", -1)


def test_older_broker_registrations_decode() -> None:
    v1 = b'{"version":1,"host":"h","port":9092,"jmx_port":-1,"timestamp":"1"}'
    assert zk_data.decode_broker_info(4, v1).endpoints == (EndPoint("h", 9092),)
    v4 = (b'{"listener_security_protocol_map":{"CLIENT":"PLAINTEXT"},"endpoints":["CLIENT://h:1"],'
          b'"rack":"r","jmx_port":9999,"host":null,"timestamp":"1","port":-1,"version":4}')
    assert zk_data.decode_broker_info(4, v4) == BrokerInfo(4, (EndPoint("h", 1, "CLIENT", "PLAINTEXT"),), "r")
    with pytest.raises(ZkDataError):
        zk_data.decode_broker_info(4, b"not json")


def test_topic_assignment_version_3() -> None:
    data = zk_data.encode_topic_assignment(TopicAssignment(TOPIC_ID, {0: (1, 2), 1: (2, 3)}))
    assert data == (
        b'{"partitions":{"0":[1,2],"1":[2,3]},"topic_id":"m3Jtm1mVQwexy5e5Qyo2Cw",'
        b'"adding_replicas":{},"removing_replicas":{},"version":3}')
    assert zk_data.decode_topic_assignment("t", data) == TopicAssignment(TOPIC_ID, {0: (1, 2), 1: (2, 3)})


def test_topic_assignment_partition_numbers_in_scala_hash_order() -> None:
    assignment = TopicAssignment(TOPIC_ID, {p: (p % 3 + 1,) for p in range(12)})
    data = zk_data.encode_topic_assignment(assignment)
    assert data.startswith(
        b'{"partitions":{"11":[3],"0":[1],"1":[2],"2":[3],"3":[1],"4":[2],"5":[3],"6":[1],"7":[2],'
        b'"8":[3],"9":[1],"10":[2]},')
    assert zk_data.decode_topic_assignment("t", data) == assignment


def test_pre_topic_id_assignment_decodes_with_zero_id() -> None:
    decoded = zk_data.decode_topic_assignment("t", b'{"version":1,"partitions":{"1":[2],"0":[1]}}')
    assert decoded == TopicAssignment(zk_data.ZERO_TOPIC_ID, {0: (1,), 1: (2,)})
    assert list(decoded.partitions) == [0, 1]


def test_partition_state() -> None:
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 3, 2)), controller_epoch=7)
    data = zk_data.encode_partition_state(state)
    assert data == b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,3,2]}'
    decoded = zk_data.decode_partition_state(("t", 0), data, zk_version=9)
    assert decoded == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 3, 2), 9), 7)
    recovering = b'{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":5,"isr":[],"leader_recovery_state":1}'
    assert zk_data.decode_partition_state(("t", 0), recovering, 1).leader_and_isr.leader == zk_data.NO_LEADER


def test_controller_and_epoch() -> None:
    data = zk_data.encode_controller(2, timestamp_ms=1764016954917)
    assert data == b'{"version":2,"brokerid":2,"timestamp":"1764016954917","kraftControllerEpoch":-1}'
    assert zk_data.decode_controller(data) == 2
    assert zk_data.decode_controller(b'{"version":1,"brokerid":5,"timestamp":"1"}') == 5
    assert zk_data.encode_controller_epoch(12) == b"12"
    assert zk_data.decode_controller_epoch(b"12") == 12
    with pytest.raises(ZkDataError):
        zk_data.decode_controller_epoch(b"{}")


def test_topic_config_and_change_notification() -> None:
    assert zk_data.encode_topic_config({}) == b'{"version":1,"config":{}}'
    data = zk_data.encode_topic_config({"cleanup.policy": "compact"})
    assert data == b'{"version":1,"config":{"cleanup.policy":"compact"}}'
    assert zk_data.decode_topic_config(data) == {"cleanup.policy": "compact"}
    assert zk_data.decode_topic_config(None) == {}
    change = zk_data.encode_config_change(zk_data.topic_entity_path("t"))
    assert change == b'{"version":2,"entity_path":"topics/t"}'
    assert zk_data.decode_config_change(change) == "topics/t"
    assert zk_data.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"u"}') == "topics/u"


def test_topic_config_keys_in_java_properties_order() -> None:
    configs = {"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "2",
               "segment.bytes": "1048576", "max.message.bytes": "2000000"}
    data = zk_data.encode_topic_config(configs)
    assert zk_data.decode_topic_config(data) == configs
    assert data == (
        b'{"version":1,"config":{"cleanup.policy":"compact","max.message.bytes":"2000000",'
        b'"min.insync.replicas":"2","retention.ms":"1000","segment.bytes":"1048576"}}')
    # retention.ms and segment.bytes share a bin: the one set first comes first, as in Java.
    assert zk_data.encode_topic_config(dict(reversed(configs.items()))).endswith(
        b'"segment.bytes":"1048576","retention.ms":"1000"}}')


def test_producer_id_block() -> None:
    data = zk_data.encode_producer_id_block(ProducerIdBlock(1, 0, 999))
    assert data == b'{"version":1,"broker":1,"block_start":"0","block_end":"999"}'
    assert zk_data.decode_producer_id_block(data) == ProducerIdBlock(1, 0, 999)
    assert zk_data.decode_producer_id_block(b"") is None


def test_scala_hash_map_order_grows_its_table() -> None:
    # 12 entries: the table doubles from 16 to 32 buckets on the 12th insert, moving "11".
    order = zk_data.scala_mutable_hash_map_order(str(p) for p in range(12))
    assert order == ["11", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"]
    assert zk_data.scala_mutable_hash_map_order(str(p) for p in range(11)) == [str(p) for p in range(10)] + ["10"]


def test_persistent_paths_include_every_parent_kafka_needs() -> None:
    for path in (zk_data.BROKER_IDS, zk_data.TOPICS, zk_data.CONFIG_CHANGES, zk_data.DELETE_TOPICS,
                 zk_data.BROKER_SEQUENCE_ID, zk_data.PRODUCER_ID_BLOCK, zk_data.TOPIC_CONFIGS):
        assert path in zk_data.PERSISTENT_PATHS
