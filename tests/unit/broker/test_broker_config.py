"""Broker properties: Kafka's names, the topic defaults they set, and refusals."""

from __future__ import annotations

import re

import pytest

from strom.broker.config import BrokerConfig, ConfigError
from strom.broker.group.group_config import GroupConfig


def test_defaults_are_kafkas() -> None:
    config = BrokerConfig()
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.socket_request_max_bytes == 104857600
    assert config.log.segment_bytes == 1 << 30
    assert config.log.retention_ms == 7 * 24 * 3600 * 1000


def test_broker_log_properties_set_topic_defaults() -> None:
    config = BrokerConfig.from_properties(
        {
            "log.retention.hours": "2",
            "log.segment.bytes": "1048576",
            "message.max.bytes": "2000000",
            "log.preallocate": "true",
            "num.partitions": "3",
        }
    )
    assert config.log.retention_ms == 2 * 3600 * 1000
    assert config.log.segment_bytes == 1048576
    assert config.log.max_message_bytes == 2000000
    assert config.log.preallocate is True
    assert config.num_partitions == 3


def test_group_settings_reach_the_coordinator() -> None:
    config = BrokerConfig.from_properties(
        {
            "group.max.size": "5",
            "offset.metadata.max.bytes": "100",
            "offsets.retention.minutes": "3",
            "offsets.topic.num.partitions": "7",
        }
    )
    group = GroupConfig.from_broker(config)
    assert (group.group_max_size, group.offset_metadata_max_bytes) == (5, 100)
    assert group.offsets_retention_ms == 180000
    assert group.offsets_topic_num_partitions == 7


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("log.retention.msec", "1", "unknown broker property"),
        ("num.partitions", "many", "must be an integer"),
        ("auto.create.topics.enable", "yes", "true or false"),
        ("log.cleanup.policy", "shred", "cleanup.policy"),
    ],
)
def test_bad_properties_are_refused(name: str, value: str, message: str) -> None:
    with pytest.raises(Exception, match=message):
        BrokerConfig.from_properties({name: value})


def test_cluster_settings_have_kafkas_names_and_defaults() -> None:
    assert not BrokerConfig().cluster_mode
    config = BrokerConfig.from_properties({"broker.id": "3", "zookeeper.connect": "127.0.0.1:2181/strom",
                                           "zookeeper.session.timeout.ms": "6000"})
    assert (config.node_id, config.cluster_mode) == (3, True)
    assert config.zookeeper_connection_timeout == 6000  # unset: the session timeout, as Kafka
    defaults = BrokerConfig()
    assert (defaults.zookeeper_session_timeout_ms, defaults.offsets_topic_replication_factor) == (18000, 3)
    assert (defaults.controlled_shutdown_enable, defaults.controlled_shutdown_max_retries,
            defaults.controlled_shutdown_retry_backoff_ms) == (True, 3, 5000)


def test_a_mistyped_timeout_is_refused_with_the_name_it_meant() -> None:
    """Jepsen's own Kafka harness once set zookeeper.session.tmeout.ms: silently ignored there."""
    with pytest.raises(ConfigError, match=re.escape("did you mean 'zookeeper.session.timeout.ms'")):
        BrokerConfig.from_properties({"zookeeper.session.tmeout.ms": "1000"})


def test_broker_id_and_node_id_must_agree() -> None:
    assert BrokerConfig.from_properties({"broker.id": "2", "node.id": "2"}).node_id == 2
    with pytest.raises(ConfigError, match=re.escape("broker.id 2 and node.id 5 differ")):
        BrokerConfig.from_properties({"broker.id": "2", "node.id": "5"})


def test_listener_overrides_are_kept_per_listener_and_a_later_layer_wins() -> None:
    config = BrokerConfig.from_properties({
        "listener.name.SASL_SSL.plain.sasl.jaas.config": "first",
        "listener.name.client.ssl.client.auth": " required ",
    })
    assert config.listener_property("sasl_ssl", "plain.sasl.jaas.config") == "first"
    assert config.listener_property("CLIENT", "ssl.client.auth") == "required"
    assert config.listener_property("CLIENT", "ssl.keystore.location") is None
    later = config.with_properties({"listener.name.sasl_ssl.plain.sasl.jaas.config": "second"})
    assert later.listener_property("SASL_SSL", "plain.sasl.jaas.config") == "second"


@pytest.mark.parametrize("name", ["listener.name.", "listener.name.client", "listener.name..x", "listener.name.client."])
def test_a_malformed_listener_override_is_one_clear_error(name: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("listener.name.<listener>.<property>")):
        BrokerConfig.from_properties({name: "x"})
