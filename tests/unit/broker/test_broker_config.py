"""Broker properties: Kafka's names, the topic defaults they set, and refusals."""

from __future__ import annotations

import pytest

from strom.broker.config import BrokerConfig
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
