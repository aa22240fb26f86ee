"""The pre-authentication frame limit, over raw sockets: until a SASL connection has
authenticated, a frame larger than ``sasl.server.max.receive.size`` (524288) closes it as
soon as its size prefix arrives, before the body is buffered (Kafka's
SaslServerAuthenticator), instead of the broker waiting for up to ``socket.request.max.bytes``
(100 MB). Once authenticated, and on a PLAINTEXT listener, the same large frame is answered.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from tests.support.sasl import RawConnection, SaslBroker, sasl_broker

SASL_SERVER_MAX_RECEIVE_SIZE = 524288
LARGE = 600_000  # above the SASL limit, far below socket.request.max.bytes


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    with sasl_broker(tmp_path_factory.mktemp("sasl-frame-limit") / "data") as running:
        yield running


def large_api_versions(correlation_id: int) -> bytes:
    """An ApiVersions v3 request of more than LARGE bytes (a long client software name: the
    broker answers it, with INVALID_REQUEST as the name breaks Kafka's pattern)."""
    frame = encode_request(ApiVersionsRequest("x" * LARGE, "1"), 3, correlation_id, "strom-limit-tests")
    assert len(frame) > LARGE
    return frame


def answer_to_large_request(connection: RawConnection, correlation_id: int) -> ApiVersionsResponse:
    frame = connection.receive_frame()
    assert frame is not None, "the broker closed the connection instead of answering the large request"
    answered, response = decode_response(frame, ApiVersionsRequest.API_KEY or 0, 3)
    assert answered == correlation_id and isinstance(response, ApiVersionsResponse)
    return response


@pytest.mark.parametrize("size", [SASL_SERVER_MAX_RECEIVE_SIZE + 1, 100 * 1024 * 1024])
def test_a_size_prefix_over_the_limit_before_authentication_closes_without_its_body(
        broker: SaslBroker, size: int) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        connection.sock.sendall(size.to_bytes(4, "big"))  # the prefix alone: the body never comes
        assert connection.closed()
    assert f"frame size {size} outside 0..{SASL_SERVER_MAX_RECEIVE_SIZE}" in broker.log_text()


def test_a_frame_at_the_limit_before_authentication_is_read(broker: SaslBroker) -> None:
    """A SaslHandshake padded to exactly the limit (trailing bytes Kafka's parser ignores too)
    gets its answer: the limit is inclusive, as Kafka's."""
    with RawConnection(broker.sasl_bootstrap) as connection:
        payload = encode_request(SaslHandshakeRequest("PLAIN"), 1, 1, "strom-limit-tests")[4:]
        connection.send_raw_frame(payload + bytes(SASL_SERVER_MAX_RECEIVE_SIZE - len(payload)))
        assert connection.receive_frame() is not None


def test_after_authentication_the_normal_limit_applies_even_to_a_frame_sent_with_the_last_token(
        broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        handshake = connection.request(SaslHandshakeRequest("PLAIN"), 1)
        assert handshake.error_code == 0  # type: ignore[attr-defined]
        # The last token and a large request in one write: the large one's size is checked
        # only once the token has been answered.
        connection.sock.sendall(
            encode_request(SaslAuthenticateRequest(b"\0alice\0alice-secret"), 2, 10, "strom-limit-tests")
            + large_api_versions(11))
        frame = connection.receive_frame()
        assert frame is not None
        answered, authenticated = decode_response(frame, SaslAuthenticateRequest.API_KEY or 0, 2)
        assert answered == 10 and isinstance(authenticated, SaslAuthenticateResponse)
        assert authenticated.error_code == 0
        answer_to_large_request(connection, 11)
        connection.sock.sendall(large_api_versions(12))  # and on its own afterwards
        answer_to_large_request(connection, 12)


def test_a_plaintext_listener_reads_the_same_large_frame(broker: SaslBroker) -> None:
    with RawConnection(broker.bootstrap) as connection:
        connection.sock.sendall(large_api_versions(1))
        answer_to_large_request(connection, 1)
