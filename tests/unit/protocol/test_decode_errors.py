"""Malformed input raises one ProtocolError that names the message, version and field."""

from __future__ import annotations

import pytest

from strom.protocol.errors import ProtocolError
from strom.protocol.message import UnsupportedVersionError
from strom.protocol.messages import (
    ApiVersionsResponse,
    CreateTopicsRequest,
    MetadataRequest,
    MetadataResponse,
)
from strom.protocol.messages.metadata_request import MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponseBroker
from strom.protocol.primitives import read_uvarint


def _metadata_v1() -> bytes:
    return MetadataRequest(topics=(MetadataRequestTopic(name="orders"),)).encode(1)


def test_truncation_names_the_field() -> None:
    frame = _metadata_v1()
    with pytest.raises(ProtocolError) as info:
        MetadataRequest.decode(1, frame[:-2])
    error = info.value
    assert (error.message_name, error.api_key, error.api_version) == ("MetadataRequest", 3, 1)
    assert error.field == "MetadataRequestTopic.Name"
    assert "MetadataRequest v1 field MetadataRequestTopic.Name" in str(error)


def test_string_longer_than_the_frame() -> None:
    frame = bytearray(_metadata_v1())
    frame[4:6] = (30_000).to_bytes(2, "big")  # the topic name's length
    with pytest.raises(ProtocolError, match="exceeds") as info:
        MetadataRequest.decode(1, bytes(frame))
    assert info.value.field == "MetadataRequestTopic.Name"


def test_negative_string_length_in_a_non_nullable_field() -> None:
    frame = bytearray(_metadata_v1())
    frame[4:6] = (-5).to_bytes(2, "big", signed=True)
    with pytest.raises(ProtocolError, match="negative string length"):
        MetadataRequest.decode(1, bytes(frame))


def test_array_count_larger_than_the_frame_allocates_nothing() -> None:
    frame = (2**31 - 1).to_bytes(4, "big") + b"\x00" * 16
    with pytest.raises(ProtocolError, match="cannot fit") as info:
        MetadataRequest.decode(1, frame)
    assert info.value.field == "MetadataRequest.Topics"


def test_negative_array_count() -> None:
    frame = (-7).to_bytes(4, "big", signed=True)
    with pytest.raises(ProtocolError, match="invalid array length"):
        MetadataRequest.decode(1, frame)


def test_overlong_varint() -> None:
    with pytest.raises(ProtocolError, match="longer than 32 bits"):
        read_uvarint(b"\xff\xff\xff\xff\x7f", 0)
    # A compact array whose count never ends is a truncated frame, not a hang.
    with pytest.raises(ProtocolError):
        MetadataRequest.decode(9, b"\xff" * 64)


def test_invalid_utf8() -> None:
    frame = bytearray(_metadata_v1())
    frame[6] = 0xC3
    frame[7] = 0x28  # an invalid two-byte sequence
    with pytest.raises(ProtocolError, match="utf-8") as info:
        MetadataRequest.decode(1, bytes(frame))
    assert info.value.field == "MetadataRequestTopic.Name"


def test_tagged_fields_out_of_order() -> None:
    body = ApiVersionsResponse(finalized_features_epoch=3, zk_migration_ready=True).encode(3)
    # The tagged section is at the end: count 2, then tag 1 (8 bytes), tag 3 (1 byte).
    tags = body[-14:]
    assert tags[:3] == b"\x02\x01\x08"
    swapped = tags[:1] + tags[11:] + tags[1:11]
    with pytest.raises(ProtocolError, match="out of order"):
        ApiVersionsResponse.decode(3, body[:-14] + swapped)


def test_tagged_field_size_mismatch() -> None:
    body = bytearray(ApiVersionsResponse(finalized_features_epoch=3).encode(3))
    # Declare 9 bytes for the 8-byte epoch and add a byte so the frame stays whole.
    assert body[-11:-8] == b"\x01\x01\x08"
    body[-9] = 9
    body += b"\x00"
    with pytest.raises(ProtocolError, match="declared"):
        ApiVersionsResponse.decode(3, bytes(body))


def test_unknown_tagged_fields_are_kept_not_lost() -> None:
    body = ApiVersionsResponse(unknown_tagged_fields=((17, b"\x01\x02"),)).encode(3)
    decoded = ApiVersionsResponse.decode(3, body)
    assert decoded.unknown_tagged_fields == ((17, b"\x01\x02"),)
    assert decoded.encode(3) == body


def test_unsupported_version() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        MetadataRequest.decode(99, b"")
    assert info.value.error_code == 35
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest().encode(-1)


def test_non_default_field_missing_from_a_version_is_refused_on_encode() -> None:
    # validateOnly arrived in CreateTopics v1 and is not ignorable: dropping it would
    # turn a dry run into a real one.
    request = CreateTopicsRequest(validate_only=True)
    with pytest.raises(UnsupportedVersionError, match="validateOnly"):
        request.encode(0)
    assert CreateTopicsRequest.decode(1, request.encode(1)) == request


def test_ignorable_field_missing_from_a_version_is_dropped() -> None:
    response = MetadataResponse(brokers=(MetadataResponseBroker(1, "h", 9092, rack="r1"),))
    assert MetadataResponse.decode(0, response.encode(0)).brokers[0].rack is None
    assert MetadataResponse.decode(1, response.encode(1)) == response


def test_null_in_a_version_that_does_not_allow_it() -> None:
    with pytest.raises(ValueError, match="Topics cannot be null in version 0"):
        MetadataRequest(topics=None).encode(0)
