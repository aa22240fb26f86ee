"""Metadata (3): this broker, the topics asked for, auto-creation and its refusals."""

from __future__ import annotations

import uuid

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.support.broker_harness import BrokerHarness, BrokerRunner


def _by_name(*names: str, allow_create: bool = True) -> MetadataRequest:
    return MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=name) for name in names), allow_auto_topic_creation=allow_create
    )


@pytest.mark.parametrize("version", [0, 1, 4, 9, 12])
def test_all_topics_with_this_broker_leading_every_partition(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("orders", partitions=3)
        # v0 has no null topics: an empty list there means every topic.
        request = MetadataRequest(topics=() if version == 0 else None)
        response = await h.request(request, version=version)
        assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
            (1, h.broker.advertised.host, h.broker.advertised.port)
        ]
        (topic,) = [t for t in response.topics if t.name == "orders"]
        assert topic.error_code == ErrorCode.NONE
        assert sorted(p.partition_index for p in topic.partitions) == [0, 1, 2]
        for partition in topic.partitions:
            assert partition.error_code == ErrorCode.NONE
            assert partition.leader_id == 1
            assert tuple(partition.replica_nodes) == (1,) and tuple(partition.isr_nodes) == (1,)
        if version >= 2:
            assert response.cluster_id
            assert response.controller_id == 1

    broker.run(scenario)


def test_an_unknown_topic_is_auto_created_when_allowed(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        first = await h.request(_by_name("fresh"), version=12)
        (topic,) = first.topics
        # Kafka answers LEADER_NOT_AVAILABLE while the new topic's leader is elected; either way it exists.
        assert topic.error_code in (ErrorCode.NONE, ErrorCode.LEADER_NOT_AVAILABLE)
        again = await h.request(_by_name("fresh", allow_create=False), version=12)
        (topic,) = again.topics
        assert topic.error_code == ErrorCode.NONE
        assert len(topic.partitions) == 1  # num.partitions
        assert topic.topic_id != uuid.UUID(int=0)

    broker.run(scenario)


def test_an_unknown_topic_is_refused_when_the_request_disallows_creation(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(_by_name("absent", allow_create=False), version=12)
        assert [(t.name, t.error_code) for t in response.topics] == [("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        listed = await h.request(MetadataRequest(topics=None), version=12)
        assert "absent" not in {t.name for t in listed.topics}

    broker.run(scenario)


def test_an_unknown_topic_is_refused_when_the_broker_disables_auto_creation(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(_by_name("absent"), version=12)
        assert [(t.name, t.error_code) for t in response.topics] == [("absent", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]

    broker.run(scenario, {"auto.create.topics.enable": "false"})


def test_an_illegal_topic_name_is_invalid_topic(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(_by_name("no spaces/allowed"), version=12)
        assert [t.error_code for t in response.topics] == [ErrorCode.INVALID_TOPIC_EXCEPTION]

    broker.run(scenario)


def test_by_topic_id(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        topic_id = await h.create_topic("by-id", partitions=2)
        unknown = uuid.uuid4()
        request = MetadataRequest(topics=(MetadataRequestTopic(topic_id=topic_id, name=None),
                                          MetadataRequestTopic(topic_id=unknown, name=None)))
        response = await h.request(request, version=12)
        known, missing = response.topics
        assert (known.error_code, known.name, known.topic_id, len(known.partitions)) == (0, "by-id", topic_id, 2)
        assert (missing.error_code, missing.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, unknown)

    broker.run(scenario)


def _bits(field: int) -> set[int]:
    return {bit for bit in range(32) if field >> bit & 1}


TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, *_CONFIGS
CLUSTER_OPERATIONS = {5, 7, 8, 9, 10, 11, 12}  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, *_CONFIGS, IDEMPOTENT_WRITE


@pytest.mark.parametrize("version", [8, 10])
def test_authorized_operations_are_every_supported_one_without_an_authorizer(broker: BrokerRunner,
                                                                             version: int) -> None:
    """Kafka without an authorizer answers all the operations a resource type supports:
    8 for a topic, 7 for the cluster (v8-v10 only); none asked, INT32_MIN."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("orders")
        asked = MetadataRequest(topics=(MetadataRequestTopic(name="orders"),), allow_auto_topic_creation=False,
                                include_cluster_authorized_operations=True,
                                include_topic_authorized_operations=True)
        response = await h.request(asked, version=version)
        (topic,) = response.topics
        assert _bits(topic.topic_authorized_operations) == TOPIC_OPERATIONS
        assert _bits(response.cluster_authorized_operations) == CLUSTER_OPERATIONS
        plain = await h.request(_by_name("orders", allow_create=False), version=version)
        assert plain.topics[0].topic_authorized_operations == -(2**31)
        assert plain.cluster_authorized_operations == -(2**31)

    broker.run(scenario)


def test_topic_authorized_operations_on_v12(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("orders")
        asked = MetadataRequest(topics=None, include_topic_authorized_operations=True)
        response = await h.request(asked, version=12)
        (topic,) = [t for t in response.topics if t.name == "orders"]
        assert _bits(topic.topic_authorized_operations) == TOPIC_OPERATIONS

    broker.run(scenario)


def test_auto_creating_the_offsets_topic_makes_it_compacted_with_its_own_partition_count(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (topic,) = (await h.request(_by_name("__consumer_offsets"), version=12)).topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (ErrorCode.NONE, True, 5)
        log = h.broker.log_manager.logs[("__consumer_offsets", 0)]
        assert log.config.cleanup_policy == "compact"

    broker.run(scenario, {"offsets.topic.num.partitions": "5"})
