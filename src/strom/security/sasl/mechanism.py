"""What every SASL mechanism's server side is (Java's ``javax.security.sasl.SaslServer``), and
the two ways it fails.

A mechanism server is sans-IO: ``evaluate_response`` takes the client's token and returns
the challenge to send back; ``is_complete`` turns true once the client is authenticated,
and ``authorization_id`` is then the name the principal is built from (``User:<id>``).
Kafka tells two failures apart: ``SaslAuthenticationError`` carries a message meant for the
client (``SaslAuthenticationException``); ``SaslError`` is any other failure, whose message
is logged but never sent, the client being told only that its credentials were invalid, so
an unknown user and a wrong password look the same (``SaslException``).
"""

from __future__ import annotations

from typing import Protocol


class SaslError(Exception):
    """A failed exchange whose detail stays in the broker (the client gets a generic message)."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message is sent to the client as it is."""


class SaslServer(Protocol):
    @property
    def mechanism(self) -> str: ...

    @property
    def is_complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated name; valid once ``is_complete``."""
        ...

    def evaluate_response(self, response: bytes) -> bytes:
        """The challenge answering the client's ``response``; ``SaslError`` on failure."""
        ...

    def credential_expiration_ms(self) -> int | None:
        """When the credential used expires (epoch ms; a token's ``exp``), None if never."""
        ...
