"""Kafka's ``SaslServerAuthenticator``: one connection's SASL state machine, sans-IO.

The connection (``strom.broker.server``) hands it every frame until the client is
authenticated, and after that the SaslHandshake and SaslAuthenticate frames of a
re-authentication (KIP-368); it answers with whole response buffers. States, as Kafka's::

    HANDSHAKE_OR_VERSIONS --ApiVersions (answered by the broker)--> HANDSHAKE_OR_VERSIONS
    HANDSHAKE_OR_VERSIONS --SaslHandshake, mechanism enabled--> AUTHENTICATE
    AUTHENTICATE --tokens (v0: raw frames; v1: SaslAuthenticate)--> ... --> COMPLETE
    COMPLETE --SaslHandshake (same mechanism)--> AUTHENTICATE (re-authentication)
    any --failure--> FAILED (answered; the connection closes after the failure delay)

Before authentication, any other request closes the connection unanswered, and so does a
frame larger than ``sasl.server.max.receive.size``; SaslAuthenticate
without a handshake and a request other than SaslAuthenticate during a v1 exchange get
``ILLEGAL_SASL_STATE`` (34) and the close. An unknown mechanism gets
``UNSUPPORTED_SASL_MECHANISM`` (33) with the enabled list; a failed exchange
``SASL_AUTHENTICATION_FAILED`` (58), with the mechanism's message when it is meant for the
client and otherwise Kafka's generic one (the same for an unknown user and a wrong password).

KIP-368: a completed SaslAuthenticate v1+ carries ``session_lifetime_ms``, the smaller of
``connections.max.reauth.ms`` and the credential's remaining life (0: no limit). Past it, a
request other than SaslHandshake/SaslAuthenticate closes the connection. Re-authenticating
must keep the mechanism and the principal (else 58); until it completes the connection acts
as the principal it had.
"""

from __future__ import annotations

import logging
import time
from enum import Enum
from typing import TYPE_CHECKING, Final

from strom.broker.connection_errors import CloseConnection
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import ProtocolError
from strom.protocol.framing import size_prefix
from strom.protocol.headers import Request, decode_request, encode_response, peek_request
from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from strom.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse
from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from strom.protocol.messages.sasl_handshake_response import SaslHandshakeResponse
from strom.security.sasl import oauthbearer, plain, scram
from strom.security.sasl.listener_config import SaslListenerConfig
from strom.security.sasl.mechanism import SaslAuthenticationError, SaslError, SaslServer

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from strom.broker.broker import Broker
    from strom.protocol.primitives import Records
    from strom.security.sasl.credential_store import ScramCredentialStore

logger = logging.getLogger(__name__)

API_VERSIONS: Final = 18
SASL_HANDSHAKE: Final = SaslHandshakeRequest.API_KEY
SASL_AUTHENTICATE: Final = SaslAuthenticateRequest.API_KEY
ANONYMOUS: Final = "User:ANONYMOUS"


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS = 1
    AUTHENTICATE = 2
    COMPLETE = 3
    FAILED = 4


