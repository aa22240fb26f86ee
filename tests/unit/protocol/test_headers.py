from __future__ import annotations

import uuid

import pytest

from strom.protocol.headers import (
    UnsupportedRequestError,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
    response_header_version,
)
from strom.protocol.messages import APIS, ApiVersionsRequest, FetchResponse, ProduceRequest
from strom.protocol.messages.fetch_response import FetchableTopicResponse, PartitionData
from strom.protocol.messages.produce_request import PartitionProduceData, TopicProduceData


def test_header_versions_follow_kafkas_rules() -> None:
    assert request_header_version(0, 8) == 1  # Produce v8 is not flexible
    assert request_header_version(0, 9) == 2
    assert request_header_version(7, 0) == 0  # ControlledShutdown v0
    assert request_header_version(3, 9) == 2
    assert response_header_version(0, 9) == 1
    assert response_header_version(0, 8) == 0
    # ApiVersions responses always use header v0, even in flexible versions.
    assert response_header_version(18, 3) == 0
    assert response_header_version(18, 4) == 0


@pytest.mark.parametrize("api_key", sorted(APIS))
def test_every_request_frames_and_unframes(api_key: int) -> None:
    info = APIS[api_key]
    for version in (info.versions.start, info.versions.stop - 1):
        body = info.request_class()()
        frame = encode_request(body, version, correlation_id=42, client_id="strom-test")
        assert int.from_bytes(frame[:4], "big") == len(frame) - 4
        request = decode_request(frame[4:])
        assert request.api_key == api_key and request.api_version == version
        assert request.correlation_id == 42
        if request_header_version(api_key, version) > 0:
            assert request.header.client_id == "strom-test"
        assert request.body == body


def test_unknown_api_key_is_reported_with_its_header() -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 99, "c"))
    frame[4:6] = (10_000).to_bytes(2, "big")
    with pytest.raises(UnsupportedRequestError) as info:
        decode_request(bytes(frame[4:]))
    assert info.value.header.correlation_id == 99
    assert info.value.header.request_api_key == 10_000


def test_unsupported_api_versions_version_keeps_its_correlation_id() -> None:
    frame = bytearray(encode_request(ApiVersionsRequest(), 0, 5, "c"))
    frame[6:8] = (77).to_bytes(2, "big")  # a future ApiVersions version
    with pytest.raises(UnsupportedRequestError) as info:
        decode_request(bytes(frame[4:]))
    assert info.value.header.correlation_id == 5
    assert info.value.error_code == 35


def test_trailing_bytes_after_a_request_are_ignored_as_kafka_does() -> None:
    frame = encode_request(ApiVersionsRequest(), 2, 1, "c") + b"\x00\x01\x02"
    request = decode_request(frame[4:])
    assert request.body == ApiVersionsRequest()
    assert request.trailing_bytes == 3


def test_produce_records_are_not_copied() -> None:
    records = bytes(1 << 20)
    body = ProduceRequest(
        acks=-1,
        timeout_ms=1000,
        topic_data=(TopicProduceData("t", (PartitionProduceData(0, records),)),),
    )
    frame = encode_request(body, 9, 1, "c")
    payload = memoryview(frame)[4:]
    decoded = decode_request(payload).body
    assert isinstance(decoded, ProduceRequest)
    view = decoded.topic_data[0].partition_data[0].records
    assert isinstance(view, memoryview)
    assert view.obj is frame  # a view into the frame, not a copy
    assert view == records


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_response_hands_large_records_to_sendmsg(version: int) -> None:
    records = memoryview(bytes(range(256)) * 4096)
    body = FetchResponse(
        responses=(
            FetchableTopicResponse(
                # Fetch v13 replaced topic names with topic ids.
                topic="t" if version < 13 else "",
                topic_id=uuid.UUID(int=0) if version < 13 else uuid.UUID(int=7),
                partitions=(PartitionData(partition_index=0, records=records),),
            ),
        )
    )
    chunks = encode_response(body, version, correlation_id=3)
    assert any(chunk is records for chunk in chunks)
    wire = b"".join(chunks)
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4
    correlation_id, decoded = decode_response(wire[4:], 1, version)
    assert correlation_id == 3
    assert decoded == body
