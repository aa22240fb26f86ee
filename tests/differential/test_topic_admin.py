"""CreateTopics' error paths, DeleteTopics and CreatePartitions, each request sent to Kafka
3.9 and to Strom and the answers compared field by field (``wire.Pair``)."""

from __future__ import annotations

import uuid

import pytest

from strom.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from strom.protocol.messages.create_topics_response import CreateTopicsResponse
from strom.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from tests.differential.wire import Pair, create_request, create_topic, unique

INVALID_NAMES = ["", ".", "..", "bad name", "a/b", "x" * 250, "é-topic", "with:colon"]


@pytest.mark.parametrize("name", INVALID_NAMES, ids=range(len(INVALID_NAMES)))
def test_invalid_topic_names(pair: Pair, name: str) -> None:
    answer = pair.same(create_request(name), 4)
    assert answer["topics"][0]["error_code"] != 0


@pytest.mark.parametrize("partitions", [0, -2, -5])
@pytest.mark.parametrize("version", [1, 4])
def test_zero_or_negative_partitions(pair: Pair, partitions: int, version: int) -> None:
    answer = pair.same(create_request(unique("cp"), partitions), version)
    assert answer["topics"][0]["error_code"] != 0


@pytest.mark.parametrize("replication_factor", [2, 3, 0, -2])
def test_replication_factor_beyond_the_brokers(pair: Pair, replication_factor: int) -> None:
    answer = pair.same(create_request(unique("rf"), 1, replication_factor=replication_factor), 4)
    assert answer["topics"][0]["error_code"] != 0


@pytest.mark.parametrize("configs", [
    {"no.such.config": "1"},
    {"retention.ms": "soon"},
    {"cleanup.policy": "sometimes"},
    {"min.insync.replicas": "0"},
    {"segment.bytes": "10"},
], ids=lambda configs: next(iter(configs)))
def test_unknown_and_invalid_configs(pair: Pair, configs: dict[str, str]) -> None:
    answer = pair.same(create_request(unique("cfg"), 1, configs=configs), 4)
    assert answer["topics"][0]["error_code"] != 0


@pytest.mark.parametrize("value", ["brotli", "ZSTD", "none"])
def test_an_unknown_compression_type(pair: Pair, value: str) -> None:
    strom, kafka = (side.raw(create_request(unique("cfg"), 1, configs={"compression.type": value}), 4)
                    for side in pair.sides())
    assert isinstance(strom, CreateTopicsResponse) and isinstance(kafka, CreateTopicsResponse)
    # The words too: Kafka's ValidString message names every accepted value.
    assert [(t.error_code, t.error_message) for t in strom.topics] == [(t.error_code, t.error_message) for t in kafka.topics]
    assert strom.topics[0].error_code == 40  # INVALID_CONFIG


@pytest.mark.parametrize("value", ["producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"])
def test_every_compression_type_kafka_accepts(pair: Pair, value: str) -> None:
    answer = pair.same(create_request(unique("cfg"), 1, configs={"compression.type": value}), 4)
    assert answer["topics"][0]["error_code"] == 0


@pytest.mark.parametrize("version", [1, 4])
def test_validate_only_creates_nothing(pair: Pair, version: int) -> None:
    name = unique("validate")
    answer = pair.same(create_request(name, 2, validate_only=True), version)
    assert answer["topics"][0]["error_code"] == 0
    metadata = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False), 9)
    assert metadata["topics"][0]["error_code"] == 3


def test_validate_only_still_reports_errors(pair: Pair) -> None:
    answer = pair.same(create_request(unique("validate"), 0, validate_only=True), 4)
    assert answer["topics"][0]["error_code"] != 0


def test_the_same_name_twice_in_one_request(pair: Pair) -> None:
    name = unique("twice")
    request = create_request(name)
    answer = pair.same(type(request)(topics=request.topics * 2, timeout_ms=30000), 4)
    assert [topic["error_code"] for topic in answer["topics"]] == [42, 42]  # INVALID_REQUEST, each entry


# --- DeleteTopics ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", [0, 3, 5])
def test_delete_an_unknown_topic_by_name(pair: Pair, version: int) -> None:
    answer = pair.same(DeleteTopicsRequest(topic_names=(unique("nothing"),), timeout_ms=30000), version)
    assert answer["responses"][0]["error_code"] == 3


def test_delete_an_unknown_topic_by_id(pair: Pair) -> None:
    request = DeleteTopicsRequest(topics=(DeleteTopicState(name=None, topic_id=uuid.uuid4()),), timeout_ms=30000)
    answer = pair.same(request, 6)
    assert answer["responses"][0]["error_code"] != 0


@pytest.mark.parametrize("version", [1, 5, 6])
def test_delete_a_topic_by_name_then_again(pair: Pair, version: int) -> None:
    name = create_topic(pair, unique("del"))
    request = (DeleteTopicsRequest(topic_names=(name,), timeout_ms=30000) if version < 6 else
               DeleteTopicsRequest(topics=(DeleteTopicState(name=name),), timeout_ms=30000))
    assert pair.same(request, version)["responses"][0]["error_code"] == 0
    assert pair.same(request, version)["responses"][0]["error_code"] == 3


