"""Admin APIs with real clients: CreatePartitions, DeleteRecords, DescribeConfigs, AlterConfigs,
IncrementalAlterConfigs, DescribeCluster, DescribeLogDirs, OffsetForLeaderEpoch.

confluent-kafka (librdkafka) and kafka-python drive each API as an application would,
and every change is checked where it takes effect: new partitions in metadata and
producible, deleted records unreadable by consumers, altered configs described back
and kept across a restart. OffsetForLeaderEpoch and the version-specific corners
(DescribeConfigs v0's is_default, v3's documentation) go over a socket with Strom's
own codec, since no client here sends them on demand.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import kafka
import kafka.errors
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka.admin import ConfigResource as KafkaPythonConfigResource
from kafka.admin import ConfigResourceType

from strom.protocol.error_codes import ErrorCode
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.alter_configs_request import AlterableConfig as LegacyAlterableConfig
from strom.protocol.messages.alter_configs_request import AlterConfigsRequest, AlterConfigsResource
from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from strom.protocol.messages.describe_cluster_request import DescribeClusterRequest
from strom.protocol.messages.describe_cluster_response import DescribeClusterResponse
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.describe_configs_response import DescribeConfigsResponse
from strom.protocol.messages.describe_log_dirs_request import (
    DescribableLogDirTopic,
    DescribeLogDirsRequest,
)
from strom.protocol.messages.describe_log_dirs_response import DescribeLogDirsResponse
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    IncrementalAlterConfigsRequest,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from strom.protocol.messages.incremental_alter_configs_response import (
    IncrementalAlterConfigsResponse,
)
from strom.protocol.messages.offset_for_leader_epoch_request import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderPartition,
    OffsetForLeaderTopic,
)
from strom.protocol.messages.offset_for_leader_epoch_response import OffsetForLeaderEpochResponse
from tests.support.broker_process import BrokerProcess

TIMEOUT = 15
# confluent-kafka deprecates the legacy AlterConfigs API, which these tests drive on purpose.
LEGACY_ALTER = pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


@pytest.fixture
def kp_admin(broker: BrokerProcess) -> Iterator[kafka.KafkaAdminClient]:
    client = kafka.KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=10000)
    yield client
    client.close()


def _create(admin: AdminClient, topic: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(TIMEOUT)


def _produce(broker: BrokerProcess, topic: str, partition: int, count: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    errors: list[object] = []

    def delivered(error: object, _: object) -> None:
        if error is not None:
            errors.append(error)

    for index in range(count):
        # Keyed: some topics here are compacted, and those refuse records without a key.
        value = f"{partition}-{index}".encode()
        producer.produce(topic, value=value, key=value, partition=partition, on_delivery=delivered)
    assert producer.flush(TIMEOUT) == 0
    assert errors == []


def _consume_from_beginning(broker: BrokerProcess, topic: str, partition: int, expected: int) -> list[int]:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "admin-test", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, partition, confluent_kafka.OFFSET_BEGINNING)])
    offsets: list[int] = []
    deadline = time.monotonic() + TIMEOUT
    while len(offsets) < expected and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None:
            assert message.error() is None, message.error()
            offsets.append(message.offset())
    consumer.close()
    return offsets


def _watermarks(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "admin-test"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
    finally:
        consumer.close()
    return low, high


def _error_code(future: object) -> int:
    with pytest.raises(KafkaException) as caught:
        future.result(TIMEOUT)  # type: ignore[attr-defined]
    error = caught.value.args[0]
    assert isinstance(error, KafkaError)
    return int(error.code())


def _topic_configs(admin: AdminClient, topic: str) -> dict[str, ConfigEntry]:
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return dict(future.result(TIMEOUT))


def _call(broker: BrokerProcess, request: Message, version: int) -> Message:
    """One request over a fresh connection with Strom's codec; the decoded response."""
    host, port = broker.bootstrap.rsplit(":", 1)
    assert request.API_KEY is not None
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(encode_request(request, version, 7, "admin-test"))
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            assert data, "the broker closed the connection"
            frames = decoder.feed(data)
            if frames:
                correlation_id, response = decode_response(frames[0], request.API_KEY, version)
                assert correlation_id == 7
                return response


# -- CreatePartitions ------------------------------------------------------------------------


