"""AsyncAdmin against Strom and Tansu: topics, configs, offsets, records and consumer groups.

Records are produced and groups formed with confluent-kafka, so what the admin client
reports is checked against an independent client's view. Where Tansu lacks an API the
test asserts the clear error Strom's client gives instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CkTopicPartition

from strom.client.admin import AsyncAdmin
from strom.client.admin_types import (
    AdminBatchError,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConfigSource,
    NewTopic,
    TopicPartition,
)
from strom.client.errors import KafkaError, UnsupportedVersionError
from strom.protocol.error_codes import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import Kafka

T = TypeVar("T")
DEADLINE = 30.0


def _run(kafka: Kafka, body: Callable[[AsyncAdmin], Awaitable[T]], **config: object) -> T:
    async def main() -> T:
        async with AsyncAdmin({"bootstrap.servers": kafka.bootstrap, **config}) as admin:
            return await body(admin)

    return asyncio.run(main())


def _produce(kafka: Kafka, topic: str, timestamps: list[int], partition: int = 0) -> None:
    """One record per batch (flushed one by one): Tansu's ListOffsets "latest" counts batches."""
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 0})
    for index, timestamp in enumerate(timestamps):
        producer.produce(topic, value=f"v{index}".encode(), partition=partition, timestamp=timestamp)
        assert producer.flush(15) == 0


