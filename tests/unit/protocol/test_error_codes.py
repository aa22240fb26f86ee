"""The error-code table against values every Kafka client agrees on."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode


@pytest.mark.parametrize(
    ("code", "name", "retriable"),
    [
        (-1, "UNKNOWN_SERVER_ERROR", False),
        (0, "NONE", False),
        (1, "OFFSET_OUT_OF_RANGE", False),
        (2, "CORRUPT_MESSAGE", True),
        (3, "UNKNOWN_TOPIC_OR_PARTITION", True),
        (5, "LEADER_NOT_AVAILABLE", True),
        (6, "NOT_LEADER_OR_FOLLOWER", True),
        (7, "REQUEST_TIMED_OUT", True),
        (10, "MESSAGE_TOO_LARGE", False),
        (14, "COORDINATOR_LOAD_IN_PROGRESS", True),
        (16, "NOT_COORDINATOR", True),
        (18, "RECORD_LIST_TOO_LARGE", False),
        (19, "NOT_ENOUGH_REPLICAS", True),
        (22, "ILLEGAL_GENERATION", False),
        (25, "UNKNOWN_MEMBER_ID", False),
        (27, "REBALANCE_IN_PROGRESS", False),
        (35, "UNSUPPORTED_VERSION", False),
        (36, "TOPIC_ALREADY_EXISTS", False),
        (41, "NOT_CONTROLLER", True),
        (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False),
        (46, "DUPLICATE_SEQUENCE_NUMBER", False),
        (47, "INVALID_PRODUCER_EPOCH", False),
        (51, "CONCURRENT_TRANSACTIONS", True),
        (56, "KAFKA_STORAGE_ERROR", True),
        (59, "UNKNOWN_PRODUCER_ID", False),
        (74, "FENCED_LEADER_EPOCH", True),
        (75, "UNKNOWN_LEADER_EPOCH", True),
        (76, "UNSUPPORTED_COMPRESSION_TYPE", False),
        (79, "MEMBER_ID_REQUIRED", False),
        (82, "FENCED_INSTANCE_ID", False),
        (87, "INVALID_RECORD", False),
        (90, "PRODUCER_FENCED", False),
        (100, "UNKNOWN_TOPIC_ID", True),
    ],
)
def test_known_codes(code: int, name: str, retriable: bool) -> None:
    error = ErrorCode(code)
    assert error.name == name
    assert error == code
    assert error.retriable is retriable
    assert ErrorCode[name] is error


def test_table_is_dense_from_minus_one_to_max() -> None:
    codes = sorted(int(member) for member in ErrorCode)
    assert codes == list(range(-1, codes[-1] + 1))
    assert codes[-1] >= 133


def test_every_member_has_a_description() -> None:
    for member in ErrorCode:
        assert member.message.strip(), member.name
        assert isinstance(member.retriable, bool)


def test_from_code_tolerates_unknown_codes() -> None:
    assert ErrorCode.from_code(6) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert ErrorCode.from_code(32767) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.from_code(-2) is ErrorCode.UNKNOWN_SERVER_ERROR


def test_agrees_with_kafka_python_where_both_define_a_code() -> None:
    import kafka.errors as errors

    for code in range(-1, 128):
        theirs = errors.for_code(code)
        ours = ErrorCode(code)
        # kafka-python marks CORRUPT_MESSAGE non-retriable; Java's CorruptRecordException
        # extends RetriableException, and the Java client is the reference.
        if code != ErrorCode.CORRUPT_MESSAGE:
            assert ours.retriable is theirs.retriable, ours.name


def test_is_an_int_on_the_wire() -> None:
    assert ErrorCode.MESSAGE_TOO_LARGE.to_bytes(2, "big", signed=True) == b"\x00\x0a"
    assert ErrorCode.UNKNOWN_SERVER_ERROR.to_bytes(2, "big", signed=True) == b"\xff\xff"
