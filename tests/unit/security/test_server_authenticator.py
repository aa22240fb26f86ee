"""The SASL state machine (Kafka's SaslServerAuthenticator) without a network: frames in,
response buffers out, with a fake clock for KIP-368's session lifetime."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from strom.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from strom.protocol.primitives import Records
from strom.security.sasl.credential_store import ScramCredentialStore
from strom.security.sasl.listener_config import SaslListenerConfig
from strom.security.sasl.oauthbearer import UnsecuredJwsValidator
from strom.security.sasl.scram import SCRAM_SHA_256
from strom.security.sasl.server_authenticator import SaslServerAuthenticator, SaslState

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "OAUTHBEARER")
GENERIC = "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    def __init__(self, tmp_path: Path, max_reauth_ms: int = 0) -> None:
        self.clock = Clock()
        self.broker_frames: list[bytes] = []
        credentials = ScramCredentialStore(str(tmp_path))
        credentials.set_user("carol", {"SCRAM-SHA-256": SCRAM_SHA_256.credential("carol-secret")})
        config = SaslListenerConfig("SASL_PLAINTEXT", MECHANISMS, {"alice": "alice-secret", "bob": "bob-secret"},
                                    UnsecuredJwsValidator(), {m: max_reauth_ms for m in MECHANISMS}, 100)

        async def broker_handle(frame: bytes) -> list[Records] | None:
            self.broker_frames.append(frame)
            return [b"broker-answer"]

        self.authenticator = SaslServerAuthenticator(config, credentials, broker_handle, "127.0.0.1", clock=self.clock)
        self.correlation_id = 0

    def frame(self, body: Message, version: int) -> bytes:
        self.correlation_id += 1
        return encode_request(body, version, self.correlation_id, "test")[4:]

    def call(self, body: Message, version: int) -> Message:
        frame = self.frame(body, version)
        assert self.authenticator.intercepts(frame)
        answer = asyncio.run(self.authenticator.handle(frame))
        assert answer is not None
        data = b"".join(bytes(chunk) for chunk in answer)  # type: ignore[arg-type]
        correlation_id, response = decode_response(data[4:], body.API_KEY or 0, version)
        assert correlation_id == self.correlation_id
        return response

    def plain(self, user: str, password: str, version: int = 2) -> SaslAuthenticateResponse:
        handshake = self.call(SaslHandshakeRequest("PLAIN"), 1)
        assert isinstance(handshake, SaslHandshakeResponse) and handshake.error_code == 0
        response = self.call(SaslAuthenticateRequest(f"\0{user}\0{password}".encode()), version)
        assert isinstance(response, SaslAuthenticateResponse)
        return response


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_api_versions_goes_to_the_broker_then_plain_authenticates(harness: Harness) -> None:
    frame = harness.frame(ApiVersionsRequest("c", "1"), 3)
    assert harness.authenticator.intercepts(frame)
    assert asyncio.run(harness.authenticator.handle(frame)) == [b"broker-answer"]
    assert harness.broker_frames == [frame]
    response = harness.plain("alice", "alice-secret")
    assert (response.error_code, response.session_lifetime_ms) == (0, 0)
    assert harness.authenticator.principal == "User:alice"
    assert harness.authenticator.close_delay_s() is None
    assert not harness.authenticator.intercepts(harness.frame(MetadataRequest(topics=None), 12))
    assert harness.authenticator.intercepts(harness.frame(SaslHandshakeRequest("PLAIN"), 1))


def test_api_versions_newer_than_the_brokers_goes_to_the_broker_too(harness: Harness) -> None:
    """franz-go 1.22 opens with ApiVersions v5: the broker answers it with its versions
    (KIP-511) rather than the authenticator closing the connection as malformed."""
    frame = bytes(harness.frame(ApiVersionsRequest("c", "1"), 3))
    newer = frame[:2] + (99).to_bytes(2, "big") + frame[4:]
    assert asyncio.run(harness.authenticator.handle(newer)) == [b"broker-answer"]
    assert harness.broker_frames == [newer]
    assert harness.authenticator.state is SaslState.HANDSHAKE_OR_VERSIONS


def test_an_unknown_mechanism_is_33_with_the_enabled_list_then_a_delayed_close(harness: Harness) -> None:
    response = harness.call(SaslHandshakeRequest("GSSAPI"), 1)
    assert isinstance(response, SaslHandshakeResponse)
    assert (response.error_code, response.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, MECHANISMS)
    assert harness.authenticator.close_delay_s() == 0.1


def test_authenticate_without_a_handshake_is_34(harness: Harness) -> None:
    response = harness.call(SaslAuthenticateRequest(b"\0alice\0alice-secret"), 1)
    assert isinstance(response, SaslAuthenticateResponse)
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert harness.authenticator.close_delay_s() == 0.1


def test_a_frame_over_sasl_server_max_receive_size_before_authentication_closes(harness: Harness) -> None:
    with pytest.raises(CloseConnection, match=r"sasl\.server\.max\.receive\.size"):
        harness.authenticator.intercepts(harness.frame(SaslAuthenticateRequest(bytes(524288)), 2))


def test_another_request_before_authentication_closes_the_connection(harness: Harness) -> None:
    frame = harness.frame(MetadataRequest(topics=None), 12)
    assert harness.authenticator.intercepts(frame)
    with pytest.raises(CloseConnection, match="during SASL handshake"):
        asyncio.run(harness.authenticator.handle(frame))
    assert harness.authenticator.principal == "User:ANONYMOUS"


def scram_first(harness: Harness, user: str) -> SaslAuthenticateResponse:
    harness.call(SaslHandshakeRequest("SCRAM-SHA-256"), 1)
    response = harness.call(SaslAuthenticateRequest(f"n,,n={user},r=nonce".encode()), 2)
    assert isinstance(response, SaslAuthenticateResponse)
    return response


def test_an_unknown_scram_user_and_a_wrong_proof_get_the_same_message(tmp_path: Path) -> None:
    unknown = scram_first(Harness(tmp_path / "a"), "mallory")
    wrong = Harness(tmp_path / "b")
    first = scram_first(wrong, "carol")
    assert first.error_code == 0 and first.auth_bytes.startswith(b"r=nonce")
    nonce = first.auth_bytes.split(b",")[0].decode()
    final = wrong.call(SaslAuthenticateRequest(f"c=biws,{nonce},p={base64.b64encode(bytes(32)).decode()}".encode()), 2)
    assert isinstance(final, SaslAuthenticateResponse)
    for response in (unknown, final):
        assert (response.error_code, response.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, GENERIC)
    assert wrong.authenticator.close_delay_s() == 0.1


def test_a_v0_handshake_takes_raw_tokens(harness: Harness) -> None:
    response = harness.call(SaslHandshakeRequest("PLAIN"), 0)
    assert isinstance(response, SaslHandshakeResponse) and response.error_code == 0
    answer = asyncio.run(harness.authenticator.handle(b"\0bob\0bob-secret"))
    assert answer is not None and b"".join(bytes(c) for c in answer) == b"\0\0\0\0"  # type: ignore[arg-type]
    assert harness.authenticator.principal == "User:bob"


def test_a_failed_v0_token_is_closed_unanswered(harness: Harness) -> None:
    harness.call(SaslHandshakeRequest("PLAIN"), 0)
    assert asyncio.run(harness.authenticator.handle(b"\0bob\0wrong")) is None
    assert harness.authenticator.close_delay_s() == 0.1


def test_a_handshake_during_the_exchange_is_34(harness: Harness) -> None:
    harness.call(SaslHandshakeRequest("PLAIN"), 1)
    response = harness.call(SaslHandshakeRequest("PLAIN"), 1)
    assert isinstance(response, SaslHandshakeResponse) and response.error_code == ErrorCode.ILLEGAL_SASL_STATE


@pytest.fixture
def reauth(tmp_path: Path) -> Harness:
    return Harness(tmp_path, max_reauth_ms=5000)


def test_the_session_lifetime_is_sent_and_an_expired_session_closes_on_a_request(reauth: Harness) -> None:
    assert reauth.plain("alice", "alice-secret").session_lifetime_ms == 5000
    metadata = reauth.frame(MetadataRequest(topics=None), 12)
    reauth.clock.now += 4.9
    assert not reauth.authenticator.intercepts(metadata)
    reauth.clock.now += 0.2
    with pytest.raises(CloseConnection, match="expired"):
        reauth.authenticator.intercepts(metadata)


def test_v0_authenticate_gets_no_lifetime_field_but_the_session_still_ends(reauth: Harness) -> None:
    assert reauth.plain("alice", "alice-secret", version=0).session_lifetime_ms == 0  # not in v0's schema
    reauth.clock.now += 6
    with pytest.raises(CloseConnection):
        reauth.authenticator.intercepts(reauth.frame(MetadataRequest(topics=None), 12))


def test_reauthentication_as_the_same_principal_renews_the_session(reauth: Harness) -> None:
    reauth.plain("alice", "alice-secret")
    reauth.clock.now += 4.5
    assert reauth.plain("alice", "alice-secret").session_lifetime_ms == 5000
    assert reauth.authenticator.state is SaslState.COMPLETE
    reauth.clock.now += 4.5
    assert not reauth.authenticator.intercepts(reauth.frame(MetadataRequest(topics=None), 12))
    assert reauth.authenticator.principal == "User:alice"


@pytest.mark.parametrize(("mechanism", "token", "message"), [
    ("PLAIN", b"\0bob\0bob-secret", "Cannot change principals during re-authentication from User:alice: User:bob"),
    ("SCRAM-SHA-256", b"n,,n=carol,r=x",
     "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for re-authentication of mechanism 'PLAIN'"),
])
def test_reauthentication_as_another_principal_or_mechanism_fails(reauth: Harness, mechanism: str, token: bytes,
                                                                  message: str) -> None:
    reauth.plain("alice", "alice-secret")
    assert isinstance(reauth.call(SaslHandshakeRequest(mechanism), 1), SaslHandshakeResponse)
    response = reauth.call(SaslAuthenticateRequest(token), 2)
    assert isinstance(response, SaslAuthenticateResponse)
    assert (response.error_code, response.error_message) == (ErrorCode.SASL_AUTHENTICATION_FAILED, message)
    assert reauth.authenticator.principal == "User:alice"  # never the other one
    assert reauth.authenticator.close_delay_s() == 0.1


def test_an_oauthbearer_tokens_expiry_bounds_the_session(tmp_path: Path) -> None:
    from tests.support.sasl import oauth_initial_response, token_claims, unsecured_jwt

    harness = Harness(tmp_path, max_reauth_ms=3_600_000)
    harness.call(SaslHandshakeRequest("OAUTHBEARER"), 1)
    token = unsecured_jwt(token_claims("alice", lifetime_s=60))
    response = harness.call(SaslAuthenticateRequest(oauth_initial_response(token)), 2)
    assert isinstance(response, SaslAuthenticateResponse) and response.error_code == 0
    assert 50_000 < response.session_lifetime_ms <= 60_000
    assert harness.authenticator.principal == "User:alice"


