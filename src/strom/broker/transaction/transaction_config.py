"""The transaction coordinator's settings, with Kafka's property names and defaults.

All come from the broker's ``BrokerConfig``; the defaults here are Kafka's too, for
tests that build a coordinator without a broker.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig


@dataclass(frozen=True, slots=True)
class TransactionConfig:
    num_partitions: int = 50  # transaction.state.log.num.partitions
    replication_factor: int = 3  # transaction.state.log.replication.factor
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 104857600  # transaction.state.log.segment.bytes
    max_timeout_ms: int = 900000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 604800000  # transactional.id.expiration.ms
    abort_timed_out_interval_ms: int = 10000  # transaction.abort.timed.out.transaction.cleanup.interval.ms
    remove_expired_interval_ms: int = 3600000  # transaction.remove.expired.transaction.cleanup.interval.ms
    # Kafka's request.timeout.ms (30 s): how long an append waits for its replicas.
    append_timeout_ms: int = 30000
    # How long a marker round that met a retriable error waits before the next (Kafka's
    # marker channel retries on its next drain, after retry.backoff.ms = 100).
    marker_retry_backoff_ms: int = 100

    @classmethod
    def from_broker(cls, config: BrokerConfig) -> TransactionConfig:
        return cls(
            num_partitions=config.transaction_state_log_num_partitions,
            replication_factor=config.transaction_state_log_replication_factor,
            min_isr=config.transaction_state_log_min_isr,
            segment_bytes=config.transaction_state_log_segment_bytes,
            max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            abort_timed_out_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            remove_expired_interval_ms=config.transaction_remove_expired_transaction_cleanup_interval_ms,
        )
