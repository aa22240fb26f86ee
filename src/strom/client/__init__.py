"""Strom's Kafka clients: an asyncio core (producer, group consumer, admin) and a thin
synchronous facade over it. They speak the Kafka protocol through Strom's generated
codec, so they work against any Kafka-compatible broker, not only Strom's.

Importing this package is cheap: the names below load their modules on first use
(PEP 562), so ``from strom.client import AsyncProducer`` does not import the consumer,
the admin client or pyarrow.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from strom.client.admin import AsyncAdmin
    from strom.client.admin_types import NewTopic, TopicPartition
    from strom.client.config import AdminConfig, ConsumerConfig, ProducerConfig
    from strom.client.consumer import AsyncConsumer, ConsumerGroupMetadata
    from strom.client.errors import (
        ConfigError,
        IllegalStateError,
        InvalidProducerEpochError,
        KafkaConnectionError,
        KafkaError,
        KafkaTimeoutError,
        ProducerFencedError,
        TransactionAbortedError,
        UnsupportedVersionError,
    )
    from strom.client.fetcher import ConsumerRecord
    from strom.client.offsets import CommitFailedError, OffsetAndMetadata
    from strom.client.producer import AsyncProducer
    from strom.client.producer_batch import FutureRecordMetadata, RecordMetadata
    from strom.client.sync import Admin, Consumer, Producer

_EXPORTS = {
    "AsyncProducer": "producer", "AsyncConsumer": "consumer", "AsyncAdmin": "admin",
    "Producer": "sync", "Consumer": "sync", "Admin": "sync",
    "ProducerConfig": "config", "ConsumerConfig": "config", "AdminConfig": "config",
    "KafkaError": "errors", "KafkaTimeoutError": "errors", "KafkaConnectionError": "errors",
    "UnsupportedVersionError": "errors", "ConfigError": "errors",
    "ProducerFencedError": "errors", "InvalidProducerEpochError": "errors",
    "TransactionAbortedError": "errors", "IllegalStateError": "errors",
    "ConsumerGroupMetadata": "consumer",
    "CommitFailedError": "offsets", "OffsetAndMetadata": "offsets",
    "ConsumerRecord": "fetcher", "RecordMetadata": "producer_batch", "FutureRecordMetadata": "producer_batch",
    "NewTopic": "admin_types", "TopicPartition": "admin_types",
}

__all__ = [
    "Admin",
    "AdminConfig",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "CommitFailedError",
    "ConfigError",
    "Consumer",
    "ConsumerConfig",
    "ConsumerGroupMetadata",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "IllegalStateError",
    "InvalidProducerEpochError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "NewTopic",
    "OffsetAndMetadata",
    "Producer",
    "ProducerConfig",
    "ProducerFencedError",
    "RecordMetadata",
    "TopicPartition",
    "TransactionAbortedError",
    "UnsupportedVersionError",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'strom.client' has no attribute {name!r}")
    value = getattr(import_module(f"strom.client.{module}"), name)
    globals()[name] = value
    return value
