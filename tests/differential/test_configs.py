"""DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DeleteRecords on Kafka 3.9 and
Strom. Configs are compared by name: every config Strom lists must be listed alike by Kafka
(value, read-only, source, sensitivity, synonyms, type); the names Kafka lists and Strom
does not are the ones FINDINGS.md names (``KAFKA_ONLY_*``), so a new gap fails the test."""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.messages.alter_configs_request import (
    AlterableConfig,
    AlterConfigsRequest,
    AlterConfigsResource,
)
from strom.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig as IncrementalConfig,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    AlterConfigsResource as IncrementalResource,
)
from strom.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from tests.differential.records import batch, list_offsets, produce
from tests.differential.wire import Pair, Side, create_topic, leaf_differences, unique

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# Topic configs Kafka 3.9 lists that Strom does not implement (FINDINGS.md).
KAFKA_ONLY_TOPIC_CONFIGS = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "segment.jitter.ms", "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas", "remote.storage.enable", "remote.log.copy.disable",
    "remote.log.delete.on.disable", "local.retention.ms", "local.retention.bytes",
})


# Broker settings Kafka 3.9 describes and Strom does not (FINDINGS.md).
KAFKA_ONLY_BROKER_CONFIGS = frozenset({"log.retention.hours", "fetch.max.bytes", "log.roll.hours"})


def _describe(resource_type: int, name: str, keys: tuple[str, ...] | None = None,
              synonyms: bool = True, documentation: bool = False) -> DescribeConfigsRequest:
    return DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=resource_type, resource_name=name, configuration_keys=keys),),
        include_synonyms=synonyms, include_documentation=documentation)


def _ask_describe(pair: Pair, build: Any, version: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """DescribeConfigs built per side (a broker resource names the broker's own id).

    The resource name of the broker's own id is made alike; everything else is compared.
    """
    answers = []
    for side in pair.sides():
        answer = side.ask(build(side), version)
        for result in answer["results"]:
            if result["resource_type"] == BROKER and result["resource_name"] == str(side.node_id):
                result["resource_name"] = "self"
        answers.append(answer)
    return answers[0], answers[1]


# Fields of a config set aside by name, written in FINDINGS.md: ``documentation`` is each
# broker's own wording.
SET_ASIDE = ("documentation",)


def _configs(answer: dict[str, Any], set_aside: tuple[str, ...] = SET_ASIDE) -> dict[str, Any]:
    """Pop the only resource's configs, keyed by name (Kafka lists them in hash order),
    without the fields ``set_aside``."""
    configs = answer["results"][0].pop("configs")
    return {config["name"]: {k: v for k, v in config.items() if k not in set_aside} for config in configs}


def _compare_configs(strom: dict[str, Any], kafka: dict[str, Any], kafka_only: frozenset[str],
                     set_aside: tuple[str, ...] = SET_ASIDE) -> None:
    strom_configs, kafka_configs = _configs(strom, set_aside), _configs(kafka, set_aside)
    assert strom == kafka, leaf_differences(strom, kafka)
    shared = {name: kafka_configs.get(name) for name in strom_configs}
    assert strom_configs == shared, leaf_differences(strom_configs, shared)
    missing = set(kafka_configs) - set(strom_configs)
    assert missing == kafka_only & set(kafka_configs), (
        f"Kafka only: {sorted(missing - kafka_only)}; no longer Kafka only: {sorted(kafka_only & set(kafka_configs) - missing)}")


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_describe_a_topic_s_configs(pair: Pair, version: int) -> None:
    name = create_topic(pair, unique("cfg"), configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    strom, kafka = _ask_describe(
        pair, lambda side: _describe(TOPIC, name, synonyms=version >= 1, documentation=version >= 3), version)
    _compare_configs(strom, kafka, KAFKA_ONLY_TOPIC_CONFIGS)


@pytest.mark.parametrize("keys", [("retention.ms",), ("retention.ms", "segment.bytes", "no.such.config"), ()])
def test_describe_named_topic_configs(pair: Pair, keys: tuple[str, ...]) -> None:
    name = create_topic(pair, unique("cfg"))
    strom, kafka = _ask_describe(pair, lambda side: _describe(TOPIC, name, keys), 4)
    _compare_configs(strom, kafka, KAFKA_ONLY_TOPIC_CONFIGS if not keys else frozenset())


@pytest.mark.parametrize(("resource_type", "name"), [(TOPIC, "absent"), (TOPIC, ""), (BROKER, "7"), (BROKER, "one")])
def test_describe_what_is_not_there(pair: Pair, resource_type: int, name: str) -> None:
    strom, kafka = _ask_describe(pair, lambda side: _describe(resource_type, name), 4)
    assert strom == kafka, leaf_differences(strom, kafka)


def _broker_describe(side: Side, keys: tuple[str, ...] | None, version: int = 4) -> DescribeConfigsRequest:
    return _describe(BROKER, str(side.node_id), keys, synonyms=version >= 1)


@pytest.mark.parametrize("keys", [
    ("num.partitions", "log.retention.ms", "log.retention.hours", "auto.create.topics.enable",
     "group.initial.rebalance.delay.ms", "message.max.bytes", "log.segment.bytes", "log.cleanup.policy",
     "offsets.topic.replication.factor", "delete.topic.enable", "compression.type", "min.insync.replicas"),
    ("default.replication.factor", "log.cleaner.threads", "log.roll.ms", "log.roll.hours",
     "log.message.timestamp.type", "offset.metadata.max.bytes", "group.min.session.timeout.ms",
     "group.max.session.timeout.ms", "fetch.max.bytes", "log.retention.bytes"),
])
@pytest.mark.parametrize("version", [0, 4])
def test_describe_named_broker_configs(pair: Pair, keys: tuple[str, ...], version: int) -> None:
    """Every field but the wording compared: a setting from server.properties is
    STATIC_BROKER_CONFIG over DEFAULT_CONFIG; log.retention.ms and log.roll.ms, set by no
    layer, are null (only their hours synonyms have a default)."""
    strom, kafka = _ask_describe(pair, lambda side: _broker_describe(side, keys, version), version)
    _compare_configs(strom, kafka, KAFKA_ONLY_BROKER_CONFIGS)


def test_describe_the_cluster_default(pair: Pair) -> None:
    strom, kafka = _ask_describe(pair, lambda side: _describe(BROKER, "", ("log.retention.ms", "num.partitions")), 4)
    _compare_configs(strom, kafka, frozenset())


# --- AlterConfigs / IncrementalAlterConfigs ---------------------------------------------------------

def _alter(name: str, configs: dict[str, str | None], validate_only: bool = False,
           resource_type: int = TOPIC) -> AlterConfigsRequest:
    return AlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(AlterableConfig(name=k, value=v) for k, v in configs.items())),), validate_only=validate_only)


