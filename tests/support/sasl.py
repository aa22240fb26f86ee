"""SASL for the security tests: a broker with a PLAINTEXT listener (set-up) and a SASL_PLAINTEXT
one, its users, each client's settings for a mechanism, and a raw SASL connection speaking
through the generated codec (for what no client would send).

The broker's PLAIN users come from its JAAS config (``USERS``); SCRAM users are made the
Java-less way, with AlterUserScramCredentials (KIP-554) on the PLAINTEXT listener
(``create_scram_user``), as a first user must be made before any SASL client can connect.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.message import Message
from strom.protocol.messages.alter_user_scram_credentials_request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from strom.protocol.messages.alter_user_scram_credentials_response import (
    AlterUserScramCredentialsResponse,
)
from strom.security.sasl.scram import MECHANISMS
from tests.support.broker_process import BrokerProcess
from tests.support.certs import Certificates
from tests.support.netproxy import reserved_ports

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
MECHANISM_LIST = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


def plain_jaas(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="{users["admin"]}" {entries};')


def sasl_overrides(listener: str = "sasl_plaintext", mechanisms: str = MECHANISM_LIST) -> dict[str, str]:
    return {
        "sasl.enabled.mechanisms": mechanisms,
        f"listener.name.{listener}.plain.sasl.jaas.config": plain_jaas(USERS),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    }


class SaslBroker:
    """A broker process with ``PLAINTEXT`` (``bootstrap``), ``SASL_PLAINTEXT`` (``sasl_bootstrap``)
    and, given certificates, ``SASL_SSL`` (``sasl_ssl_bootstrap``)."""

    def __init__(self, data_dir: Path, overrides: dict[str, str], certs: Certificates | None = None) -> None:
        with reserved_ports(3) as (plain_port, sasl_port, sasl_ssl_port):
            pass
        listeners = f"PLAINTEXT://127.0.0.1:{plain_port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}"
        if certs is not None:
            listeners += f",SASL_SSL://127.0.0.1:{sasl_ssl_port}"
            overrides = overrides | certs.broker_overrides("SASL_SSL") | {
                "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas(USERS)}
        self.process = BrokerProcess(data_dir, overrides)
        self.process.fixed_listeners = listeners
        self.certs = certs
        self.bootstrap = f"127.0.0.1:{plain_port}"
        self.sasl_bootstrap = f"127.0.0.1:{sasl_port}"
        self.sasl_ssl_bootstrap = f"127.0.0.1:{sasl_ssl_port}"

    def __enter__(self) -> SaslBroker:
        self.process.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.process.stop()

    def log_text(self) -> str:
        return self.process.log_path.read_text()


# -- SCRAM users -------------------------------------------------------------------------------
def create_scram_user(broker: SaslBroker, user: str, password: str, mechanism: str,
                      iterations: int = 4096) -> AlterUserScramCredentialsResponse:
    """AlterUserScramCredentials on the PLAINTEXT listener, salted as a client does (KIP-554)."""
    scram = MECHANISMS[mechanism]
    salt = os.urandom(24)
    upsertion = ScramCredentialUpsertion(user, scram.kip554_type, iterations, salt,
                                         scram.salted_password(password.encode(), salt, iterations))
    response = plain_request(broker, AlterUserScramCredentialsRequest(upsertions=(upsertion,)), 0)
    assert isinstance(response, AlterUserScramCredentialsResponse)
    return response


def plain_request(broker: SaslBroker, body: Message, version: int) -> Message:
    with RawConnection(broker.bootstrap) as connection:
        return connection.request(body, version)


# -- a raw connection --------------------------------------------------------------------------
class RawConnection:
    """One TCP connection sending requests through the codec; knows when the broker hung up."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.decoder = FrameDecoder()
        self.frames: list[bytes] = []
        self.correlation_id = 0

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()

    def send(self, body: Message, version: int) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(body, version, self.correlation_id, "strom-sasl-tests"))
        return self.correlation_id

    def send_raw_frame(self, payload: bytes) -> None:
        self.sock.sendall(len(payload).to_bytes(4, "big") + payload)

    def receive_frame(self) -> bytes | None:
        """The next whole frame, or None when the broker closed the connection."""
        while not self.frames:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.frames.extend(bytes(frame) for frame in self.decoder.feed(data))
        return self.frames.pop(0)

    def request(self, body: Message, version: int) -> Message:
        correlation_id = self.send(body, version)
        frame = self.receive_frame()
        assert frame is not None, f"the broker closed the connection instead of answering {type(body).__name__}"
        answered, response = decode_response(frame, body.API_KEY or 0, version)
        assert answered == correlation_id
        return response

    def closed(self) -> bool:
        """True once the broker has closed the connection (waits for it, up to the socket timeout)."""
        return self.receive_frame() is None


# -- OAUTHBEARER ---------------------------------------------------------------------------------
def unsecured_jwt(claims: dict[str, Any]) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


