"""The group coordinator's settings, with Kafka's property names and defaults.

All of them come from the broker's ``BrokerConfig`` (the defaults here are Kafka's too,
for tests that build a coordinator without a broker).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50  # offsets.topic.num.partitions
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    group_min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    offsets_topic_segment_bytes: int = 104857600  # offsets.topic.segment.bytes
    group_max_size: int = 2**31 - 1  # group.max.size
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000  # offsets.retention.minutes = 10080
    offsets_retention_check_interval_ms: int = 600000  # offsets.retention.check.interval.ms
    offsets_topic_replication_factor: int = 3  # offsets.topic.replication.factor (cluster mode)
    offsets_commit_required_acks: int = -1  # offsets.commit.required.acks
    offsets_commit_timeout_ms: int = 5000  # offsets.commit.timeout.ms

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> GroupConfig:
        return cls(
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            group_min_session_timeout_ms=config.group_min_session_timeout_ms,
            group_max_session_timeout_ms=config.group_max_session_timeout_ms,
            offsets_topic_segment_bytes=config.offsets_topic_segment_bytes,
            group_max_size=config.group_max_size,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            offsets_retention_ms=config.offsets_retention_minutes * 60000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offsets_topic_replication_factor=config.offsets_topic_replication_factor,
            offsets_commit_required_acks=config.offsets_commit_required_acks,
            offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
        )