def _incremental(name: str, operations: list[tuple[str, int, str | None]], validate_only: bool = False,
                 resource_type: int = TOPIC) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(resources=(IncrementalResource(
        resource_type=resource_type, resource_name=name,
        configs=tuple(IncrementalConfig(name=k, config_operation=op, value=v) for k, op, v in operations)),),
        validate_only=validate_only)


def _topic_value(pair: Pair, topic: str, key: str) -> None:
    strom, kafka = _ask_describe(pair, lambda side: _describe(TOPIC, topic, (key,)), 4)
    _compare_configs(strom, kafka, frozenset())


@pytest.mark.parametrize("version", [0, 1, 2])
def test_alter_topic_configs(pair: Pair, version: int) -> None:
    topic = create_topic(pair, unique("alter"))
    assert pair.same(_alter(topic, {"retention.ms": "7200000"}), version)["responses"][0]["error_code"] == 0
    _topic_value(pair, topic, "retention.ms")
    pair.same(_alter(topic, {"retention.ms": "soon"}), version)
    pair.same(_alter(topic, {"no.such.config": "1"}), version)
    pair.same(_alter(topic, {"segment.bytes": "1048576"}, validate_only=True), version)
    _topic_value(pair, topic, "segment.bytes")
    pair.same(_alter(unique("absent"), {"retention.ms": "1"}), version)


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_topic_configs(pair: Pair, version: int) -> None:
    topic = create_topic(pair, unique("incr"))
    assert pair.same(_incremental(topic, [("retention.ms", SET, "7200000")]), version)[
        "responses"][0]["error_code"] == 0
    pair.same(_incremental(topic, [("cleanup.policy", APPEND, "compact")]), version)
    _topic_value(pair, topic, "cleanup.policy")
    pair.same(_incremental(topic, [("cleanup.policy", SUBTRACT, "delete")]), version)
    _topic_value(pair, topic, "cleanup.policy")
    pair.same(_incremental(topic, [("retention.ms", DELETE, None)]), version)
    _topic_value(pair, topic, "retention.ms")
    pair.same(_incremental(topic, [("retention.ms", APPEND, "1")]), version)
    # An unknown operation: Kafka 3.9 answers UNKNOWN_SERVER_ERROR (-1, its exception
    # escapes), Strom INVALID_REQUEST (FINDINGS.md): both refuse.
    strom, kafka = pair.ask(_incremental(topic, [("retention.ms", 7, "1")]), version)
    assert (strom["responses"][0]["error_code"], kafka["responses"][0]["error_code"]) == (42, -1)
    pair.same(_incremental(topic, [("retention.ms", SET, "x")]), version)
    pair.same(_incremental(topic, [("retention.ms", SET, "1"), ("retention.ms", SET, "2")]), version)
    pair.same(_incremental(unique("absent"), [("retention.ms", SET, "1")]), version)


@pytest.mark.parametrize("operation", [("num.partitions", SET, "3"), ("log.retention.ms", SET, "x"),
                                       ("log.retention.ms", APPEND, "1")])
def test_incremental_alter_broker_configs_refused(pair: Pair, operation: tuple[str, int, str]) -> None:
    answers = []
    for side in pair.sides():  # each names its own broker id
        answer = side.ask(_incremental(str(side.node_id), [operation], resource_type=BROKER), 1)
        answer["responses"][0]["resource_name"] = "self"
        answers.append(answer)
    assert answers[0] == answers[1], leaf_differences(*answers)
    assert answers[0]["responses"][0]["error_code"] != 0


# --- DeleteRecords ------------------------------------------------------------------------------------

def _delete_records(topic: str, offset: int, partition: int = 0) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(topics=(DeleteRecordsTopic(name=topic, partitions=(
        DeleteRecordsPartition(partition_index=partition, offset=offset),)),), timeout_ms=30000)


@pytest.mark.parametrize("version", [0, 1, 2])
def test_delete_records(pair: Pair, version: int) -> None:
    topic = create_topic(pair, unique("delrec"))
    pair.same(produce(topic, batch(10)), 9)
    assert pair.same(_delete_records(topic, 4), version)["topics"][0]["partitions"][0]["low_watermark"] == 4
    pair.same(_delete_records(topic, 2), version)  # below the log start: nothing moves
    pair.same(_delete_records(topic, 11), version)  # past the high watermark
    pair.same(_delete_records(topic, -5), version)
    pair.same(_delete_records(topic, -1), version)  # -1: up to the high watermark
    pair.same(list_offsets(topic, -2), 7)
    pair.same(_delete_records(topic, 1, partition=3), version)
    pair.same(_delete_records(unique("absent"), 1), version)