def test_create_partitions_with_confluent_kafka(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "grow")
    validated = admin.create_partitions([NewPartitions("grow", 3)], validate_only=True)
    validated["grow"].result(TIMEOUT)
    assert len(admin.list_topics(timeout=TIMEOUT).topics["grow"].partitions) == 1

    admin.create_partitions([NewPartitions("grow", 3, replica_assignment=[[1], [1]])])["grow"].result(TIMEOUT)
    assert sorted(admin.list_topics(timeout=TIMEOUT).topics["grow"].partitions) == [0, 1, 2]
    _produce(broker, "grow", 2, 5)
    assert _consume_from_beginning(broker, "grow", 2, 5) == [0, 1, 2, 3, 4]

    failures = admin.create_partitions(
        [
            NewPartitions("grow", 2),
            NewPartitions("no-such-topic", 4),
            NewPartitions("grow", 5, replica_assignment=[[1], [99]]),
        ]
    )
    assert _error_code(failures["no-such-topic"]) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # "grow" named twice: one answer, Kafka's for duplicates (librdkafka refuses two).
    assert _error_code(failures["grow"]) == ErrorCode.INVALID_REQUEST
    single = admin.create_partitions([NewPartitions("grow", 2)])
    assert _error_code(single["grow"]) == ErrorCode.INVALID_PARTITIONS
    wrong_broker = admin.create_partitions([NewPartitions("grow", 5, replica_assignment=[[1], [99]])])
    assert _error_code(wrong_broker["grow"]) == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert len(admin.list_topics(timeout=TIMEOUT).topics["grow"].partitions) == 3


def test_create_partitions_with_kafka_python_survives_restart(
    broker: BrokerProcess, kp_admin: kafka.KafkaAdminClient
) -> None:
    kp_admin.create_topics([kafka.admin.NewTopic("kp-grow", 2, 1)])
    kp_admin.create_partitions({"kp-grow": {"count": 4, "assignments": [[1], [1]]}})
    with pytest.raises(kafka.errors.InvalidReplicationAssignmentError):
        kp_admin.create_partitions({"kp-grow": {"count": 6, "assignments": [[1]]}})
    with pytest.raises(kafka.errors.InvalidPartitionsError):
        kp_admin.create_partitions({"kp-grow": 4})
    kp_admin.close()

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert sorted(admin.list_topics(timeout=TIMEOUT).topics["kp-grow"].partitions) == [0, 1, 2, 3]
    _produce(broker, "kp-grow", 3, 2)
    assert _watermarks(broker, "kp-grow", 3) == (0, 2)


# -- DeleteRecords -----------------------------------------------------------------------------


def test_delete_records_with_confluent_kafka_moves_low_watermark(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "trim")
    _produce(broker, "trim", 0, 10)
    (future,) = admin.delete_records([TopicPartition("trim", 0, 4)]).values()
    assert future.result(TIMEOUT).low_watermark == 4
    assert _watermarks(broker, "trim", 0) == (4, 10)
    assert _consume_from_beginning(broker, "trim", 0, 6) == [4, 5, 6, 7, 8, 9]

    (behind,) = admin.delete_records([TopicPartition("trim", 0, 2)]).values()
    assert behind.result(TIMEOUT).low_watermark == 4  # below the log start: nothing changes
    (beyond,) = admin.delete_records([TopicPartition("trim", 0, 11)]).values()
    assert _error_code(beyond) == ErrorCode.OFFSET_OUT_OF_RANGE
    (to_end,) = admin.delete_records([TopicPartition("trim", 0, confluent_kafka.OFFSET_END)]).values()
    assert to_end.result(TIMEOUT).low_watermark == 10

    broker.restart()
    assert _watermarks(broker, "trim", 0) == (10, 10)


