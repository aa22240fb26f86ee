"""Dynamic broker configs (KIP-226): AlterConfigs / IncrementalAlterConfigs on BROKER resources.

This broker's id names its own layer, the empty name the cluster-wide default; both
apply at once (topic defaults of existing logs, the cleaner threads), show in
DescribeConfigs with Kafka's sources and synonym order, and survive a restart.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest

from strom.broker.config import BROKER_TO_TOPIC
from strom.broker.dynamic_config import DEFAULT_ENTITY, DYNAMIC_TOPIC_DEFAULTS, STORE_DIR
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records.v2_builder import build_record_batch
from tests.support.broker_harness import BrokerHarness, BrokerRunner, batch, produce_request
from tests.support.config_requests import (
    APPEND,
    BROKER,
    DEFAULT_CONFIG,
    DELETE,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    INT,
    SET,
    STATIC_BROKER_CONFIG,
    SUBTRACT,
    TOPIC,
    alter,
    describe,
    incremental,
    layers,
)


def test_a_per_broker_setting_is_described_with_its_layers(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, "1", {"log.retention.ms": "3600000"}) == (ErrorCode.NONE, None)
        entry = (await describe(h, BROKER, "1", "log.retention.ms"))["log.retention.ms"]
        assert (entry.value, entry.config_source, entry.read_only) == ("3600000", DYNAMIC_BROKER_CONFIG, False)
        assert layers(entry) == [
            ("log.retention.ms", "3600000", DYNAMIC_BROKER_CONFIG),
            ("log.retention.ms", "7200000", STATIC_BROKER_CONFIG),
            ("log.retention.hours", "168", DEFAULT_CONFIG),  # Kafka's: log.retention.ms has no default
        ]
        configs = await describe(h, BROKER, "1")
        assert configs["num.partitions"].read_only and not configs["log.cleaner.threads"].read_only
        assert configs["log.cleaner.threads"].config_type == INT  # as Kafka types it
        assert await describe(h, BROKER, "") == {}  # nothing at the cluster level

    broker.run(scenario, {"log.retention.ms": "7200000"})


def test_per_broker_beats_cluster_default_which_beats_static(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "", {"log.retention.ms": "5000", "log.segment.bytes": "1000000"}) == (0, None)
        assert await alter(h, "1", {"log.retention.ms": "6000"}) == (0, None)
        topic = await describe(h, TOPIC, "t", "retention.ms", "segment.bytes", "cleanup.policy")
        assert (topic["retention.ms"].value, topic["retention.ms"].config_source) == ("6000", DYNAMIC_BROKER_CONFIG)
        assert layers(topic["retention.ms"]) == [
            ("log.retention.ms", "6000", DYNAMIC_BROKER_CONFIG),
            ("log.retention.ms", "5000", DYNAMIC_DEFAULT_BROKER_CONFIG),
            ("log.retention.hours", "2", STATIC_BROKER_CONFIG),  # Kafka lists the synonyms below
            ("log.retention.hours", "168", DEFAULT_CONFIG),
        ]
        segment = topic["segment.bytes"]
        assert (segment.value, segment.config_source) == ("1000000", DYNAMIC_DEFAULT_BROKER_CONFIG)
        assert topic["cleanup.policy"].config_source == DEFAULT_CONFIG
        # The default resource lists only its own settings, each with its one synonym.
        defaults = await describe(h, BROKER, "")
        assert sorted(defaults) == ["log.retention.ms", "log.segment.bytes"]
        assert (defaults["log.retention.ms"].value, defaults["log.retention.ms"].read_only) == ("5000", False)
        assert layers(defaults["log.retention.ms"]) == [("log.retention.ms", "5000", DYNAMIC_DEFAULT_BROKER_CONFIG)]
        # A topic override still comes first.
        await h.create_topic("own", configs={"retention.ms": "7000"})
        own = (await describe(h, TOPIC, "own", "retention.ms"))["retention.ms"]
        assert (own.value, own.config_source) == ("7000", DYNAMIC_TOPIC_CONFIG)
        assert [s.source for s in own.synonyms][:2] == [DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG]

    broker.run(scenario, {"log.retention.hours": "2"})


def test_a_new_default_applies_at_once_to_logs_without_an_override(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("plain")
        await h.create_topic("own", configs={"max.message.bytes": "100000"})
        await h.produce("plain", 0, [b"x" * 1000])  # the log exists and takes 1000-byte batches
        assert await alter(h, "", {"message.max.bytes": "500"}) == (0, None)
        refused = await h.request(produce_request("plain", 0, batch([b"x" * 1000])), version=9)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE
        assert await h.produce("own", 0, [b"x" * 1000]) == 0  # its override wins
        assert await alter(h, "", {}) == (0, None)  # the legacy API empties the layer
        assert await h.produce("plain", 0, [b"x" * 1000]) == 1

    broker.run(scenario)


@pytest.mark.parametrize(("name", "configs", "message"), [
    ("1", {"num.partitions": "5"}, "Cannot update these configs dynamically: Set(num.partitions)"),
    ("", {"log.retention.hours": "1", "log.dirs": "/x"},
     "Cannot update these configs dynamically: Set(log.dirs, log.retention.hours)"),
    ("1", {"log.roll.ms": "100000", "log.roll.hours": "2"}, "Cannot update these configs dynamically: Set(log.roll.hours)"),
    ("1", {"log.message.format.version": "2.1"}, "Cannot update these configs dynamically: Set(log.message.format.version)"),
    ("1", {"broker.id": "3", "zookeeper.connect": "z"},  # Kafka's names Strom does not have
     "Cannot update these configs dynamically: Set(broker.id, zookeeper.connect)"),
    ("7", {"log.retention.ms": "1"}, "Unexpected broker id, expected 1, but received 7"),
    ("one", {}, "Node id must be an integer, but it is: one"),
    ("1", {"log.retention.ms": "soon"}, "invalid value 'soon' for log.retention.ms: must be an integer"),
    ("", {"log.cleaner.threads": "0"}, None),
])
def test_refusals_are_invalid_requests_with_kafka_s_message(
    broker: BrokerRunner, name: str, configs: dict[str, str], message: str | None
) -> None:
    async def scenario(h: BrokerHarness) -> None:
        error, text = await alter(h, name, configs)
        assert error == ErrorCode.INVALID_REQUEST
        assert text is not None
        if message is not None:
            assert text == message
        assert await describe(h, BROKER, "") == {}

    broker.run(scenario)


def test_validate_only_changes_nothing(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await alter(h, "1", {"log.retention.ms": "1000"}, validate_only=True) == (0, None)
        assert (await alter(h, "1", {"num.partitions": "2"}, validate_only=True))[0] == ErrorCode.INVALID_REQUEST
        entry = (await describe(h, BROKER, "1", "log.retention.ms"))["log.retention.ms"]
        assert (entry.value, entry.config_source) == (None, DEFAULT_CONFIG)  # unset: null, as Kafka
        assert not (broker.data_dir / STORE_DIR).exists()

    broker.run(scenario)


def test_incremental_changes_one_setting_of_the_layer(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert await incremental(h, "", ("log.retention.ms", SET, "9000"), ("log.segment.bytes", SET, "2000000")) == (0, None)
        # APPEND starts from Kafka's default ("delete") when the layer does not set it.
        assert await incremental(h, "", ("log.cleanup.policy", APPEND, "compact"), ("log.retention.ms", DELETE, None)) == (0, None)
        defaults = await describe(h, BROKER, "")
        assert {name: entry.value for name, entry in defaults.items()} == {
            "log.cleanup.policy": "delete,compact", "log.segment.bytes": "2000000",
        }
        assert await incremental(h, "", ("log.cleanup.policy", SUBTRACT, "delete")) == (0, None)
        assert (await describe(h, BROKER, "", "log.cleanup.policy"))["log.cleanup.policy"].value == "compact"
        assert await incremental(h, "1", ("log.retention.ms", APPEND, "1")) == (
            ErrorCode.INVALID_CONFIG, "Config value append is not allowed for config key: log.retention.ms")
        error, text = await incremental(h, "1", ("num.partitions", SET, "4"))
        assert (error, text) == (ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: Set(num.partitions)")
        error, text = await incremental(h, "1", ("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None))
        assert (error, text) == (ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")

    broker.run(scenario)


def test_dynamic_configs_survive_a_restart(broker: BrokerRunner) -> None:
    async def first(h: BrokerHarness) -> None:
        await h.create_topic("t")
        assert await alter(h, "1", {"message.max.bytes": "500"}) == (0, None)
        assert await incremental(h, "", ("log.retention.ms", SET, "5000")) == (0, None)

    async def second(h: BrokerHarness) -> None:
        topic = await describe(h, TOPIC, "t", "max.message.bytes", "retention.ms")
        assert (topic["max.message.bytes"].value, topic["max.message.bytes"].config_source) == ("500", DYNAMIC_BROKER_CONFIG)
        assert (topic["retention.ms"].value, topic["retention.ms"].config_source) == ("5000", DYNAMIC_DEFAULT_BROKER_CONFIG)
        # The log loaded with the dynamic default, not only its description.
        refused = await h.request(produce_request("t", 0, batch([b"x" * 1000])), version=9)
        assert refused.responses[0].partition_responses[0].error_code == ErrorCode.MESSAGE_TOO_LARGE

    broker.run(first)
    store = broker.data_dir / STORE_DIR
    assert sorted(p.name for p in store.iterdir()) == ["1", DEFAULT_ENTITY]
    # The on-disk format: Java-properties lines of the layer's own settings.
    assert (store / DEFAULT_ENTITY).read_text().splitlines()[1:] == ["log.retention.ms=5000"]
    assert (store / "1").read_text().splitlines()[1:] == ["message.max.bytes=500"]
    broker.run(second)


def test_a_stored_setting_no_longer_valid_is_ignored_with_an_error(broker: BrokerRunner,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    store = broker.data_dir / STORE_DIR
    store.mkdir()
    (store / "1").write_text("log.retention.ms=5000\nnum.partitions=9\nlog.segment.bytes=tiny\n")

    async def scenario(h: BrokerHarness) -> None:
        configs = await describe(h, BROKER, "1", "log.retention.ms", "num.partitions", "log.segment.bytes")
        assert {name: (c.value, c.config_source) for name, c in configs.items()} == {
            "log.retention.ms": ("5000", DYNAMIC_BROKER_CONFIG),
            "num.partitions": ("1", DEFAULT_CONFIG),
            "log.segment.bytes": ("1073741824", DEFAULT_CONFIG),
        }

    with caplog.at_level(logging.ERROR, logger="strom.broker.dynamic_config"):
        broker.run(scenario)
    ignored = sorted(r.getMessage().split("=")[0] for r in caplog.records)
    assert ignored == ["dynamic broker config log.segment.bytes", "dynamic broker config num.partitions"]


def test_a_layer_that_cannot_be_saved_is_not_applied(broker: BrokerRunner) -> None:
    (broker.data_dir / STORE_DIR).write_text("a file where the store's directory should be")

    async def scenario(h: BrokerHarness) -> None:
        error, message = await alter(h, "1", {"log.retention.ms": "1000"})
        assert error == ErrorCode.UNKNOWN_SERVER_ERROR
        assert message is not None and "could not be saved" in message
        entry = (await describe(h, BROKER, "1", "log.retention.ms"))["log.retention.ms"]
        assert (entry.value, entry.config_source) == (None, DEFAULT_CONFIG)  # unset: null, as Kafka

    broker.run(scenario)


def _cleaner_threads() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name.startswith("log-cleaner-"))


def test_cleaner_settings_restart_the_cleaner_threads(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        assert _cleaner_threads() == 1
        assert await alter(h, "1", {"log.cleaner.threads": "2", "log.cleaner.backoff.ms": "100"}) == (0, None)
        assert _cleaner_threads() == 2
        assert h.broker.log_cleaner.config.backoff_ms == 100
        # As Kafka, the thread count at most doubles (or halves) in one change.
        assert await alter(h, "1", {"log.cleaner.threads": "5"}) == (
            ErrorCode.INVALID_REQUEST, "Invalid value org.apache.kafka.common.config.ConfigException: Log cleaner "
            "threads cannot be increased to more than double the current value 2 for configuration Invalid dynamic "
            "configuration")
        assert await alter(h, "1", {}) == (0, None)
        assert _cleaner_threads() == 1

    broker.run(scenario, {"log.cleaner.enable": "true"})
    assert _cleaner_threads() == 0


def test_producer_id_expiration_applies_to_existing_logs(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        idempotent = build_record_batch([(None, b"v", (), None)], producer_id=7, producer_epoch=0, base_sequence=0)
        response = await h.request(produce_request("t", 0, bytes(idempotent)), version=9)
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        later = int(time.time() * 1000) + 60_000  # a minute on: not expired under the 24 h default
        assert h.broker.log_manager.remove_expired_producers(later) == 0
        assert await alter(h, "1", {"producer.id.expiration.ms": "1000"}) == (0, None)
        assert h.broker.log_manager.remove_expired_producers(later) == 1

    broker.run(scenario)


def test_every_dynamic_topic_default_is_a_broker_synonym() -> None:
    assert not DYNAMIC_TOPIC_DEFAULTS - BROKER_TO_TOPIC.keys()
