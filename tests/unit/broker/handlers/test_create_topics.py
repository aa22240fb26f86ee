"""CreateTopics (19): topics created (or only validated) on this node, and Kafka's refusals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from strom.protocol.messages.metadata_request import MetadataRequest
from tests.support.broker_harness import BrokerHarness, BrokerRunner

DYNAMIC_TOPIC_CONFIG = 1  # ConfigSource of a topic's own override


def _topic(name: str, partitions: int = 1, replication: int = 1, *, configs: dict[str, str | None] | None = None,
           assignments: Sequence[Sequence[int]] = ()) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=replication,
        assignments=tuple(CreatableReplicaAssignment(i, tuple(ids)) for i, ids in enumerate(assignments)),
        configs=tuple(CreatableTopicConfig(k, v) for k, v in (configs or {}).items()),
    )


async def _create(h: BrokerHarness, *topics: CreatableTopic, version: int = 7, validate_only: bool = False) -> Any:
    response = await h.request(CreateTopicsRequest(topics=topics, timeout_ms=5000, validate_only=validate_only),
                               version=version)
    return response.topics


async def _partition_counts(h: BrokerHarness) -> dict[str, int]:
    response = await h.request(MetadataRequest(topics=None), version=12)
    return {t.name: len(t.partitions) for t in response.topics if not t.is_internal}


@pytest.mark.parametrize("version", [0, 2, 5, 7])
def test_topics_are_created(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        results = await _create(h, _topic("a", 3), _topic("b", 1), version=version)
        assert [(r.name, r.error_code) for r in results] == [("a", 0), ("b", 0)]
        if version >= 5:
            assert [(r.num_partitions, r.replication_factor) for r in results] == [(3, 1), (1, 1)]
        if version >= 7:
            assert all(r.topic_id.int != 0 for r in results)
        assert await _partition_counts(h) == {"a": 3, "b": 1}

    broker.run(scenario)


def test_default_partitions_and_replication(broker: BrokerRunner) -> None:
    """v4+: -1 takes num.partitions and default.replication.factor."""

    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("d", -1, -1))
        assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 4, 1)

    broker.run(scenario, {"num.partitions": "4"})


def test_the_answer_lists_the_new_topic_s_configs(broker: BrokerRunner) -> None:
    """KIP-525 (v5+): a created topic is answered with its configs, overrides marked as such."""

    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("c", configs={"cleanup.policy": "compact"}))
        assert (result.error_code, result.topic_config_error_code) == (0, 0)
        configs = {c.name: c for c in result.configs}
        assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == (
            "compact", DYNAMIC_TOPIC_CONFIG,
        )
        assert "retention.ms" in configs

    broker.run(scenario)


def test_validate_only_creates_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("v", 2), validate_only=True)
        assert result.error_code == ErrorCode.NONE
        assert await _partition_counts(h) == {}

    broker.run(scenario)


def test_an_existing_topic_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await _create(h, _topic("e", 2))
        (result,) = await _create(h, _topic("e", 5))
        assert result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert await _partition_counts(h) == {"e": 2}

    broker.run(scenario)


@pytest.mark.parametrize("name", ["", ".", "..", "has space", "slash/no", "x" * 250])
def test_an_illegal_name_is_an_invalid_topic(broker: BrokerRunner, name: str) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic(name))
        assert result.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION

    broker.run(scenario)


@pytest.mark.parametrize("partitions", [0, -2])
def test_no_partitions_is_invalid_partitions(broker: BrokerRunner, partitions: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("p", partitions))
        assert result.error_code == ErrorCode.INVALID_PARTITIONS

    broker.run(scenario)


@pytest.mark.parametrize("replication", [0, 2, 3])
def test_a_replication_factor_this_cluster_cannot_give_is_refused(broker: BrokerRunner, replication: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("r", 1, replication))
        assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
        assert await _partition_counts(h) == {}

    broker.run(scenario)


@pytest.mark.parametrize("configs", [{"no.such.setting": "1"}, {"retention.ms": "soon"}, {"cleanup.policy": "sometimes"},
                                     {"compression.type": "brotli"}, {"compression.type": "ZSTD"}])
def test_an_unknown_setting_or_bad_value_is_an_invalid_config(broker: BrokerRunner, configs: dict[str, str]) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("bad", configs=dict(configs)))
        assert result.error_code == ErrorCode.INVALID_CONFIG
        assert await _partition_counts(h) == {}

    broker.run(scenario)


def test_an_unknown_compression_type_is_refused_in_kafka_s_words(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("bad", configs={"compression.type": "brotli"}))
        assert (result.error_code, result.error_message) == (ErrorCode.INVALID_CONFIG, (
            "Invalid value brotli for configuration compression.type: "
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"))
        accepted = [_topic(f"c-{value}", configs={"compression.type": value})
                    for value in ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")]
        assert [r.error_code for r in await _create(h, *accepted)] == [0] * 6

    broker.run(scenario)


def test_a_name_given_twice_is_refused_in_each_entry_and_not_created(broker: BrokerRunner) -> None:
    """Kafka 3.9 answers every entry, each copy of a duplicated name INVALID_REQUEST."""
    async def scenario(h: BrokerHarness) -> None:
        results = await _create(h, _topic("twice"), _topic("once"), _topic("twice", 2))
        assert [(r.name, r.error_code) for r in results] == [
            ("twice", ErrorCode.INVALID_REQUEST), ("once", 0), ("twice", ErrorCode.INVALID_REQUEST)]
        assert await _partition_counts(h) == {"once": 1}

    broker.run(scenario)


def test_an_assignment_to_another_broker_is_refused(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (refused,) = await _create(h, _topic("x", -1, -1, assignments=[[1], [2]]))
        assert refused.error_code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
        (accepted,) = await _create(h, _topic("y", -1, -1, assignments=[[1], [1]]))
        assert (accepted.error_code, accepted.num_partitions) == (0, 2)

    broker.run(scenario)


def test_an_assignment_with_a_partition_count_is_an_invalid_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        (result,) = await _create(h, _topic("z", 2, -1, assignments=[[1], [1]]))
        assert result.error_code == ErrorCode.INVALID_REQUEST

    broker.run(scenario)