def test_delete_records_with_kafka_python_and_errors(
    broker: BrokerProcess, admin: AdminClient, kp_admin: kafka.KafkaAdminClient
) -> None:
    _create(admin, "kp-trim", 2)
    _create(admin, "compacted", 1, {"cleanup.policy": "compact"})
    _produce(broker, "kp-trim", 1, 5)
    _produce(broker, "compacted", 0, 3)
    result = kp_admin.delete_records({kafka.TopicPartition("kp-trim", 1): 3})
    assert result[kafka.TopicPartition("kp-trim", 1)]["low_watermark"] == 3
    assert _watermarks(broker, "kp-trim", 1) == (3, 5)
    assert _watermarks(broker, "kp-trim", 0) == (0, 0)
    with pytest.raises(kafka.errors.PolicyViolationError):
        kp_admin.delete_records({kafka.TopicPartition("compacted", 0): 1})
    assert _watermarks(broker, "compacted", 0) == (0, 3)
    with pytest.raises(kafka.errors.OffsetOutOfRangeError):
        kp_admin.delete_records({kafka.TopicPartition("kp-trim", 1): 6}, partition_leader_id=1)
    with pytest.raises(kafka.errors.UnknownTopicOrPartitionError):
        kp_admin.delete_records({kafka.TopicPartition("kp-trim", 7): 0}, partition_leader_id=1)


# -- DescribeConfigs ---------------------------------------------------------------------------


