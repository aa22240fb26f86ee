"""Dynamic broker configs Strom keeps without using, as Kafka 3.9 answers them.

Kafka accepts every config it lists as dynamic, even where Strom has nothing to change
(thread pools, SASL/SSL, connection quotas), and names it does not know at all; it keeps
them, lists them in DescribeConfigs and refuses the names it knows but cannot change at
run time. Every expected answer here was read from the reference broker
(``scripts/kafka-reference start 39``); see FINDINGS.md.
"""

from __future__ import annotations

import logging

import pytest

from strom.broker.dynamic_config import DEFAULT_ENTITY, STORE_DIR, FileConfigStore
from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.config_requests import (
    APPEND,
    BROKER,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    INT,
    SET,
    alter,
    describe,
    incremental,
    layers,
)

UNKNOWN, LONG, LIST = 0, 5, 7
_THREADS_PREFIX = "Invalid value org.apache.kafka.common.config.ConfigException: Dynamic thread count update " \
    "validation failed for "
_THREADS_SUFFIX = " for configuration Invalid dynamic configuration"


def test_librdkafka_s_broker_configs_are_kept_and_described(broker: BrokerRunner,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's 0081-admin sets these two on the broker resource; Kafka takes them."""
    async def scenario(h: BrokerHarness) -> None:
        before = await describe(h, BROKER, "1", "background.threads")
        assert (before["background.threads"].value, before["background.threads"].config_source) == ("10", DEFAULT_CONFIG)
        configs = {"background.threads": "5", "sasl.kerberos.min.time.before.relogin": "58000"}
        with caplog.at_level(logging.INFO, logger="strom.broker.dynamic_config"):
            assert await alter(h, "1", configs) == (ErrorCode.NONE, None)
        entries = await describe(h, BROKER, "1", *configs)
        threads, relogin = entries["background.threads"], entries["sasl.kerberos.min.time.before.relogin"]
        assert (threads.value, threads.config_source, threads.read_only, threads.config_type) == (
            "5", DYNAMIC_BROKER_CONFIG, False, INT)
        assert layers(threads) == [("background.threads", "5", DYNAMIC_BROKER_CONFIG),
                                   ("background.threads", "10", DEFAULT_CONFIG)]
        assert (relogin.value, relogin.config_type) == ("58000", LONG)

    broker.run(scenario)
    no_effect = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert len(no_effect) == 2
    assert "background.threads" in no_effect[0] and "sasl.kerberos.min.time.before.relogin" in no_effect[1]


def test_unknown_names_are_kept_as_kafka_keeps_them_across_a_restart(broker: BrokerRunner) -> None:
    async def first(h: BrokerHarness) -> None:
        assert await alter(h, "1", {"foo.bar": "baz"}) == (ErrorCode.NONE, None)
        assert await incremental(h, "", ("foo.default", SET, "d"), ("num.network.threads", SET, "4")) == (0, None)

    async def second(h: BrokerHarness) -> None:
        configs = await describe(h, BROKER, "1")
        unknown = configs["foo.bar"]
        # Kafka: of unknown type, so sensitive (no value), and read-only.
        assert (unknown.value, unknown.is_sensitive, unknown.read_only, unknown.config_type) == (
            None, True, True, UNKNOWN)
        assert layers(unknown) == [("foo.bar", None, DYNAMIC_BROKER_CONFIG)]
        assert configs["foo.default"].config_source == DYNAMIC_DEFAULT_BROKER_CONFIG
        assert layers(configs["num.network.threads"]) == [
            ("num.network.threads", "4", DYNAMIC_DEFAULT_BROKER_CONFIG), ("num.network.threads", "3", DEFAULT_CONFIG)]
        defaults = await describe(h, BROKER, "")
        assert sorted(defaults) == ["foo.default", "num.network.threads"]
        assert layers(defaults["foo.default"]) == [("foo.default", None, DYNAMIC_DEFAULT_BROKER_CONFIG)]
        assert await incremental(h, "1", ("foo.bar", DELETE, None)) == (0, None)
        assert "foo.bar" not in await describe(h, BROKER, "1")

    broker.run(first)
    store = broker.data_dir / STORE_DIR
    assert (store / "1").read_text().splitlines()[1:] == ["foo.bar=baz"]
    assert (store / DEFAULT_ENTITY).read_text().splitlines()[1:] == ["foo.default=d", "num.network.threads=4"]
    broker.run(second)


def test_kafka_s_dynamic_configs_are_described_before_they_are_set(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        configs = await describe(h, BROKER, "1")
        io, password = configs["num.io.threads"], configs["ssl.keystore.password"]
        assert (io.value, io.config_source, io.read_only) == ("8", DEFAULT_CONFIG, False)
        assert (password.value, password.is_sensitive, password.read_only) == (None, True, False)
        assert configs["sasl.enabled.mechanisms"].config_type == LIST
        assert await describe(h, BROKER, "") == {}

    broker.run(scenario)


@pytest.mark.parametrize(("name", "configs", "message"), [
    ("1", {"log.dirs": "/x", "zookeeper.connect": "y", "foo.bar": "1"},
     "Cannot update these configs dynamically: Set(log.dirs, zookeeper.connect)"),
    ("1", {"ssl.keystore.location": "/k"},
     "These security configs can be dynamically updated only per-listener using the listener prefix: "
     "HashSet(ssl.keystore.location)"),
    ("", {"sasl.kerberos.min.time.before.relogin": "58000"},
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(sasl.kerberos.min.time.before.relogin)"),
    ("", {"listener.name.plaintext.ssl.keystore.location": "/k"},
     "Cannot update these configs at default cluster level, broker id must be specified: "
     "Set(listener.name.plaintext.ssl.keystore.location)"),
    ("1", {"num.io.threads": "abc"}, "Invalid value abc for configuration num.io.threads: Not a number of type INT"),
    ("1", {"listener.name.plaintext.num.io.threads": "abc"},
     "Invalid value abc for configuration num.io.threads: Not a number of type INT"),
    ("1", {"background.threads": "0"}, "Invalid value 0 for configuration background.threads: Value must be at least 1"),
    ("1", {"sasl.login.refresh.buffer.seconds": "99999"},
     "Invalid value 99999 for configuration sasl.login.refresh.buffer.seconds: Not a number of type SHORT"),
    ("1", {"unclean.leader.election.enable": "maybe"},
     "Invalid value maybe for configuration unclean.leader.election.enable: Expected value to be either true or false"),
    ("1", {"num.io.threads": "100"},
     f"{_THREADS_PREFIX}num.io.threads=100, value should not be greater than double the current value 8{_THREADS_SUFFIX}"),
    ("1", {"num.network.threads": "1"},
     f"{_THREADS_PREFIX}num.network.threads=1, value should be at least half the current value 3{_THREADS_SUFFIX}"),
    ("1", {"listeners": "PLAINTEXT://127.0.0.1:1"},
     "Strom cannot change these configs at run time (set them in server.properties and restart): Set(listeners)"),
])
def test_refusals_of_kafka_s_configs(broker: BrokerRunner, name: str, configs: dict[str, str], message: str) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, name, configs) == (ErrorCode.INVALID_REQUEST, message)
        assert "foo.bar" not in await describe(h, BROKER, "1")

    broker.run(scenario)


def test_a_thread_count_is_checked_against_its_current_value(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, "", {"num.io.threads": "16"}) == (0, None)  # double Kafka's 8
        assert await alter(h, "1", {"num.io.threads": "33"}) == (
            ErrorCode.INVALID_REQUEST,
            f"{_THREADS_PREFIX}num.io.threads=33, value should not be greater than double the current value 16"
            f"{_THREADS_SUFFIX}")
        assert await alter(h, "1", {"num.io.threads": "32"}) == (0, None)

    broker.run(scenario)


def test_listener_configs_and_lists(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, "1", {"listener.name.plaintext.max.connections": "100"}) == (0, None)
        entry = (await describe(h, BROKER, "1"))["listener.name.plaintext.max.connections"]
        assert (entry.value, entry.read_only, entry.config_type) == ("100", True, INT)
        assert layers(entry) == [("listener.name.plaintext.max.connections", "100", DYNAMIC_BROKER_CONFIG),
                                 ("max.connections", "2147483647", DEFAULT_CONFIG)]
        # APPEND starts from Kafka's default of a list Strom keeps only.
        assert await incremental(h, "1", ("sasl.enabled.mechanisms", APPEND, "PLAIN")) == (0, None)
        mechanisms = (await describe(h, BROKER, "1", "sasl.enabled.mechanisms"))["sasl.enabled.mechanisms"]
        assert mechanisms.value == "GSSAPI,PLAIN"

    broker.run(scenario)


def test_any_name_and_value_a_client_sends_is_stored_whole(broker: BrokerRunner) -> None:
    """Names are free now: escaping keeps a line break in a value from making a setting."""
    configs = {"foo.bar": "one\nlog.retention.ms=1", "a b=c:d": "  x\\y ", "#not.a.comment": "", "": "empty"}

    async def first(h: BrokerHarness) -> None:
        assert await alter(h, "1", configs) == (ErrorCode.NONE, None)

    async def second(h: BrokerHarness) -> None:
        assert h.broker.dynamic_config.per_broker == configs
        retention = (await describe(h, BROKER, "1", "log.retention.ms"))["log.retention.ms"]
        assert retention.config_source == DEFAULT_CONFIG

    broker.run(first)
    assert FileConfigStore(str(broker.data_dir)).read("1") == configs
    broker.run(second)


def test_password_configs_are_refused_when_stored_as_kafka_without_an_encoder_secret(
        broker: BrokerRunner, caplog: pytest.LogCaptureFixture) -> None:
    """Kafka's ZooKeeper mode stores a broker's passwords only encrypted with
    password.encoder.secret; without one it validates them but refuses to store them."""
    refused = (ErrorCode.INVALID_CONFIG, "Invalid config value for resource ConfigResource(type=BROKER, name='1'): "
               "Password encoder secret not configured")

    async def scenario(h: BrokerHarness) -> None:
        for name in ("sasl.jaas.config", "listener.name.plaintext.ssl.keystore.password"):
            assert await alter(h, "1", {name: "secret"}, validate_only=True) == (ErrorCode.NONE, None)
            assert await alter(h, "1", {name: "secret"}) == refused
            assert await incremental(h, "1", (name, SET, "secret")) == refused
        assert h.broker.dynamic_config.per_broker == {}
        assert await alter(h, "1", {"background.threads": None}) == (  # type: ignore[dict-item]
            ErrorCode.INVALID_REQUEST, "Null value not supported for : background.threads")
        assert await incremental(h, "1", ("background.threads", SET, None)) == (
            ErrorCode.INVALID_REQUEST, "Null value not supported for : background.threads")
        # A custom config may hold a secret: Kafka calls it sensitive, and the log hides it.
        with caplog.at_level(logging.INFO, logger="strom.broker.dynamic_config"):
            assert await alter(h, "1", {"my.plugin.token": "s3cr3t", "num.io.threads": "9"}) == (0, None)

    broker.run(scenario)
    assert "=secret" not in (broker.data_dir / STORE_DIR / "1").read_text()
    assert "s3cr3t" not in caplog.text and "'num.io.threads': '9'" in caplog.text