def oauth_initial_response(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def token_claims(sub: str | None, lifetime_s: float = 3600) -> dict[str, Any]:
    now = time.time()
    claims: dict[str, Any] = {"iat": now, "exp": now + lifetime_s}
    if sub is not None:
        claims["sub"] = sub
    return claims


def unsecured_token_provider(user: str, client: str) -> object:
    """kafka-python's (``token()``) or aiokafka's (``async token()``) OAUTHBEARER token provider."""
    if client == "aiokafka":
        from aiokafka.abc import AbstractTokenProvider as AsyncProvider

        class AsyncUnsecured(AsyncProvider):
            async def token(self) -> str:
                return unsecured_jwt(token_claims(user))

        return AsyncUnsecured()
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Unsecured(AbstractTokenProvider):  # type: ignore[misc]
        def token(self) -> str:
            return unsecured_jwt(token_claims(user))

    return Unsecured()


# -- each client's settings ----------------------------------------------------------------------
def confluent_settings(broker: SaslBroker, mechanism: str, user: str, password: str,
                       protocol: str = "SASL_PLAINTEXT") -> dict[str, Any]:
    settings: dict[str, Any] = {"bootstrap.servers": broker.sasl_bootstrap, "security.protocol": protocol,
                                "sasl.mechanism": mechanism}
    if protocol == "SASL_SSL":
        assert broker.certs is not None
        settings |= {"bootstrap.servers": broker.sasl_ssl_bootstrap, "ssl.ca.location": str(broker.certs.ca)}
    if mechanism == "OAUTHBEARER":
        settings |= {"enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": f"principal={user} lifeSeconds=600"}
    else:
        settings |= {"sasl.username": user, "sasl.password": password}
    return settings


def python_client_settings(broker: SaslBroker, mechanism: str, user: str, password: str,
                           protocol: str = "SASL_PLAINTEXT", client: str = "kafka-python") -> dict[str, Any]:
    """kafka-python's and aiokafka's names (they share them, but for the TLS material)."""
    settings: dict[str, Any] = {"bootstrap_servers": broker.sasl_bootstrap, "security_protocol": protocol,
                                "sasl_mechanism": mechanism, "sasl_plain_username": user,
                                "sasl_plain_password": password}
    if mechanism == "OAUTHBEARER":  # an unsecured JWT for ``user``, from each client's provider interface
        settings["sasl_oauth_token_provider"] = unsecured_token_provider(user, client)
    if protocol == "SASL_SSL":
        assert broker.certs is not None
        tls = broker.certs.kafka_python() if client == "kafka-python" else broker.certs.aiokafka()
        settings |= {key: value for key, value in tls.items() if key != "security_protocol"}
        settings["bootstrap_servers"] = broker.sasl_ssl_bootstrap
    return settings


@contextmanager
def sasl_broker(data_dir: Path, extra: dict[str, str] | None = None,
                certs: Certificates | None = None) -> Iterator[SaslBroker]:
    with SaslBroker(data_dir, sasl_overrides() | (extra or {}), certs) as broker:
        yield broker


# -- a raw SCRAM client (RFC 5802) -----------------------------------------------------------------
def scram_authenticate(connection: RawConnection, mechanism: str, user: str, password: str) -> Message:
    """SaslHandshake v1 and the SCRAM exchange in SaslAuthenticate v2; the last response (an error
    one if the broker refused), after checking the server's signature when it accepted."""
    import hmac

    from strom.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
    from strom.protocol.messages.sasl_handshake_request import SaslHandshakeRequest

    scram = MECHANISMS[mechanism]
    handshake = connection.request(SaslHandshakeRequest(mechanism), 1)
    assert handshake.error_code == 0  # type: ignore[attr-defined]
    bare = f"n={user.replace('=', '=3D').replace(',', '=2C')},r={base64.b64encode(os.urandom(18)).decode()}"
    first = connection.request(SaslAuthenticateRequest(f"n,,{bare}".encode()), 2)
    if first.error_code:  # type: ignore[attr-defined]
        return first
    server_first = first.auth_bytes.decode()  # type: ignore[attr-defined]
    fields = dict(part.split("=", 1) for part in server_first.split(","))
    salted = scram.salted_password(password.encode(), base64.b64decode(fields["s"]), int(fields["i"]))
    client_key = scram.hmac(salted, b"Client Key")
    without_proof = f"c=biws,r={fields['r']}"
    auth_message = f"{bare},{server_first},{without_proof}".encode()
    proof = bytes(a ^ b for a, b in zip(client_key, scram.hmac(scram.hash(client_key), auth_message), strict=True))
    final = connection.request(
        SaslAuthenticateRequest(f"{without_proof},p={base64.b64encode(proof).decode()}".encode()), 2)
    if final.error_code == 0:  # type: ignore[attr-defined]
        expected = hmac.new(scram.hmac(salted, b"Server Key"), auth_message, scram.hash_name).digest()
        assert final.auth_bytes == b"v=" + base64.b64encode(expected)  # type: ignore[attr-defined]
    return final