def test_describe_topic_configs_sources_and_synonyms(admin: AdminClient) -> None:
    _create(admin, "described", 1, {"retention.ms": "3600000"})
    configs = _topic_configs(admin, "described")
    retention = configs["retention.ms"]
    assert retention.value == "3600000"
    assert retention.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not retention.is_read_only and not retention.is_sensitive
    # As Kafka 3.9: log.retention.ms has no default of its own (log.retention.hours has), so
    # only the topic's override is listed.
    assert [(s.name, s.value) for s in retention.synonyms.values()] == [("retention.ms", "3600000")]
    segment = configs["segment.bytes"]
    assert (segment.value, segment.source) == (str(1 << 30), ConfigSource.DEFAULT_CONFIG.value)
    assert configs["cleanup.policy"].value == "delete"
    assert {"max.message.bytes", "compression.type", "min.cleanable.dirty.ratio"} <= set(configs)

    (missing,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "no-such-topic")]).values()
    assert _error_code(missing) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_describe_configs_reports_static_broker_settings(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", {"log.retention.ms": "7200000", "num.partitions": "3"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        _create(admin, "inherits")
        retention = _topic_configs(admin, "inherits")["retention.ms"]
        assert (retention.value, retention.source) == ("7200000", ConfigSource.STATIC_BROKER_CONFIG.value)
        # librdkafka keys synonyms by name, so the two layers of log.retention.ms show on the wire.
        request = DescribeConfigsRequest((DescribeConfigsResource(2, "inherits", ("retention.ms",)),), include_synonyms=True)
        response = _call(broker, request, 4)
        assert isinstance(response, DescribeConfigsResponse)
        (entry,) = response.results[0].configs
        assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
            ("log.retention.ms", "7200000", ConfigSource.STATIC_BROKER_CONFIG.value),
            ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),  # Kafka's default synonym
        ]

        (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
        broker_configs = dict(future.result(TIMEOUT))
        assert broker_configs["num.partitions"].value == "3"
        assert broker_configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
        assert broker_configs["log.retention.ms"].value == "7200000"
        assert broker_configs["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value
        # Static-only settings are read-only; the dynamic ones (KIP-226) are not.
        assert broker_configs["num.partitions"].is_read_only
        assert not broker_configs["log.retention.ms"].is_read_only
    finally:
        broker.stop()


def test_describe_configs_with_kafka_python(admin: AdminClient, kp_admin: kafka.KafkaAdminClient) -> None:
    _create(admin, "kp-described", 1, {"segment.ms": "60000"})
    topic = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-described")
    modified = kp_admin.describe_configs([topic])["topic"]["kp-described"]
    assert set(modified) == {"segment.ms"}
    assert modified["segment.ms"]["value"] == "60000"
    everything = kp_admin.describe_configs([topic], include_synonyms=True, config_filter="all")
    all_topic = everything["topic"]["kp-described"]
    assert all_topic["retention.ms"]["config_source"] == "DEFAULT_CONFIG"
    assert all_topic["segment.ms"]["synonyms"][0]["source"] == "DYNAMIC_TOPIC_CONFIG"
    keys = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-described", {"cleanup.policy": None, "retention.ms": None})
    filtered = kp_admin.describe_configs([keys], config_filter="all")["topic"]["kp-described"]
    assert set(filtered) == {"cleanup.policy", "retention.ms"}  # the configuration_keys filter
    node = KafkaPythonConfigResource(ConfigResourceType.BROKER, "1")
    broker = kp_admin.describe_configs([node], config_filter="all")["broker"]["1"]
    assert broker["node.id"]["value"] == "1"
    loggers = kp_admin.describe_configs([KafkaPythonConfigResource(ConfigResourceType.BROKER_LOGGER, "1")], config_filter="all")
    assert "root" in loggers["broker_logger"]["1"]


def test_describe_configs_versions_over_the_wire(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "wire", 1, {"retention.ms": "1000"})
    resources = (
        DescribeConfigsResource(2, "wire", ("retention.ms", "segment.ms")),
        DescribeConfigsResource(8, ""),
        DescribeConfigsResource(16, "whatever"),
        DescribeConfigsResource(4, "2"),  # clients route this to broker 2, which does not exist
        DescribeConfigsResource(4, "one"),
    )
    for version in range(5):
        request = DescribeConfigsRequest(resources, include_synonyms=version >= 1, include_documentation=version >= 3)
        response = _call(broker, request, version)
        assert isinstance(response, DescribeConfigsResponse)
        topic, logger, unsupported, other_broker, not_a_number = response.results
        assert topic.error_code == 0
        entries = {entry.name: entry for entry in topic.configs}
        assert set(entries) == {"retention.ms", "segment.ms"}
        assert entries["retention.ms"].value == "1000"
        if version == 0:
            # Kafka 3.9 sends false for every config, a default one too.
            assert (entries["retention.ms"].is_default, entries["segment.ms"].is_default) == (False, False)
        else:
            assert entries["retention.ms"].config_source == 1 and entries["segment.ms"].config_source == 5
            assert entries["retention.ms"].synonyms[0].source == 1
        if version >= 3:
            assert entries["retention.ms"].config_type == 5  # LONG
            assert entries["retention.ms"].documentation
        assert logger.error_code == ErrorCode.INVALID_REQUEST  # BROKER_LOGGER needs a broker id
        assert unsupported.error_code == ErrorCode.INVALID_REQUEST
        assert other_broker.error_code == not_a_number.error_code == ErrorCode.INVALID_REQUEST
        assert other_broker.configs == not_a_number.configs == ()


# -- AlterConfigs and IncrementalAlterConfigs --------------------------------------------------


@LEGACY_ALTER
def test_alter_configs_with_confluent_kafka_persist_across_restart(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "altered", 1, {"segment.ms": "60000"})
    legacy = ConfigResource(ResourceType.TOPIC, "altered", set_config={"retention.ms": "120000"})
    (future,) = admin.alter_configs([legacy]).values()
    future.result(TIMEOUT)
    configs = _topic_configs(admin, "altered")
    assert configs["retention.ms"].value == "120000"
    # The legacy API replaces the whole set: segment.ms went back to its default.
    assert configs["segment.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    def incremental(*entries: ConfigEntry, validate_only: bool = False) -> object:
        resource = ConfigResource(ResourceType.TOPIC, "altered", incremental_configs=list(entries))
        (result,) = admin.incremental_alter_configs([resource], validate_only=validate_only).values()
        return result

    append = ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)
    incremental(append).result(TIMEOUT)  # type: ignore[attr-defined]
    assert _topic_configs(admin, "altered")["cleanup.policy"].value == "delete,compact"
    subtract = ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT)
    max_bytes = ConfigEntry("max.message.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)
    incremental(subtract, max_bytes).result(TIMEOUT)  # type: ignore[attr-defined]
    dry_run = ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)
    incremental(dry_run, validate_only=True).result(TIMEOUT)  # type: ignore[attr-defined]

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    configs = _topic_configs(admin, "altered")
    assert configs["cleanup.policy"].value == "compact"
    assert configs["max.message.bytes"].value == "2000000"
    assert configs["retention.ms"].value == "120000"
    assert (broker.data_dir / "topic-configs" / "altered.properties").exists()

    incremental(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE)).result(TIMEOUT)  # type: ignore[attr-defined]
    assert _topic_configs(admin, "altered")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


