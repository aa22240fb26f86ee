"""The seam between a connection and its authentication (Kafka's ``Authenticator``).

A connection on a SASL listener owns one ``Authenticator``. Until authentication has
completed every frame goes to it instead of the broker (ApiVersions, SaslHandshake,
SaslAuthenticate and, after a v0 handshake, raw tokens); once it has completed, only
SaslHandshake and SaslAuthenticate do (re-authentication, KIP-368), and the rest reach
the broker as the authenticated principal (``request_context.principal``). It knows no
sockets: the connection feeds it whole frames and writes what it returns, so it is
tested without a network and the same code serves SASL_PLAINTEXT and SASL_SSL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from strom.protocol.primitives import Records


class Authenticator(Protocol):
    @property
    def principal(self) -> str:
        """``User:<name>`` once authenticated (``User:ANONYMOUS`` before)."""
        ...

    @property
    def max_receive_size(self) -> int | None:
        """The largest frame the connection may take now: ``sasl.server.max.receive.size``
        while (re-)authenticating, so an unauthenticated peer cannot make the broker buffer
        ``socket.request.max.bytes``; None once authenticated (the connection's own limit)."""
        ...

    def intercepts(self, frame: bytes) -> bool:
        """True for a frame this authenticator answers instead of the broker.

        May raise ``CloseConnection`` (e.g. a request after the session's lifetime,
        ``connections.max.reauth.ms``, or one that is not allowed before authentication).
        """
        ...

    async def handle(self, frame: bytes) -> list[Records] | None:
        """The response to ``frame`` (None: nothing to send); ``CloseConnection`` to drop
        the connection at once, without an answer."""
        ...

    def close_delay_s(self) -> float | None:
        """After a response has been sent: None to go on, or how long to wait before closing
        the connection (a failed authentication: Kafka answers, then closes after
        ``connection.failed.authentication.delay.ms``)."""
        ...