class SaslServerAuthenticator:
    """Implements ``strom.security.authenticator.Authenticator`` for one connection."""

    def __init__(self, config: SaslListenerConfig, credentials: ScramCredentialStore,
                 broker_handle: Callable[[bytes], Awaitable[list[Records] | None]],
                 client_host: str = "", clock: Callable[[], float] = time.monotonic,
                 wall_clock_ms: Callable[[], float] = lambda: time.time() * 1000) -> None:
        self.config = config
        self.credentials = credentials
        self._broker_handle = broker_handle
        self.client_host = client_host
        self._clock = clock
        self._wall_clock_ms = wall_clock_ms
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self._principal = ANONYMOUS
        self._server: SaslServer | None = None
        self._mechanism = ""  # the mechanism authenticated with (kept across re-authentications)
        self._handshake_version = 1
        self._reauthenticating = False
        self._mechanism_refused = ""  # a re-authentication's other mechanism, refused at its token
        self._failed = False
        self.session_expiration: float | None = None  # monotonic seconds

    # -- the Authenticator seam ------------------------------------------------------------
    @property
    def principal(self) -> str:
        return self._principal

    @property
    def max_receive_size(self) -> int | None:
        return None if self.state is SaslState.COMPLETE else self.config.max_receive_size

    def intercepts(self, frame: bytes) -> bool:
        if self.state is not SaslState.COMPLETE:
            if len(frame) > self.config.max_receive_size:  # Kafka's InvalidReceiveException
                raise CloseConnection(f"a {len(frame)}-byte frame before authentication is larger than "
                                      f"sasl.server.max.receive.size ({self.config.max_receive_size})")
            return True
        try:
            api_key = peek_request(frame)[0]
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request: {exc}") from None
        if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return True
        if self.session_expiration is not None and self._clock() > self.session_expiration:
            raise CloseConnection(f"the SASL session of {self._principal} expired "
                                  "(connections.max.reauth.ms) and was not re-authenticated")
        return False

    async def handle(self, frame: bytes) -> list[Records] | None:
        if self.state is SaslState.AUTHENTICATE and self._handshake_version == 0:
            return self._raw_token(frame)
        if self.state is SaslState.HANDSHAKE_OR_VERSIONS and self._is_api_versions(frame):
            # Any version, even one newer than ours: the broker answers it with its own
            # versions (KIP-511), as Kafka's SaslServerAuthenticator does (franz-go sends v5).
            return await self._broker_handle(frame)
        try:
            request = decode_request(frame)
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request during SASL authentication: {exc}") from None
        api_key = request.api_key
        if self.state in (SaslState.HANDSHAKE_OR_VERSIONS, SaslState.COMPLETE):
            if api_key == API_VERSIONS and self.state is SaslState.HANDSHAKE_OR_VERSIONS:
                return await self._broker_handle(frame)
            if api_key == SASL_HANDSHAKE:
                return self._handshake(request)
            if api_key == SASL_AUTHENTICATE:
                return self._fail(request, SaslAuthenticateResponse(
                    error_code=ErrorCode.ILLEGAL_SASL_STATE,
                    error_message="Unexpected SaslAuthenticate request without a SaslHandshake"))
            raise CloseConnection(f"Unexpected Kafka request of type {request.api.name} during SASL handshake")
        if self.state is SaslState.AUTHENTICATE:
            if api_key == SASL_AUTHENTICATE:
                return self._authenticate(request)
            if api_key == SASL_HANDSHAKE:
                return self._fail(request, SaslHandshakeResponse(ErrorCode.ILLEGAL_SASL_STATE,
                                                                 self.config.enabled_mechanisms))
            raise CloseConnection(f"Unexpected Kafka request of type {request.api.name} during SASL authentication")
        raise CloseConnection("SASL authentication failed")

    @staticmethod
    def _is_api_versions(frame: bytes) -> bool:
        try:
            return peek_request(frame)[0] == API_VERSIONS
        except ProtocolError as exc:
            raise CloseConnection(f"malformed request during SASL authentication: {exc}") from None

    def close_delay_s(self) -> float | None:
        return self.config.failed_authentication_delay_ms / 1000 if self._failed else None

    # -- the steps ------------------------------------------------------------------------
    def _handshake(self, request: Request) -> list[Records]:
        body = request.body
        assert isinstance(body, SaslHandshakeRequest)
        mechanism = body.mechanism
        enabled = self.config.enabled_mechanisms
        if mechanism not in enabled:
            logger.info("SASL mechanism %r requested by client %s is not enabled", mechanism, self.client_host)
            return self._fail(request, SaslHandshakeResponse(ErrorCode.UNSUPPORTED_SASL_MECHANISM, enabled))
        self._reauthenticating = self.state is SaslState.COMPLETE
        self._mechanism_refused = mechanism if self._reauthenticating and mechanism != self._mechanism else ""
        self._handshake_version = request.api_version
        self._server = self._new_server(mechanism)
        if not self._reauthenticating:
            self._mechanism = mechanism
        self.state = SaslState.AUTHENTICATE
        return encode_response(SaslHandshakeResponse(ErrorCode.NONE, enabled), request.api_version,
                               request.correlation_id)

    def _new_server(self, mechanism: str) -> SaslServer:
        if mechanism == plain.MECHANISM:
            return plain.PlainServer(self.config.plain_users)
        if mechanism in scram.MECHANISMS:
            return scram.ScramServer(scram.MECHANISMS[mechanism], self.credentials.get)
        assert mechanism == oauthbearer.MECHANISM
        return oauthbearer.OAuthBearerServer(self.config.oauthbearer_validator)

    def _authenticate(self, request: Request) -> list[Records]:
        body = request.body
        assert isinstance(body, SaslAuthenticateRequest)
        try:
            challenge = self._evaluate(body.auth_bytes)
        except SaslError as exc:
            return self._fail(request, SaslAuthenticateResponse(
                error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=self._client_message(exc)))
        lifetime_ms = self._session_lifetime_ms() if self.state is SaslState.COMPLETE else 0
        return encode_response(SaslAuthenticateResponse(error_code=ErrorCode.NONE, error_message=None,
                                                        auth_bytes=challenge, session_lifetime_ms=lifetime_ms),
                               request.api_version, request.correlation_id)

    def _raw_token(self, frame: bytes) -> list[Records] | None:
        """After a v0 handshake: the token is the whole frame, the challenge a bare frame."""
        try:
            challenge = self._evaluate(bytes(frame))
        except SaslError as exc:
            self._client_message(exc)  # logged; v0 has no way to say why: the connection closes
            self.state, self._failed = SaslState.FAILED, True
            return None
        if self.state is SaslState.COMPLETE:
            self._session_lifetime_ms()
        return [size_prefix(len(challenge)), challenge]

    def _evaluate(self, token: bytes) -> bytes:
        server = self._server
        assert server is not None
        if self._mechanism_refused:
            raise SaslAuthenticationError(
                f"SASL mechanism '{self._mechanism_refused}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._mechanism}'")
        challenge = server.evaluate_response(token)
        if server.is_complete:
            principal = f"User:{server.authorization_id}"
            if self._reauthenticating and principal != self._principal:
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {self._principal}: {principal}")
            if self._reauthenticating:
                logger.info("%s re-authenticated with %s from %s", principal, server.mechanism, self.client_host)
            self._principal = principal
            self.state = SaslState.COMPLETE
        return challenge

    def _session_lifetime_ms(self) -> int:
        """Kafka's ``calcCompletionTimesAndReturnSessionLifetimeMs``: 0 when unlimited."""
        server = self._server
        assert server is not None
        limits: list[float] = []
        max_reauth_ms = self.config.max_reauth_ms.get(server.mechanism, 0)
        if max_reauth_ms > 0:
            limits.append(max_reauth_ms)
        expiration_ms = server.credential_expiration_ms()
        if expiration_ms is not None:
            limits.append(max(expiration_ms - self._wall_clock_ms(), 0))
        if not limits:
            self.session_expiration = None
            return 0
        lifetime_ms = int(min(limits))
        self.session_expiration = self._clock() + lifetime_ms / 1000
        return max(lifetime_ms, 1)

    def _client_message(self, exc: SaslError) -> str:
        mechanism = self._server.mechanism if self._server is not None else self._mechanism
        what = "re-authentication" if self._reauthenticating else "authentication"
        logger.info("SASL %s with %s from %s failed: %s", what, mechanism, self.client_host, exc)
        if isinstance(exc, SaslAuthenticationError):
            return str(exc)
        return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"

    def _fail(self, request: Request, response: SaslHandshakeResponse | SaslAuthenticateResponse) -> list[Records]:
        """Answer, then close after ``connection.failed.authentication.delay.ms``."""
        self.state, self._failed = SaslState.FAILED, True
        return encode_response(response, request.api_version, request.correlation_id)