@LEGACY_ALTER
def test_alter_configs_errors_with_confluent_kafka(admin: AdminClient) -> None:
    _create(admin, "strict")

    def incremental(resource: ConfigResource) -> object:
        (result,) = admin.incremental_alter_configs([resource]).values()
        return result

    def topic_set(name: str, value: str, operation: AlterConfigOpType = AlterConfigOpType.SET) -> ConfigResource:
        entry = ConfigEntry(name, value, incremental_operation=operation)
        return ConfigResource(ResourceType.TOPIC, "strict", incremental_configs=[entry])

    assert _error_code(incremental(topic_set("no.such.config", "1"))) == ErrorCode.INVALID_CONFIG
    assert _error_code(incremental(topic_set("retention.ms", "soon"))) == ErrorCode.INVALID_CONFIG
    assert _error_code(incremental(topic_set("retention.ms", "5", AlterConfigOpType.APPEND))) == ErrorCode.INVALID_CONFIG
    assert _error_code(incremental(topic_set("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT))) == ErrorCode.INVALID_CONFIG
    missing = ConfigResource(ResourceType.TOPIC, "no-such-topic", incremental_configs=[ConfigEntry("retention.ms", "1", incremental_operation=AlterConfigOpType.SET)])
    assert _error_code(incremental(missing)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)])
    assert _error_code(incremental(node)) == ErrorCode.INVALID_REQUEST
    (legacy,) = admin.alter_configs([ConfigResource(ResourceType.TOPIC, "strict", set_config={"segment.bytes": "1"})]).values()
    assert _error_code(legacy) == ErrorCode.INVALID_CONFIG
    (legacy_node,) = admin.alter_configs([ConfigResource(ResourceType.BROKER, "1", set_config={"num.partitions": "3"})]).values()
    assert _error_code(legacy_node) == ErrorCode.INVALID_REQUEST
    configs = _topic_configs(admin, "strict")
    assert all(entry.source == ConfigSource.DEFAULT_CONFIG.value for entry in configs.values())


@LEGACY_ALTER
def test_dynamic_broker_configs_with_confluent_kafka_persist_across_restart(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "follows-defaults")

    def incremental(*entries: ConfigEntry) -> object:
        resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=list(entries))
        (result,) = admin.incremental_alter_configs([resource]).values()
        return result

    def broker_configs() -> dict[str, ConfigEntry]:
        (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
        return dict(future.result(TIMEOUT))

    # librdkafka refuses an empty resource name, so the cluster default goes over the wire.
    request = IncrementalAlterConfigsRequest(
        resources=(IncrementalResource(4, "", (AlterableConfig("log.retention.ms", 0, "3600000"),)),)
    )
    response = _call(broker, request, 1)
    assert isinstance(response, IncrementalAlterConfigsResponse)
    assert [(r.resource_name, r.error_code) for r in response.responses] == [("", ErrorCode.NONE)]
    set_node = ConfigEntry("log.cleaner.backoff.ms", "20000", incremental_operation=AlterConfigOpType.SET)
    incremental(set_node).result(TIMEOUT)  # type: ignore[attr-defined]
    # The legacy API replaces this broker's whole layer: log.cleaner.backoff.ms goes.
    (legacy,) = admin.alter_configs([ConfigResource(ResourceType.BROKER, "1", set_config={"log.segment.bytes": "2000000"})]).values()
    legacy.result(TIMEOUT)
    node = broker_configs()
    assert (node["log.segment.bytes"].value, node["log.segment.bytes"].source) == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert (node["log.retention.ms"].value, node["log.retention.ms"].source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert node["log.cleaner.backoff.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not node["log.segment.bytes"].is_read_only
    topic = _topic_configs(admin, "follows-defaults")["retention.ms"]
    assert (topic.value, topic.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)

    static_only = ConfigEntry("num.partitions", "3", incremental_operation=AlterConfigOpType.SET)
    with pytest.raises(KafkaException) as caught:
        incremental(static_only).result(TIMEOUT)  # type: ignore[attr-defined]
    error = caught.value.args[0]
    assert (error.code(), error.str()) == (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)")

    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = broker_configs()
    assert (node["log.segment.bytes"].value, node["log.segment.bytes"].source) == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    topic = _topic_configs(admin, "follows-defaults")["retention.ms"]
    assert (topic.value, topic.source) == ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    describe_default = DescribeConfigsRequest((DescribeConfigsResource(4, "", None),))
    described = _call(broker, describe_default, 4)
    assert isinstance(described, DescribeConfigsResponse)
    assert [(c.name, c.value, c.config_source) for c in described.results[0].configs] == [
        ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    ]


def test_deprecated_topic_configs_are_accepted_with_confluent_kafka(admin: AdminClient) -> None:
    _create(admin, "old-tools", 1, {"message.format.version": "0.10.2", "message.downconversion.enable": "false"})
    configs = _topic_configs(admin, "old-tools")
    assert (configs["message.format.version"].value, configs["message.format.version"].source) == (
        "0.10.2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    _create(admin, "plain")
    assert _topic_configs(admin, "plain")["message.format.version"].value == "3.0-IV1"


def test_alter_configs_with_kafka_python(admin: AdminClient, kp_admin: kafka.KafkaAdminClient) -> None:
    _create(admin, "kp-altered", 1, {"segment.ms": "60000"})
    resource = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-altered", {"retention.ms": "99000"})
    assert kp_admin.alter_configs([resource], incremental=False) == {"topic": {"kp-altered": "OK"}}
    # kafka-python's legacy path re-sends the other modified settings, so segment.ms stays.
    configs = _topic_configs(admin, "kp-altered")
    assert (configs["retention.ms"].value, configs["segment.ms"].value) == ("99000", "60000")

    change = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-altered", {"cleanup.policy": ("APPEND", "compact")})
    assert kp_admin.alter_configs([change], incremental=True) == {"topic": {"kp-altered": "OK"}}
    dry = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-altered", {"segment.ms": "1000"})
    assert kp_admin.alter_configs([dry], validate_only=True) == {"topic": {"kp-altered": "OK"}}
    configs = _topic_configs(admin, "kp-altered")
    assert (configs["cleanup.policy"].value, configs["segment.ms"].value) == ("delete,compact", "60000")
    bad = KafkaPythonConfigResource(ConfigResourceType.TOPIC, "kp-altered", {"retention.ms": "never"})
    result = kp_admin.alter_configs([bad], incremental=True)
    assert result["topic"]["kp-altered"].startswith("[Error 40] InvalidConfigurationError")


# -- DescribeCluster, DescribeLogDirs ----------------------------------------------------------


def test_describe_cluster(broker: BrokerProcess, admin: AdminClient, kp_admin: kafka.KafkaAdminClient) -> None:
    # librdkafka builds describe_cluster from Metadata; kafka-python sends DescribeCluster.
    cluster_id = admin.describe_cluster().result(TIMEOUT).cluster_id
    described = kp_admin.describe_cluster()
    host, port = broker.bootstrap.rsplit(":", 1)
    assert described["cluster_id"] == cluster_id and cluster_id
    assert described["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]] == [(1, host, int(port))]
    assert {"DESCRIBE", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"} <= set(described["authorized_operations"])

    for version in range(2):
        plain = _call(broker, DescribeClusterRequest(), version)
        assert isinstance(plain, DescribeClusterResponse)
        assert (plain.error_code, plain.cluster_id, plain.controller_id) == (0, cluster_id, 1)
        assert plain.cluster_authorized_operations == -(2**31)  # not asked for
    controllers = _call(broker, DescribeClusterRequest(endpoint_type=2), 1)
    assert isinstance(controllers, DescribeClusterResponse)
    assert controllers.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_describe_log_dirs_with_kafka_python(
    broker: BrokerProcess, admin: AdminClient, kp_admin: kafka.KafkaAdminClient
) -> None:
    _create(admin, "sized", 2)
    _create(admin, "other")
    _produce(broker, "sized", 1, 20)
    (answer,) = kp_admin.describe_log_dirs()
    (log_dir,) = answer["log_dirs"]
    assert log_dir["error_code"] == 0
    assert os.path.samefile(log_dir["log_dir"], broker.data_dir)
    sizes = {(t["name"], p["partition_index"]): p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    on_disk = sum(f.stat().st_size for f in (broker.data_dir / "sized-1").glob("*.log"))
    assert sizes[("sized", 1)] == on_disk > 0
    assert sizes[("sized", 0)] == 0 and ("other", 0) in sizes
    assert all(p["offset_lag"] == 0 and not p["is_future_key"] for t in log_dir["topics"] for p in t["partitions"])
    disk = os.statvfs(broker.data_dir)
    assert log_dir["total_bytes"] == disk.f_blocks * disk.f_frsize
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]

    (only,) = kp_admin.describe_log_dirs({"sized": [1], "no-such-topic": [0]})
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["log_dirs"][0]["topics"]] == [("sized", [1])]


# -- OffsetForLeaderEpoch ----------------------------------------------------------------------


def test_offset_for_leader_epoch_over_the_wire(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "epochs")
    _produce(broker, "epochs", 0, 7)
    partitions = (
        OffsetForLeaderPartition(0, current_leader_epoch=-1, leader_epoch=0),
        OffsetForLeaderPartition(0, current_leader_epoch=-1, leader_epoch=3),
        OffsetForLeaderPartition(1, current_leader_epoch=-1, leader_epoch=0),
    )
    for version in range(5):
        request = OffsetForLeaderEpochRequest(
            replica_id=-1, topics=(OffsetForLeaderTopic("epochs", partitions), OffsetForLeaderTopic("nope", partitions[:1]))
        )
        response = _call(broker, request, version)
        assert isinstance(response, OffsetForLeaderEpochResponse)
        known, unknown = response.topics
        current, future, missing = known.partitions
        assert (current.error_code, current.end_offset) == (0, 7)
        assert current.leader_epoch == (0 if version >= 1 else -1)
        assert (future.error_code, future.leader_epoch, future.end_offset) == (0, -1, -1)
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert unknown.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    fenced = OffsetForLeaderEpochRequest(
        topics=(OffsetForLeaderTopic("epochs", (OffsetForLeaderPartition(0, current_leader_epoch=5, leader_epoch=0),)),)
    )
    response = _call(broker, fenced, 4)
    assert isinstance(response, OffsetForLeaderEpochResponse)
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_recreated_topic_does_not_inherit_the_deleted_ones_configs(broker: BrokerProcess, admin: AdminClient) -> None:
    _create(admin, "reborn", 1, {"retention.ms": "5000"})
    admin.delete_topics(["reborn"])["reborn"].result(TIMEOUT)
    _create(admin, "reborn")
    assert _topic_configs(admin, "reborn")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    broker.restart()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _topic_configs(admin, "reborn")["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_every_version_of_every_admin_api_answers(broker: BrokerProcess, admin: AdminClient) -> None:
    """Each served version encodes its answer (no field a version lacks is set) and does its work."""
    _create(admin, "versions")
    _produce(broker, "versions", 0, 10)
    for version in range(4):
        grow = CreatePartitionsRequest((CreatePartitionsTopic("versions", version + 2, None),), 5000, False)
        assert _errors(_call(broker, grow, version)) == [0]
    for version in range(3):
        trim = DeleteRecordsRequest((DeleteRecordsTopic("versions", (DeleteRecordsPartition(0, version + 1),)),), 5000)
        assert _errors(_call(broker, trim, version)) == [0]
    assert _watermarks(broker, "versions", 0) == (3, 10)
    for version in range(3):
        legacy = AlterConfigsRequest((AlterConfigsResource(2, "versions", (LegacyAlterableConfig("retention.ms", str(1000 + version)),)),))
        assert _errors(_call(broker, legacy, version)) == [0]
    for version in range(2):
        change = IncrementalAlterConfigsRequest((IncrementalResource(2, "versions", (AlterableConfig("segment.ms", 0, str(5000 + version)),)),))
        assert _errors(_call(broker, change, version)) == [0]
    configs = _topic_configs(admin, "versions")
    assert (configs["retention.ms"].value, configs["segment.ms"].value) == ("1002", "5001")
    for version in range(5):
        response = _call(broker, DescribeLogDirsRequest((DescribableLogDirTopic("versions", (0, 1, 2, 3)),)), version)
        assert isinstance(response, DescribeLogDirsResponse)
        (result,) = response.results
        assert [p.partition_index for p in result.topics[0].partitions] == [0, 1, 2, 3]
        assert (result.total_bytes > 0) == (version >= 4)
    node = _call(broker, DescribeConfigsRequest((DescribeConfigsResource(4, ""),)), 4)
    assert isinstance(node, DescribeConfigsResponse)
    assert (node.results[0].error_code, node.results[0].configs) == (0, ())  # no dynamic cluster defaults


def _errors(response: Message) -> list[int]:
    """The error codes of a CreatePartitions/DeleteRecords/AlterConfigs response."""
    results = getattr(response, "results", None) or getattr(response, "responses", None)
    if results is None:
        return [p.error_code for t in response.topics for p in t.partitions]  # type: ignore[attr-defined]
    return [r.error_code for r in results]
