"""Entities, quota keys and DescribeClientQuotas filters as Kafka validates and matches them;
the store's file round trip and its tolerance of a bad file; ZooKeeper's entity paths and values."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.quota import DEFAULT, FileQuotaStore, QuotaEntity, QuotaError, QuotaFilter
from strom.broker.quota.entity import validate_quota
from strom.broker.quota.zk_store import encode_quota, entity_path, parse_entity_path
from strom.protocol.error_codes import ErrorCode


@pytest.mark.parametrize(("parts", "message"), [
    ([], "Invalid empty client quota entity"),
    ([("user", "a"), ("user", "b")], "Invalid empty client quota entity, duplicate entity entry user"),
    ([("group", "g")], "Unhandled client quota entity type: group"),
    ([("client-id", "")], "Empty client-id not supported"),
    ([("ip", "127.0.0.1")], "IP quotas (connection_creation_rate) are not supported by Strom"),
])
def test_invalid_entities(parts: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        QuotaEntity.from_parts(parts)
    assert str(caught.value) == message
    assert caught.value.error_code == ErrorCode.INVALID_REQUEST


def test_entities_from_the_wire_and_back() -> None:
    entity = QuotaEntity.from_parts([("client-id", None), ("user", "alice")])
    assert entity == QuotaEntity("alice", DEFAULT)
    assert entity.parts() == {"user": "alice", "client-id": None}
    assert entity.describe() == "users/alice/clients/<default>"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("producer_byte_rates", 1.0, "Invalid configuration key producer_byte_rates"),
    ("producer_byte_rate", 0.0, "Quota producer_byte_rate must be greater than 0"),
    ("consumer_byte_rate", -5.0, "Quota consumer_byte_rate must be greater than 0"),
    ("consumer_byte_rate", 1.5, "Configuration consumer_byte_rate must be a Long value"),
])
def test_invalid_quotas(key: str, value: float, message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        validate_quota(key, value)


def test_valid_quotas() -> None:
    validate_quota("producer_byte_rate", 1024.0)
    validate_quota("request_percentage", 12.5)
    validate_quota("controller_mutation_rate", 0.5)


ENTITIES = [QuotaEntity("alice", None), QuotaEntity("alice", "app"), QuotaEntity("alice", DEFAULT),
            QuotaEntity(DEFAULT, None), QuotaEntity(None, "app"), QuotaEntity(None, DEFAULT)]


@pytest.mark.parametrize(("components", "strict", "expected"), [
    ([], False, ENTITIES),
    ([], True, []),
    ([("user", 0, "alice")], False, ENTITIES[:3]),
    ([("user", 0, "alice")], True, ENTITIES[:1]),
    ([("user", 1, None)], False, [ENTITIES[3]]),
    ([("user", 2, None)], True, [ENTITIES[0], ENTITIES[3]]),
    ([("client-id", 2, None)], False, [ENTITIES[1], ENTITIES[2], ENTITIES[4], ENTITIES[5]]),
    ([("client-id", 1, None)], True, [ENTITIES[5]]),
    ([("user", 0, "alice"), ("client-id", 0, "app")], True, [ENTITIES[1]]),
    ([("user", 0, "alice"), ("client-id", 1, None)], False, [ENTITIES[2]]),
    ([("user", 0, "bob")], False, []),
])
def test_filters_match_as_kafka(components: list[tuple[str, int, str | None]], strict: bool,
                                expected: list[QuotaEntity]) -> None:
    quota_filter = QuotaFilter.parse(components, strict)
    assert [entity for entity in ENTITIES if quota_filter.matches(entity)] == expected


@pytest.mark.parametrize(("components", "code", "message"), [
    ([("", 0, "x")], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
    ([("user", 0, "a"), ("user", 2, None)], ErrorCode.INVALID_REQUEST,
     "Entity type user cannot appear more than once in the filter."),
    ([("group", 0, "g")], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
    ([("user", 0, None)], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_EXACT, but set match string to null."),
    ([("user", 1, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."),
    ([("user", 2, "a")], ErrorCode.INVALID_REQUEST,
     "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."),
    ([("user", 7, None)], ErrorCode.UNSUPPORTED_VERSION, "Unknown match type 7"),
    ([("ip", 2, None), ("user", 2, None)], ErrorCode.INVALID_REQUEST,
     "Invalid entity filter component combination. IP filter component should not be used with user or "
     "clientId filter component."),
])
def test_invalid_filters(components: list[tuple[str, int, str | None]], code: ErrorCode, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        QuotaFilter.parse(components, False)
    assert (caught.value.error_code, str(caught.value)) == (code, message)


def test_the_store_round_trips_and_skips_what_is_not_valid(tmp_path: Path) -> None:
    store = FileQuotaStore(str(tmp_path))
    assert store.read() == {}
    quotas = {QuotaEntity("alice", DEFAULT): {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
              QuotaEntity(None, "app"): {"consumer_byte_rate": 2048.0}}
    store.write(quotas)
    assert FileQuotaStore(str(tmp_path)).read() == quotas
    text = (tmp_path / "client-quotas").read_text()
    assert '"client-id": null' in text  # the default as the wire names it
    (tmp_path / "client-quotas").write_text(text.replace("2048.0", "-1"))
    assert FileQuotaStore(str(tmp_path)).read() == {QuotaEntity("alice", DEFAULT): quotas[QuotaEntity("alice", DEFAULT)]}
    (tmp_path / "client-quotas").write_text("not json")
    assert FileQuotaStore(str(tmp_path)).read() == {}


@pytest.mark.parametrize(("entity", "path"), [
    (QuotaEntity("alice", None), "users/alice"),
    (QuotaEntity("alice", DEFAULT), "users/alice/clients/<default>"),
    (QuotaEntity(DEFAULT, "app one"), "users/<default>/clients/app%20one"),
    (QuotaEntity(None, DEFAULT), "clients/<default>"),
    (QuotaEntity(None, "a/b"), "clients/a%2Fb"),
])
def test_zookeeper_entity_paths_as_kafka_names_them(entity: QuotaEntity, path: str) -> None:
    assert entity_path(entity) == path
    assert parse_entity_path(path) == entity


def test_other_config_changes_name_no_quota_entity() -> None:
    assert [parse_entity_path(path) for path in ("topics/t", "brokers/1", "users/a/clients", "users/")] == [None] * 4


def test_zookeeper_values_as_kafka_writes_them() -> None:
    assert encode_quota("producer_byte_rate", 1048576.0) == "1048576"
    assert encode_quota("request_percentage", 200.0) == "200.0"
    assert encode_quota("controller_mutation_rate", 0.5) == "0.5"
