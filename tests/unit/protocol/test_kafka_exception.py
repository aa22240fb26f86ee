"""Every exception that carries a Kafka error code shares one root, ``KafkaException``."""

from __future__ import annotations

import pytest

from strom.broker.fetch_session import FetchSessionError
from strom.broker.metadata_cache import TopicError
from strom.client.errors import KafkaError, KafkaTimeoutError
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException, ProtocolError
from strom.storage.errors import OffsetOutOfRangeError, StorageError


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (ProtocolError("bad crc", field="records"), ErrorCode.CORRUPT_MESSAGE, "bad crc (field records)"),
        (ProtocolError("nope", error_code=35), ErrorCode.UNSUPPORTED_VERSION, "nope"),
        (StorageError("disk"), ErrorCode.UNKNOWN_SERVER_ERROR, "disk"),
        (StorageError("full", ErrorCode.KAFKA_STORAGE_ERROR), ErrorCode.KAFKA_STORAGE_ERROR, "full"),
        (OffsetOutOfRangeError("past end"), ErrorCode.OFFSET_OUT_OF_RANGE, "past end"),
        (TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, "t exists"), ErrorCode.TOPIC_ALREADY_EXISTS, "t exists"),
        (FetchSessionError(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "gone"), ErrorCode.FETCH_SESSION_ID_NOT_FOUND, "gone"),
        (KafkaError(6), ErrorCode.NOT_LEADER_OR_FOLLOWER, "NOT_LEADER_OR_FOLLOWER (6): " + ErrorCode.NOT_LEADER_OR_FOLLOWER.message),
        (KafkaTimeoutError("slow"), ErrorCode.REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT (7): slow"),
    ],
)
def test_each_root_is_a_kafka_exception_with_its_code_and_message(
    exc: KafkaException, code: ErrorCode, message: str
) -> None:
    assert isinstance(exc, KafkaException)
    assert exc.error_code is code
    assert exc.message == message == str(exc)


def test_an_error_code_newer_than_the_table_is_unknown_server_error() -> None:
    assert KafkaException("from a newer broker", 30_000).error_code is ErrorCode.UNKNOWN_SERVER_ERROR


def test_one_except_catches_every_root() -> None:
    caught = []
    for exc in (ProtocolError("a"), StorageError("b"), TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, "c"),
                FetchSessionError(ErrorCode.INVALID_FETCH_SESSION_EPOCH, "d"), KafkaError(3)):
        try:
            raise exc
        except KafkaException as err:
            caught.append(int(err.error_code))
    assert caught == [2, -1, 17, 71, 3]
