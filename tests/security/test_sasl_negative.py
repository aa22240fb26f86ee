"""SASL refusals as Kafka answers them, over raw connections through the codec (what no
well-behaved client sends), and KIP-368 re-authentication on a listener whose sessions last
``REAUTH_MS``: expiry closes the connection, re-authenticating as the same user renews it,
as another user fails; confluent-kafka re-authenticates by itself across several lifetimes.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import MetadataResponse
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from strom.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from tests.support.sasl import (
    RawConnection,
    SaslBroker,
    confluent_settings,
    create_scram_user,
    oauth_initial_response,
    sasl_broker,
    token_claims,
    unsecured_jwt,
)

REAUTH_MS = 2000
ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslBroker]:
    extra = {"listener.name.sasl_plaintext.connections.max.reauth.ms": str(REAUTH_MS)}
    with sasl_broker(tmp_path_factory.mktemp("sasl-negative") / "data", extra) as running:
        yield running


def authenticate(connection: RawConnection, mechanism: str, token: bytes) -> SaslAuthenticateResponse:
    handshake = connection.request(SaslHandshakeRequest(mechanism), 1)
    assert isinstance(handshake, SaslHandshakeResponse) and handshake.error_code == 0
    response = connection.request(SaslAuthenticateRequest(token), 2)
    assert isinstance(response, SaslAuthenticateResponse)
    return response


def plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def test_a_wrong_password_and_an_unknown_user_get_the_same_58_then_the_connection_closes(broker: SaslBroker) -> None:
    messages = []
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        with RawConnection(broker.sasl_bootstrap) as connection:
            response = authenticate(connection, "PLAIN", plain(user, password))
            assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            messages.append(response.error_message)
            assert connection.closed()
    assert messages == ["Authentication failed: Invalid username or password"] * 2


def test_an_unknown_mechanism_gets_33_with_the_enabled_ones_then_the_close(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        versions = connection.request(ApiVersionsRequest("strom-tests", "1"), 3)  # allowed first, as in Kafka
        assert versions.error_code == 0  # type: ignore[attr-defined]
        response = connection.request(SaslHandshakeRequest("GSSAPI"), 1)
        assert isinstance(response, SaslHandshakeResponse)
        assert (response.error_code, response.mechanisms) == (ErrorCode.UNSUPPORTED_SASL_MECHANISM, ENABLED)
        assert connection.closed()


def test_a_request_before_authentication_closes_the_connection_unanswered(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        connection.send(MetadataRequest(topics=None), 12)
        assert connection.closed()


def test_authenticate_without_a_handshake_is_34(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        response = connection.request(SaslAuthenticateRequest(plain("alice", "alice-secret")), 1)
        assert isinstance(response, SaslAuthenticateResponse)
        assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert connection.closed()


def test_plain_with_a_foreign_authorization_id_is_58(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        response = authenticate(connection, "PLAIN", plain("alice", "alice-secret", authzid="admin"))
        assert (response.error_code, response.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Authentication failed: Client requested an authorization id that is different from username")
        assert connection.closed()


def test_a_scram_credential_with_1000_iterations_is_unacceptable(broker: SaslBroker) -> None:
    response = create_scram_user(broker, "weak", "weak-secret", "SCRAM-SHA-256", iterations=1000)
    assert isinstance(response, AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code, r.error_message) for r in response.results] == [
        ("weak", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")]


@pytest.mark.parametrize(("claims", "reason"), [
    (token_claims("alice", lifetime_s=-60), "is expired"),
    (token_claims(None), "No principal claim"),
])
def test_an_expired_or_subjectless_oauthbearer_token_is_58(broker: SaslBroker, claims: dict[str, object],
                                                           reason: str) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        challenge = authenticate(connection, "OAUTHBEARER", oauth_initial_response(unsecured_jwt(claims)))
        assert challenge.error_code == 0 and b"invalid_token" in challenge.auth_bytes  # RFC 7628's error challenge
        response = connection.request(SaslAuthenticateRequest(b"\x01"), 2)
        assert isinstance(response, SaslAuthenticateResponse)
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message is not None and reason in response.error_message
        assert connection.closed()


def metadata(connection: RawConnection) -> MetadataResponse:
    response = connection.request(MetadataRequest(topics=None), 12)
    assert isinstance(response, MetadataResponse)
    return response


def test_reauthentication_renews_the_session_and_an_expired_one_is_closed(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        first = authenticate(connection, "PLAIN", plain("alice", "alice-secret"))
        assert (first.error_code, first.session_lifetime_ms) == (0, REAUTH_MS)
        assert metadata(connection).brokers
        again = authenticate(connection, "PLAIN", plain("alice", "alice-secret"))  # KIP-368, same connection
        assert (again.error_code, again.session_lifetime_ms) == (0, REAUTH_MS)
        renewed_until = time.monotonic() + REAUTH_MS / 1000
        assert metadata(connection).brokers
        while time.monotonic() < renewed_until + 0.5:  # let the session lapse: waiting on the clock is the point
            time.sleep(0.1)
        connection.send(MetadataRequest(topics=None), 12)
        assert connection.closed()


def test_reauthenticating_as_another_user_fails_and_closes(broker: SaslBroker) -> None:
    with RawConnection(broker.sasl_bootstrap) as connection:
        assert authenticate(connection, "PLAIN", plain("alice", "alice-secret")).error_code == 0
        response = authenticate(connection, "PLAIN", plain("bob", "bob-secret"))
        assert (response.error_code, response.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED,
            "Cannot change principals during re-authentication from User:alice: User:bob")
        assert connection.closed()


def test_confluent_kafka_reauthenticates_by_itself_across_several_lifetimes(broker: SaslBroker) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer

    topic, group = f"reauth-{uuid.uuid4().hex[:8]}", f"group-{uuid.uuid4().hex[:8]}"
    settings = confluent_settings(broker, "PLAIN", "bob", "bob-secret")
    errors: list[KafkaError] = []
    before = len(re.findall(r"User:bob re-authenticated", broker.log_text()))
    producer = Producer(settings | {"error_cb": errors.append})
    consumer = Consumer(settings | {"group.id": group, "auto.offset.reset": "earliest", "error_cb": errors.append})
    consumer.subscribe([topic])
    sent, received = 0, 0
    try:
        end = time.monotonic() + 3.5 * REAUTH_MS / 1000  # several session lifetimes on the same connections
        while time.monotonic() < end or received < sent:
            if time.monotonic() < end:
                producer.produce(topic, value=f"record-{sent}".encode())
                sent += 1
                producer.poll(0)
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received += 1
            assert time.monotonic() < end + 60, f"received {received} of {sent}"
        assert producer.flush(30) == 0
    finally:
        consumer.close()
    assert received == sent and sent > 10
    assert [e for e in errors if e.code() != KafkaError._TRANSPORT] == []
    assert len(re.findall(r"User:bob re-authenticated", broker.log_text())) - before >= 2
