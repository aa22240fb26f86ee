"""The same requests, encoded by Strom's codec, sent to Apache Kafka 3.9 and to Strom; the
decoded answers compared field by field after ``normalise`` (node ids, ports, cluster and
topic ids, throttle time, error wording). A difference that stays is written in
tests/compat/FINDINGS.md ("Differences seen against Apache Kafka 3.9") and left out of the
comparison by name here, so everything else keeps being compared.

Also: Kafka 4.x starts in combined KRaft mode and answers Metadata.
"""

from __future__ import annotations

from typing import Any

import pytest

from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from strom.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from strom.protocol.messages.create_topics_response import CreateTopicsResponse
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.differential.wire import Pair
from tests.support.broker_process import BrokerProcess
from tests.support.reference_broker import ReferenceBroker, WireClient, metadata_answer

KNOWN_TOPIC = "differential-known"
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3


def _create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(
        topics=(CreatableTopic(name=name, num_partitions=partitions, replication_factor=1),), timeout_ms=30000)


@pytest.fixture(scope="module")
def known_topic(pair: Pair) -> str:
    strom, kafka = pair.ask(_create(KNOWN_TOPIC, 3), 4)
    assert strom == kafka
    assert strom["topics"][0]["error_code"] == 0
    return KNOWN_TOPIC


# --- ApiVersions ------------------------------------------------------------------------

def _version_ranges(bootstrap: str) -> dict[int, tuple[int, int]]:
    with WireClient(bootstrap) as client:
        answer = client.call(ApiVersionsRequest(client_software_name="strom", client_software_version="1"), 3)
    assert isinstance(answer, ApiVersionsResponse) and answer.error_code == 0
    return {key.api_key: (key.min_version, key.max_version) for key in answer.api_keys}


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_answer_matches_kafka_39_but_for_the_key_set(pair: Pair, version: int) -> None:
    request = ApiVersionsRequest(client_software_name="strom-differential", client_software_version="1.0")
    strom, kafka = pair.ask(request, version)
    # Which APIs and versions each offers is a matter of what each implements (the next
    # test); finalized_features_epoch: Kafka 3.9 says 0, Strom -1 (FINDINGS.md).
    for answer in (strom, kafka):
        del answer["api_keys"], answer["finalized_features_epoch"]
    assert strom == kafka


def test_strom_advertises_only_apis_and_versions_kafka_has(
    strom_broker: BrokerProcess, kafka39: ReferenceBroker, kafka4: ReferenceBroker
) -> None:
    """Each API Strom offers exists in Kafka 3.9 or 4.x, within the versions they offer
    (Strom may offer fewer: the differences from 3.9 are listed in FINDINGS.md)."""
    strom = _version_ranges(strom_broker.bootstrap)
    kafkas = [_version_ranges(kafka39.bootstrap), _version_ranges(kafka4.bootstrap)]
    outside: dict[int, tuple[int, int]] = {}
    for api_key, (low, high) in strom.items():
        known = [ranges[api_key] for ranges in kafkas if api_key in ranges]
        if not known or low < min(r[0] for r in known) or high > max(r[1] for r in known):
            outside[api_key] = (low, high)
    assert outside == {}
    assert strom.keys() & kafkas[0].keys(), "no API in common with Kafka 3.9"


# --- Metadata ---------------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 13))
def test_metadata_answer_matches_kafka_39(pair: Pair, known_topic: str, version: int) -> None:
    names = [known_topic]
    if version >= 4:  # allow_auto_topic_creation exists from v4; before, an unknown name is created
        names.append(f"differential-unknown-v{version}")
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(name=name) for name in names),
        allow_auto_topic_creation=version < 4,
    )
    strom, kafka = pair.ask(request, version)
    assert strom == kafka
    assert [topic["name"] for topic in strom["topics"]] == names
    if version >= 4:
        assert strom["topics"][1]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


def test_an_unknown_topic_is_not_created_when_the_request_says_so(pair: Pair, known_topic: str) -> None:
    name = "differential-not-created"
    request = MetadataRequest(topics=(MetadataRequestTopic(name=name),), allow_auto_topic_creation=False)
    for _ in range(2):  # the second answer shows the first did not create it either
        strom, kafka = pair.ask(request, 12)
        assert strom == kafka
        assert strom["topics"][0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION


# --- CreateTopics -----------------------------------------------------------------------

@pytest.mark.parametrize("version", range(0, 8))
def test_create_topics_answer_matches_kafka_39(pair: Pair, version: int) -> None:
    strom, kafka = pair.ask(_create(f"differential-created-v{version}", 2), version)
    strom_configs = _configs_by_name(strom)
    kafka_configs = _configs_by_name(kafka)
    # Every config Strom reports, Kafka reports alike; Kafka 3.9 reports more of them
    # (remote storage, throttled replicas, compression levels...: FINDINGS.md).
    assert {name: kafka_configs.get(name) for name in strom_configs} == strom_configs
    if version >= 5:
        assert "retention.ms" in strom_configs
    assert strom == kafka
    assert strom["topics"][0]["error_code"] == 0


def _configs_by_name(answer: dict[str, Any]) -> dict[str, Any]:
    """Pop the configs of the only topic of a CreateTopics answer, keyed by name (Kafka
    lists them in hash order)."""
    configs = answer["topics"][0].pop("configs", [])
    return {config["name"]: config for config in configs}


@pytest.mark.parametrize("version", [0, 1, 4, 5, 7])
def test_creating_an_existing_topic_answers_like_kafka_39(pair: Pair, known_topic: str, version: int) -> None:
    strom, kafka = pair.ask(_create(known_topic, 3), version)
    assert strom == kafka
    assert strom["topics"][0]["error_code"] == TOPIC_ALREADY_EXISTS


# --- The reference brokers themselves ----------------------------------------------------

def test_kafka_39_runs_with_its_zookeeper(kafka39: ReferenceBroker) -> None:
    assert kafka39.kafka_version.startswith("3.9.")
    assert kafka39.zookeeper_pid is not None and kafka39.zookeeper_rss_bytes() > 0
    assert 0 < kafka39.broker_startup_seconds <= kafka39.startup_seconds


def test_kafka_4_starts_in_kraft_mode_and_answers_metadata(kafka4: ReferenceBroker) -> None:
    assert kafka4.kafka_version.startswith("4.")
    assert kafka4.zookeeper_pid is None
    answer = metadata_answer(kafka4.bootstrap)
    assert isinstance(answer, MetadataResponse)
    host, port = kafka4.bootstrap.rsplit(":", 1)
    assert [(broker.host, broker.port) for broker in answer.brokers] == [(host, int(port))]
    assert answer.cluster_id
    with WireClient(kafka4.bootstrap) as client:
        versions = client.call(ApiVersionsRequest(client_software_name="strom", client_software_version="1"), 3)
        created = client.call(_create("kraft-smoke", 2), 7)
    assert isinstance(versions, ApiVersionsResponse) and versions.error_code == 0
    # KRaft finalizes metadata.version; ZooKeeper mode has no such feature.
    assert "metadata.version" in {feature.name for feature in versions.finalized_features}
    assert isinstance(created, CreateTopicsResponse)
    assert [(topic.error_code, topic.num_partitions) for topic in created.topics] == [(0, 2)]
    assert kafka4.startup_seconds > 0 and kafka4.rss_bytes() > 0
