"""``__transaction_state`` records: Kafka's TransactionLogKey/Value v0 bytes, and an id's partition."""

from __future__ import annotations

import struct

import pytest

from strom.broker.transaction.transaction_log import (
    TransactionLogValue,
    TransactionState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from strom.protocol.errors import ProtocolError


def test_the_key_is_version_0_and_a_classic_string() -> None:
    assert encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert decode_key(b"\x00\x00\x00\x02tx") == "tx"
    assert decode_key(b"\x00\x01\x00\x02tx") is None  # a version this code does not know: skipped


def test_an_ongoing_value_has_its_partitions_grouped_by_topic() -> None:
    value = TransactionLogValue(producer_id=7, producer_epoch=3, transaction_timeout_ms=60000,
                                state=TransactionState.ONGOING, partitions=frozenset({("t", 1), ("t", 0), ("u", 5)}),
                                last_update_timestamp_ms=1000, start_timestamp_ms=900)
    expected = (struct.pack(">hqhib", 0, 7, 3, 60000, 1) + struct.pack(">i", 2)
                + b"\x00\x01t" + struct.pack(">iii", 2, 0, 1) + b"\x00\x01u" + struct.pack(">ii", 1, 5)
                + struct.pack(">qq", 1000, 900))
    assert encode_value(value) == expected
    assert decode_value(expected) == value


def test_an_empty_transaction_has_null_partitions() -> None:
    value = TransactionLogValue(1, 0, 10, TransactionState.EMPTY, frozenset(), 5, -1)
    encoded = encode_value(value)
    assert encoded[17:21] == b"\xff\xff\xff\xff"
    assert decode_value(encoded) == value
    with pytest.raises(ValueError):
        encode_value(TransactionLogValue(1, 0, 10, TransactionState.EMPTY, frozenset({("t", 0)}), 5, -1))


def test_a_flexible_v1_value_written_by_a_newer_kafka_is_read() -> None:
    # v1: compact array/string lengths (+1), a tagged-field section per topic and at the end.
    v1 = (struct.pack(">hqhib", 1, 7, 3, 60000, 2) + b"\x02" + b"\x02t" + b"\x02" + struct.pack(">i", 4) + b"\x00"
          + struct.pack(">qq", 20, 10) + b"\x00")
    assert decode_value(v1) == TransactionLogValue(7, 3, 60000, TransactionState.PREPARE_COMMIT,
                                                   frozenset({("t", 4)}), 20, 10)


@pytest.mark.parametrize("data", [b"", b"\x00\x05" + bytes(30), struct.pack(">hqhib", 0, 1, 0, 1, 9) + bytes(24)])
def test_a_malformed_value_is_a_protocol_error(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_value(data)


def test_an_id_goes_where_kafka_puts_it() -> None:
    assert partition_for("hello", 50) == 99162322 % 50  # Java: "hello".hashCode() == 99162322
    assert partition_for("polygenelubricants", 50) == 0  # hashCode() == Integer.MIN_VALUE: Utils.abs gives 0


def test_state_names_are_kafkas() -> None:
    assert [s.display_name for s in TransactionState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