def _created(kafka: Kafka, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    topic = kafka.topic("admin")
    _run(kafka, lambda admin: admin.create_topics([NewTopic(topic, partitions, 1, configs=configs or {})]))
    return topic


def test_create_list_describe_delete(kafka: Kafka) -> None:
    topic, checked = kafka.topic("admin"), kafka.topic("validated")

    async def body(admin: AsyncAdmin) -> None:
        created = await admin.create_topics([NewTopic(topic, 3, 1)])
        assert created[topic].name == topic
        await admin.create_topics([NewTopic(checked, 2, 1)], validate_only=True)
        listed = await admin.list_topics()
        # Tansu 0.6.0 ignores validate_only and creates the topic
        assert topic in listed and (checked in listed) == (kafka.kind == "tansu")
        described = (await admin.describe_topics([topic]))[topic]
        assert [p.partition for p in described.partitions] == [0, 1, 2]
        brokers = set(admin._cluster.metadata.brokers)
        for partition in described.partitions:
            assert partition.leader in brokers and partition.replicas == (partition.leader,)
            assert partition.isr == (partition.leader,)
        assert described.topic_id == listed[topic].topic_id and described.topic_id.int != 0
        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
        with pytest.raises(KafkaError) as gone:
            await admin.describe_topics([topic])
        assert gone.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    _run(kafka, body)


def test_create_errors_are_per_topic(kafka: Kafka) -> None:
    existing, fresh, empty = _created(kafka), kafka.topic("fresh"), kafka.topic("empty")

    async def body(admin: AsyncAdmin) -> None:
        with pytest.raises(AdminBatchError) as failed:
            await admin.create_topics([NewTopic(existing, 1, 1), NewTopic(fresh, 1, 1)])
        assert failed.value.error_code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert list(failed.value.errors) == [existing] and list(failed.value.results) == [fresh]
        if kafka.kind == "tansu":  # Tansu 0.6.0 creates a topic with no partitions
            assert (await admin.create_topics([NewTopic(empty, 0, 1)]))[empty].num_partitions == 0
            assert (await admin.describe_topics([empty]))[empty].partitions == ()
            return
        with pytest.raises(KafkaError) as invalid:
            await admin.create_topics([NewTopic(empty, 0, 1)])
        assert invalid.value.error_code is ErrorCode.INVALID_PARTITIONS
        assert empty not in await admin.list_topics()

    _run(kafka, body)


def test_create_partitions(kafka: Kafka) -> None:
    topic = _created(kafka, partitions=1)

    async def body(admin: AsyncAdmin) -> None:
        if kafka.kind == "tansu":  # Tansu does not serve CreatePartitions
            with pytest.raises(UnsupportedVersionError, match="API key 37"):
                await admin.create_partitions({topic: 3})
            return
        await admin.create_partitions({topic: 3})
        described = await admin.describe_topics([topic])
        assert [p.partition for p in described[topic].partitions] == [0, 1, 2]
        with pytest.raises(KafkaError) as shrink:
            await admin.create_partitions({topic: 2})
        assert shrink.value.error_code is ErrorCode.INVALID_PARTITIONS

    _run(kafka, body)


def test_topic_config_round_trip(kafka: Kafka) -> None:
    topic = _created(kafka, configs={"cleanup.policy": "delete"})
    resource = ConfigResource(ConfigResourceType.TOPIC, topic)

    async def body(admin: AsyncAdmin) -> None:
        await admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", "3600000")]})
        configs = (await admin.describe_configs([resource]))[resource]
        assert configs["retention.ms"].value == "3600000" and configs["cleanup.policy"].value == "delete"
        await admin.incremental_alter_configs({resource: [AlterConfigOp("retention.ms", op=AlterConfigOpType.DELETE)]})
        reverted = (await admin.describe_configs([resource]))[resource]
        if kafka.kind == "strom":
            assert configs["retention.ms"].source is ConfigSource.DYNAMIC_TOPIC_CONFIG
            assert reverted["retention.ms"].value != "3600000" and reverted["retention.ms"].is_default
        else:  # Tansu 0.6.0 lists only the topic's own configs, each as DEFAULT_CONFIG
            assert configs["retention.ms"].source is ConfigSource.DEFAULT_CONFIG
            assert "retention.ms" not in reverted

    _run(kafka, body)


def test_broker_configs(kafka: Kafka) -> None:
    async def body(admin: AsyncAdmin) -> None:
        await admin.list_topics()
        node = min(admin._cluster.metadata.brokers)
        resource = ConfigResource(ConfigResourceType.BROKER, str(node))
        configs = (await admin.describe_configs([resource]))[resource]
        if kafka.kind == "strom":
            assert "log.retention.ms" in configs or "log.retention.hours" in configs
        else:  # Tansu 0.6.0 describes no broker configs
            assert configs == {}
        absent = ConfigResource(ConfigResourceType.BROKER, str(max(admin._cluster.metadata.brokers) + 100))
        with pytest.raises(KafkaError) as unknown:
            await admin.describe_configs([resource, absent])
        assert unknown.value.error_code is ErrorCode.BROKER_NOT_AVAILABLE

    _run(kafka, body)


def test_list_offsets(kafka: Kafka) -> None:
    topic = _created(kafka)
    _produce(kafka, topic, [1_000, 2_000, 3_000])
    tp = TopicPartition(topic, 0)

    async def body(admin: AsyncAdmin) -> None:
        earliest = await admin.list_offsets({tp: "earliest"})
        latest = await admin.list_offsets({tp: "latest"})
        by_time = await admin.list_offsets({tp: 2_000})
        after_all = await admin.list_offsets({tp: 4_000})
        assert earliest[tp].offset == 0 and latest[tp].offset == 3
        if kafka.kind == "strom":
            assert (by_time[tp].offset, by_time[tp].timestamp) == (1, 2_000)
            assert after_all[tp].offset == -1
            newest = await admin.list_offsets({tp: "max-timestamp"})
            assert (newest[tp].offset, newest[tp].timestamp) == (2, 3_000)
        else:  # Tansu ignores the timestamp and answers the log start (tests/compat/FINDINGS.md)
            assert by_time[tp].offset == after_all[tp].offset == 0

    _run(kafka, body)


def test_list_offsets_of_a_missing_partition_fails_after_retrying(kafka: Kafka) -> None:
    topic = _created(kafka)

    async def body(admin: AsyncAdmin) -> None:
        with pytest.raises(KafkaError) as missing:
            await admin.list_offsets({TopicPartition(topic, 0): "latest", TopicPartition(topic, 5): "latest"})
        assert missing.value.error_code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert isinstance(missing.value, AdminBatchError)
        assert list(missing.value.errors) == [(topic, 5)] and list(missing.value.results) == [(topic, 0)]

    _run(kafka, body, **{"request.timeout.ms": 1_000})


def test_delete_records_moves_the_low_watermark(kafka: Kafka) -> None:
    topic = _created(kafka)
    _produce(kafka, topic, [1_000 * i for i in range(1, 6)])
    tp = TopicPartition(topic, 0)

    async def body(admin: AsyncAdmin) -> None:
        if kafka.kind == "tansu":  # Tansu 0.6.0's memory engine panics and drops the connection
            with pytest.raises(KafkaError, match=r"connection to .* lost") as dropped:
                await admin.delete_records({tp: 3})
            assert dropped.value.error_code is ErrorCode.NETWORK_EXCEPTION
            return
        low = await admin.delete_records({tp: 3})
        assert low == {tp: 3}
        assert (await admin.list_offsets({tp: "earliest"}))[tp].offset == 3

    _run(kafka, body, **{"request.timeout.ms": 3_000 if kafka.kind == "tansu" else 30_000})


def _form_group(kafka: Kafka, topic: str, group: str, partitions: int) -> Consumer:
    """A confluent-kafka member that consumed everything and committed."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "client.id": "lag-reader",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "session.timeout.ms": 6_000, "heartbeat.interval.ms": 500})
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE
    while len(consumer.assignment()) < partitions:
        assert time.monotonic() < deadline, "no assignment"
        consumer.poll(0.1)
    consumer.commit(offsets=[CkTopicPartition(topic, 0, 2)], asynchronous=False)
    return consumer


def test_consumer_group_admin(kafka: Kafka) -> None:
    topic, group = _created(kafka, partitions=2), kafka.topic("group")
    _produce(kafka, topic, [1_000, 2_000, 3_000, 4_000])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    consumer = _form_group(kafka, topic, group, 2)

    async def while_active(admin: AsyncAdmin) -> None:
        listed = {g.group_id: g for g in await admin.list_groups()}
        assert listed[group].protocol_type == "consumer"
        described = (await admin.describe_groups([group]))[group]
        assert described.state == "Stable" and described.protocol_type == "consumer"
        [member] = described.members
        assert member.member_id.startswith("lag-reader")
        if kafka.kind == "tansu":  # Tansu 0.6.0 leaves these out of DescribeGroups
            assert (described.protocol, member.client_id, member.host, member.assignment) == ("", "", "", ())
        else:
            assert described.protocol in ("range", "roundrobin", "cooperative-sticky")
            assert member.client_id == "lag-reader" and member.host
            assert sorted(member.assignment) == [tp0, tp1]
        committed = await admin.list_consumer_group_offsets(group)
        assert {tp: c.offset for tp, c in committed.items()} == {tp0: 2}
        lag = await admin.group_lag(group)
        assert [(tp, entry.committed, entry.end_offset, entry.lag) for tp, entry in lag.items()] == [(tp0, 2, 4, 2)]
        if kafka.kind == "strom":  # Tansu 0.6.0 deletes a group with members, and any unknown one
            with pytest.raises(KafkaError) as busy:
                await admin.delete_groups([group])
            assert busy.value.error_code is ErrorCode.NON_EMPTY_GROUP

    try:
        _run(kafka, while_active)
    finally:
        consumer.close()

    async def after_close(admin: AsyncAdmin) -> None:
        await admin.delete_groups([group])
        assert group not in {g.group_id for g in await admin.list_groups()}
        assert await admin.list_consumer_group_offsets(group) == {}

    _run(kafka, after_close)


def test_alter_and_delete_group_offsets(kafka: Kafka) -> None:
    topic, group = _created(kafka, partitions=2), kafka.topic("reset")
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def body(admin: AsyncAdmin) -> None:
        await admin.alter_consumer_group_offsets(group, {tp0: 0, tp1: 0})
        assert {tp: c.offset for tp, c in (await admin.list_consumer_group_offsets(group)).items()} == {
            tp0: 0, tp1: 0}
        only = await admin.list_consumer_group_offsets(group, [tp1])
        assert list(only) == [tp1]
        if kafka.kind == "tansu":  # Tansu does not serve OffsetDelete
            with pytest.raises(UnsupportedVersionError, match="API key 47"):
                await admin.delete_consumer_group_offsets(group, [tp0])
            return
        await admin.delete_consumer_group_offsets(group, [tp0])
        assert list(await admin.list_consumer_group_offsets(group)) == [tp1]

    _run(kafka, body)


def test_unknown_group_calls(kafka: Kafka) -> None:
    group = kafka.topic("nobody")

    async def body(admin: AsyncAdmin) -> None:
        assert await admin.list_consumer_group_offsets(group) == {}
        if kafka.kind == "tansu":  # Tansu 0.6.0 answers NONE for a group it never had
            await admin.delete_groups([group])
            return
        with pytest.raises(KafkaError) as missing:
            await admin.delete_groups([group])
        assert missing.value.error_code is ErrorCode.GROUP_ID_NOT_FOUND

    _run(kafka, body)


def test_calls_ride_out_a_broker_restart(strom_broker: BrokerProcess) -> None:
    """Calls made while the broker is down retry (reconnecting, finding the coordinator
    and leaders again) until it is back, within request.timeout.ms."""
    kafka = Kafka("strom", strom_broker.bootstrap, strom_broker)
    topic, group = _created(kafka, partitions=2), kafka.topic("restart")
    _produce(kafka, topic, [1_000, 2_000])
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)

    async def body(admin: AsyncAdmin) -> None:
        await admin.alter_consumer_group_offsets(group, {tp0: 1})
        assert (await admin.list_offsets({tp0: "latest"}))[tp0].offset == 2
        await asyncio.to_thread(strom_broker.stop)
        calls = asyncio.gather(admin.list_consumer_group_offsets(group),
                               admin.list_offsets({tp0: "latest", tp1: "earliest"}))
        await asyncio.to_thread(strom_broker.start)
        committed, offsets = await calls
        assert {tp: c.offset for tp, c in committed.items()} == {tp0: 1}
        assert (offsets[tp0].offset, offsets[tp1].offset) == (2, 0)

    _run(kafka, body)
