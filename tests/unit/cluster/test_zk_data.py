"""Golden bytes for every znode payload: exactly what Kafka 3.9 (ZooKeeper mode) writes.

Every payload below was compared with what Kafka 3.9.2 wrote into its own ZooKeeper
(tests/support/reference_broker.py, read with kazoo): the broker registration, controller,
epoch, cluster id, partition state, topic config, config change and producer id block match
byte for byte. The hash-ordered maps are pinned with Kafka's own bytes: topics of 12 and 100
partitions (the Scala hash table grows at 12 and again later) and a topic with 18 configs
(the Java one grows at 12).
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


# Read out of Kafka 3.9.2's ZooKeeper (kafka-topics through confluent-kafka, one broker, id 0).
KAFKA_12_PARTITIONS = (
    b'{"partitions":{"11":[0],"0":[0],"1":[0],"2":[0],"3":[0],"4":[0],"5":[0],"6":[0],"7":[0],"8":[0],'
    b'"9":[0],"10":[0]},"topic_id":"HmjgrTTvSD-wcjo3ZD_Rcg","adding_replicas":{},"removing_replicas":{'
    b'},"version":3}')
KAFKA_100_PARTITIONS = (
    b'{"partitions":{"88":[0],"89":[0],"90":[0],"91":[0],"92":[0],"93":[0],"94":[0],"95":[0],"96":[0],'
    b'"97":[0],"10":[0],"98":[0],"11":[0],"99":[0],"12":[0],"13":[0],"14":[0],"15":[0],"16":[0],"17":['
    b'0],"18":[0],"19":[0],"0":[0],"1":[0],"2":[0],"3":[0],"4":[0],"5":[0],"6":[0],"7":[0],"8":[0],"9"'
    b':[0],"20":[0],"21":[0],"22":[0],"23":[0],"24":[0],"25":[0],"26":[0],"27":[0],"28":[0],"29":[0],"'
    b'30":[0],"31":[0],"32":[0],"33":[0],"34":[0],"35":[0],"36":[0],"37":[0],"38":[0],"39":[0],"40":[0'
    b'],"41":[0],"42":[0],"43":[0],"44":[0],"45":[0],"46":[0],"47":[0],"48":[0],"49":[0],"50":[0],"51"'
    b':[0],"52":[0],"53":[0],"54":[0],"55":[0],"56":[0],"57":[0],"58":[0],"59":[0],"60":[0],"61":[0],"'
    b'62":[0],"63":[0],"64":[0],"65":[0],"66":[0],"67":[0],"68":[0],"69":[0],"70":[0],"71":[0],"72":[0'
    b'],"73":[0],"74":[0],"75":[0],"76":[0],"77":[0],"78":[0],"79":[0],"80":[0],"81":[0],"82":[0],"83"'
    b':[0],"84":[0],"85":[0],"86":[0],"87":[0]},"topic_id":"DRMmN8GsQEKSzCpmpR5dJw","adding_replicas":'
    b'{},"removing_replicas":{},"version":3}')
KAFKA_18_CONFIGS = (
    b'{"version":1,"config":{"compression.type":"gzip","file.delete.delay.ms":"1000","max.compaction.l'
    b'ag.ms":"100000","max.message.bytes":"100000","min.compaction.lag.ms":"10","message.timestamp.typ'
    b'e":"LogAppendTime","min.insync.replicas":"1","preallocate":"false","index.interval.bytes":"1000"'
    b',"min.cleanable.dirty.ratio":"0.2","delete.retention.ms":"1000","retention.bytes":"100000","clea'
    b'nup.policy":"delete","flush.ms":"1000","retention.ms":"100000","segment.bytes":"1000000","segmen'
    b't.ms":"100000","flush.messages":"1000"}}')
# The order the 18 configs were sent in (CreateTopics), i.e. inserted into Kafka's Properties.
KAFKA_18_CONFIGS_SENT = [
    "cleanup.policy", "compression.type", "delete.retention.ms", "file.delete.delay.ms", "flush.messages", "flush.ms",
    "index.interval.bytes", "max.compaction.lag.ms", "max.message.bytes", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate", "retention.bytes",
    "retention.ms", "segment.bytes", "segment.ms",
]


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
    data = zk_data.encode_cluster_id("vgsabb4hQne0hfEPIRJJJw")
    assert data == b'{"version":"1","id":"vgsabb4hQne0hfEPIRJJJw"}'
    assert zk_data.decode_cluster_id(data) == "vgsabb4hQne0hfEPIRJJJw"


def test_broker_registration_version_5() -> None:
    info = BrokerInfo(0, (EndPoint("127.0.0.1", 44517),))
    data = zk_data.encode_broker_info(info, timestamp_ms=1795553736833)
    assert data == (  # Kafka 3.9.2's own registration
        b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
        b'"endpoints":["PLAINTEXT://127.0.0.1:44517"],"jmx_port":-1,"port":44517,"host":"127.0.0.1",'
        b'"version":5,"timestamp":"1795553736833"}')
    assert zk_data.decode_broker_info(0, data, czxid=77) == BrokerInfo(0, info.endpoints, None, 77)


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


@pytest.mark.parametrize("kafka_bytes", [KAFKA_12_PARTITIONS, KAFKA_100_PARTITIONS], ids=["12", "100"])
def test_topic_assignment_partition_numbers_in_scala_hash_order(kafka_bytes: bytes) -> None:
    assignment = zk_data.decode_topic_assignment("t", kafka_bytes)
    assert list(assignment.partitions) == list(range(len(assignment.partitions)))
    assert all(replicas == (0,) for replicas in assignment.partitions.values())
    assert zk_data.encode_topic_assignment(assignment) == kafka_bytes


def test_pre_topic_id_assignment_decodes_with_zero_id() -> None:
    decoded = zk_data.decode_topic_assignment("t", b'{"version":1,"partitions":{"1":[2],"0":[1]}}')
    assert decoded == TopicAssignment(zk_data.ZERO_TOPIC_ID, {0: (1,), 1: (2,)})
    assert list(decoded.partitions) == [0, 1]


def test_partition_state() -> None:
    kafka = b'{"controller_epoch":1,"leader":0,"version":1,"leader_epoch":0,"isr":[0]}'
    assert zk_data.encode_partition_state(LeaderIsrAndControllerEpoch(LeaderAndIsr(0, 0, (0,)), 1)) == kafka
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 3, 2)), controller_epoch=7)
    data = zk_data.encode_partition_state(state)
    assert data == b'{"controller_epoch":7,"leader":1,"version":1,"leader_epoch":4,"isr":[1,3,2]}'
    decoded = zk_data.decode_partition_state(("t", 0), data, zk_version=9)
    assert decoded == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 3, 2), 9), 7)
    recovering = b'{"controller_epoch":7,"leader":-1,"version":1,"leader_epoch":5,"isr":[],"leader_recovery_state":1}'
    assert zk_data.decode_partition_state(("t", 0), recovering, 1).leader_and_isr.leader == zk_data.NO_LEADER


def test_controller_and_epoch() -> None:
    data = zk_data.encode_controller(0, timestamp_ms=1795553737095)
    assert data == b'{"version":2,"brokerid":0,"timestamp":"1795553737095","kraftControllerEpoch":-1}'
    assert zk_data.decode_controller(data) == 0
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
    change = zk_data.encode_config_change(zk_data.topic_entity_path("plain"))
    assert change == b'{"version":2,"entity_path":"topics/plain"}'
    assert zk_data.decode_config_change(change) == "topics/plain"
    assert zk_data.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"u"}') == "topics/u"


def test_many_topic_configs_in_java_properties_order() -> None:
    configs = zk_data.decode_topic_config(KAFKA_18_CONFIGS)
    assert sorted(configs) == sorted(KAFKA_18_CONFIGS_SENT)
    assert zk_data.encode_topic_config({key: configs[key] for key in KAFKA_18_CONFIGS_SENT}) == KAFKA_18_CONFIGS


def test_topic_config_keys_in_java_properties_order() -> None:
    configs = {"retention.ms": "1000", "cleanup.policy": "compact", "min.insync.replicas": "1",
               "segment.bytes": "1048576", "max.message.bytes": "2000000"}
    data = zk_data.encode_topic_config(configs)
    assert zk_data.decode_topic_config(data) == configs
    assert data == (
        b'{"version":1,"config":{"cleanup.policy":"compact","max.message.bytes":"2000000",'
        b'"min.insync.replicas":"1","retention.ms":"1000","segment.bytes":"1048576"}}')
    # retention.ms and segment.bytes share a bin: the one set first comes first, as in Java.
    assert zk_data.encode_topic_config(dict(reversed(configs.items()))).endswith(
        b'"segment.bytes":"1048576","retention.ms":"1000"}}')


def test_producer_id_block() -> None:
    data = zk_data.encode_producer_id_block(ProducerIdBlock(0, 0, 999))
    assert data == b'{"version":1,"broker":0,"block_start":"0","block_end":"999"}'
    assert zk_data.decode_producer_id_block(data) == ProducerIdBlock(0, 0, 999)
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