def test_delete_a_topic_by_id(pair: Pair) -> None:
    name = create_topic(pair, unique("delid"))
    topic_ids = {}
    for side in pair.sides():
        answer = side.raw(MetadataRequest(topics=(MetadataRequestTopic(name=name),)), 12)
        topic_ids[side.bootstrap] = answer.topics[0].topic_id  # type: ignore[attr-defined]
    answer = pair.each(lambda side: DeleteTopicsRequest(
        topics=(DeleteTopicState(name=None, topic_id=topic_ids[side.bootstrap]),), timeout_ms=30000), 6)
    assert answer["responses"][0]["error_code"] == 0
    assert answer["responses"][0]["name"] == name


def test_delete_naming_a_topic_and_an_id(pair: Pair) -> None:
    name = create_topic(pair, unique("delboth"))
    request = DeleteTopicsRequest(topics=(DeleteTopicState(name=name, topic_id=uuid.uuid4()),), timeout_ms=30000)
    pair.same(request, 6)


# --- CreatePartitions ------------------------------------------------------------------------

def _grow(name: str, count: int, validate_only: bool = False) -> CreatePartitionsRequest:
    return CreatePartitionsRequest(topics=(CreatePartitionsTopic(name=name, count=count, assignments=None),),
                                   timeout_ms=30000, validate_only=validate_only)


@pytest.mark.parametrize("version", [0, 1, 3])
def test_grow_then_shrink_then_same(pair: Pair, version: int) -> None:
    name = create_topic(pair, unique("grow"), 2)
    assert pair.same(_grow(name, 4), version)["results"][0]["error_code"] == 0
    assert pair.same(_grow(name, 3), version)["results"][0]["error_code"] != 0
    assert pair.same(_grow(name, 4), version)["results"][0]["error_code"] != 0
    metadata = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=name),)), 9)
    assert len(metadata["topics"][0]["partitions"]) == 4


def test_grow_an_unknown_topic(pair: Pair) -> None:
    assert pair.same(_grow(unique("none"), 3), 3)["results"][0]["error_code"] == 3


def test_grow_validate_only(pair: Pair) -> None:
    name = create_topic(pair, unique("growv"), 1)
    assert pair.same(_grow(name, 5, validate_only=True), 3)["results"][0]["error_code"] == 0
    metadata = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=name),)), 9)
    assert len(metadata["topics"][0]["partitions"]) == 1


@pytest.mark.parametrize("count", [0, -1])
def test_grow_to_nothing(pair: Pair, count: int) -> None:
    name = create_topic(pair, unique("grow0"), 1)
    assert pair.same(_grow(name, count), 3)["results"][0]["error_code"] != 0


def test_grow_with_assignments(pair: Pair) -> None:
    name = create_topic(pair, unique("growa"), 1)
    answer = pair.each(lambda side: CreatePartitionsRequest(topics=(CreatePartitionsTopic(
        name=name, count=2, assignments=(CreatePartitionsAssignment(broker_ids=(side.node_id,)),)),),
        timeout_ms=30000), 3)
    assert answer["results"][0]["error_code"] == 0
    for broker_ids in ((99,), ()):
        bad = CreatePartitionsRequest(topics=(CreatePartitionsTopic(
            name=name, count=3, assignments=(CreatePartitionsAssignment(broker_ids=broker_ids),)),), timeout_ms=30000)
        assert pair.same(bad, 3)["results"][0]["error_code"] != 0


def test_grow_the_same_topic_twice_in_one_request(pair: Pair) -> None:
    """Named twice: one INVALID_REQUEST for the name, whatever the counts, and nothing grown."""
    name = create_topic(pair, unique("grow2"), 1)
    twice = CreatePartitionsRequest(topics=(_grow(name, 2).topics[0], _grow(name, 3).topics[0]), timeout_ms=30000)
    assert pair.same(twice, 3)["results"] == [{"name": name, "error_code": 42, "error_message": "<message>"}]
    metadata = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=name),)), 9)
    assert len(metadata["topics"][0]["partitions"]) == 1


@pytest.mark.parametrize("validate_only", [False, True])
def test_a_duplicate_beside_topics_named_once(pair: Pair, validate_only: bool) -> None:
    """The topics named once are grown (or checked) and answered first, in the request's order;
    the duplicate's answer comes after them (Kafka appends it to the admin manager's results)."""
    twice, once = create_topic(pair, unique("dup"), 1), create_topic(pair, unique("once"), 1)
    unknown = unique("none")
    request = CreatePartitionsRequest(topics=tuple(
        _grow(name, count).topics[0] for name, count in ((twice, 2), (once, 2), (unknown, 2), (twice, 2))),
        timeout_ms=30000, validate_only=validate_only)
    answer = pair.same(request, 1)
    assert [(r["name"], r["error_code"]) for r in answer["results"]] == [(once, 0), (unknown, 3), (twice, 42)]
    for name, partitions in ((twice, 1), (once, 1 if validate_only else 2)):
        metadata = pair.same(MetadataRequest(topics=(MetadataRequestTopic(name=name),)), 9)
        assert len(metadata["topics"][0]["partitions"]) == partitions
