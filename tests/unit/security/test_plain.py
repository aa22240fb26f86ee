"""SASL/PLAIN's server side: Kafka's PlainSaslServer checks and messages."""

from __future__ import annotations

import pytest

from strom.security.sasl.mechanism import SaslAuthenticationError
from strom.security.sasl.plain import INVALID_CREDENTIALS, PlainServer, users_from_options

USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.mark.parametrize("authorization_id", ["", "alice"])
def test_a_user_with_the_right_password_is_authenticated(authorization_id: str) -> None:
    server = PlainServer(USERS)
    assert server.evaluate_response(f"{authorization_id}\0alice\0alice-secret".encode()) == b""
    assert server.is_complete and server.authorization_id == "alice"


@pytest.mark.parametrize(("response", "message"), [
    (b"\0alice\0wrong", INVALID_CREDENTIALS),
    (b"\0mallory\0alice-secret", INVALID_CREDENTIALS),  # the same message for an unknown user
    (b"bob\0alice\0alice-secret", "Client requested an authorization id that is different from username"),
    (b"\0\0alice-secret", "username not specified"),
    (b"\0alice\0", "password not specified"),
    (b"alice\0alice-secret", "expected 3 tokens, got 2"),
])
def test_kafkas_refusals(response: bytes, message: str) -> None:
    server = PlainServer(USERS)
    with pytest.raises(SaslAuthenticationError, match=message):
        server.evaluate_response(response)
    assert not server.is_complete


def test_users_are_the_jaas_user_options() -> None:
    options = {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret", "user_alice": "a"}
    assert users_from_options(options) == {"admin": "admin-secret", "alice": "a"}
