"""The exceptions of cluster mode's ZooKeeper layer, each with the Kafka error code it answers with."""

from __future__ import annotations

from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException


class ZooKeeperError(KafkaException):
    """ZooKeeper could not be reached, or answered in a way Kafka would not accept."""


class ControllerMovedError(KafkaException):
    """Another broker was elected controller: this one's writes are fenced, it must resign."""

    error_code = ErrorCode.NOT_CONTROLLER


class BrokerRegistrationError(ZooKeeperError):
    """``/brokers/ids/<id>`` stays owned by another live session: a second broker with this id."""


class TopicExistsError(KafkaException):
    error_code = ErrorCode.TOPIC_ALREADY_EXISTS


class UnknownTopicError(KafkaException):
    error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


class InvalidPartitionsError(KafkaException):
    error_code = ErrorCode.INVALID_PARTITIONS


class InvalidReplicaAssignmentError(KafkaException):
    error_code = ErrorCode.INVALID_REPLICA_ASSIGNMENT