class SaslAuthenticators:
    """The broker's SASL side: each SASL listener's settings and the SCRAM credentials."""

    def __init__(self, configs: dict[str, SaslListenerConfig], credentials: ScramCredentialStore,
                 first_listener: str, broker_handle: Callable[[bytes], Awaitable[list[Records] | None]]) -> None:
        self.configs = configs
        self.credentials = credentials
        self._first_listener = first_listener
        self._broker_handle = broker_handle

    def start(self, broker: Broker) -> None:
        """A cluster's broker keeps SCRAM credentials in ZooKeeper (``zk_credentials``): read them
        once its cluster side is connected. A single node's were read from its data dir."""
        if broker.cluster is None:
            return
        from strom.security.sasl.zk_credentials import ZkScramCredentialStore

        zk = broker.cluster.zk
        if not zk.connected:  # a cluster broker started without its cluster side (handler tests)
            logger.warning("SCRAM credentials not read: not connected to ZooKeeper")
            return
        store = ZkScramCredentialStore(zk)
        store.start()
        self.credentials = store

    def new_authenticator(self, listener: str, client_host: str) -> SaslServerAuthenticator | None:
        config = self.configs.get(listener or self._first_listener)
        if config is None:
            return None
        return SaslServerAuthenticator(config, self.credentials, self._broker_handle, client_host)

    @classmethod
    def for_broker(cls, broker: Broker) -> SaslAuthenticators:
        """The SASL listeners of ``broker``'s config; SCRAM credentials loaded from its data dir."""
        from strom.security.sasl.credential_store import ScramCredentialStore
        from strom.security.sasl.listener_config import sasl_listener_configs

        credentials = ScramCredentialStore(broker.config.data_dir)
        credentials.load()
        return cls(sasl_listener_configs(broker.config), credentials, broker.listener_settings.listeners[0].name,
                   broker.handle)
