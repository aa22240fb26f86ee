"""SASL/PLAIN's server side (RFC 4616), as Kafka's ``PlainSaslServer``.

The client sends one message, ``authzid NUL authcid NUL passwd`` (UTF-8), and the exchange is
over. The users are the JAAS entry's ``user_<name>="<password>"`` options. Kafka's checks and
messages, all sent to the client: exactly three fields; a non-empty user name and password;
the password the user's (an unknown user gets the same message as a wrong password); an
authorization id, if given, equal to the user name.
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final

from strom.security.sasl.mechanism import SaslAuthenticationError

MECHANISM: Final = "PLAIN"
LOGIN_MODULE: Final = "org.apache.kafka.common.security.plain.PlainLoginModule"
USER_PREFIX: Final = "user_"
INVALID_CREDENTIALS: Final = "Authentication failed: Invalid username or password"


def users_from_options(options: Mapping[str, str]) -> dict[str, str]:
    """``user_<name>=<password>`` JAAS options as {name: password}."""
    return {key[len(USER_PREFIX):]: value for key, value in options.items() if key.startswith(USER_PREFIX)}


class PlainServer:
    mechanism = MECHANISM

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id = ""
        self._complete = False

    @property
    def is_complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        return self._authorization_id

    def credential_expiration_ms(self) -> int | None:
        return None

    def evaluate_response(self, response: bytes) -> bytes:
        if self._complete:
            raise SaslAuthenticationError("PLAIN authentication already complete")
        fields = response.decode("utf-8", errors="replace").split("\0")
        if len(fields) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
        authorization_id, username, password = fields
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Compared even for an unknown user, so the answer takes as long either way.
        matches = hmac.compare_digest((expected or "\0" + password).encode(), password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationError(INVALID_CREDENTIALS)
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        self._complete = True
        return b""
