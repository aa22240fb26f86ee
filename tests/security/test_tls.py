"""TLS listeners against a real broker process: real clients over SSL, mutual TLS, refused
certificates and the wrong protocol on each port.

One broker for the module, three listeners: PLAINTEXT, SSL with ``ssl.client.auth=requested``
and MTLS (an SSL listener) with ``required``, each with its own ``listener.name.*`` settings.
Certificates come from tests/support/certs.py, made for this run.

With TLS 1.3 the client finishes its side of the handshake before the broker has checked
the client's certificate, so a refused certificate shows on the client's first request,
not on connect: the negative tests send ApiVersions and expect no answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from strom.broker import server as server_module
from strom.broker.broker import Broker
from strom.broker.config import BrokerConfig
from strom.broker.server import SocketServer, TlsConnection
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from strom.protocol.messages.api_versions_response import ApiVersionsResponse
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse
from tests.support.broker_process import BrokerProcess
from tests.support.certs import Certificates, Identity, make_certificates
from tests.support.netproxy import reserved_ports

MESSAGES = 20
TIMEOUT_S = 60.0
# MTLS's principals: CN=Service-One,OU=ServiceUsers,... -> service-one; CN=client,OU=eng,O=strom -> client
MTLS_RULES = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,RULE:^CN=([^,]*),OU=eng,O=strom$/$1/,DEFAULT"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def ports(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    with reserved_ports(3) as (plaintext, requested, required):
        pass
    broker = BrokerProcess(tmp_path_factory.mktemp("tls") / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SSL://127.0.0.1:{requested},MTLS://127.0.0.1:{required}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        **certs.broker_overrides("SSL", client_auth="requested"),
        **certs.broker_overrides("MTLS", client_auth="required"),
        # ACLs make the principal observable: resources without ACLs stay open to the other tests
        "listener.name.mtls.ssl.principal.mapping.rules": MTLS_RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:service-one",
        "allow.everyone.if.no.acl.found": "true",
    }).start()
    try:
        yield {"PLAINTEXT": plaintext, "SSL": requested, "MTLS": required}
    finally:
        assert broker.stop() == 0


def _confluent_round_trip(settings: dict[str, object], topic: str) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    producer = Producer({**settings, "acks": "all"})
    for number in range(MESSAGES):
        producer.produce(topic, f"m{number}".encode())
    assert producer.flush(TIMEOUT_S) == 0
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({**settings, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        while len(values) < MESSAGES:
            message = consumer.poll(TIMEOUT_S)
            assert message is not None, f"no message within {TIMEOUT_S} s after {len(values)}"
            assert message.error() is None, message.error()
            values.append(message.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic, 0)], timeout=TIMEOUT_S)
        assert committed[0].offset == MESSAGES
    finally:
        consumer.close()
    return values


def _kafka_python_round_trip(settings: dict[str, object], topic: str) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**settings, acks="all")
    for number in range(MESSAGES):
        producer.send(topic, f"m{number}".encode())
    producer.flush(TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer(topic, **settings, group_id=f"g-{uuid.uuid4().hex[:8]}",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    values: list[bytes] = []
    try:
        for message in consumer:
            values.append(message.value)
            if len(values) == MESSAGES:
                break
        consumer.commit()
        assert consumer.committed(TopicPartition(topic, 0)) == MESSAGES
    finally:
        consumer.close()
    return values


def _aiokafka_round_trip(settings: dict[str, object], topic: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**settings, acks="all")
        await producer.start()
        try:
            for number in range(MESSAGES):
                await producer.send_and_wait(topic, f"m{number}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **settings, group_id=f"g-{uuid.uuid4().hex[:8]}",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(TIMEOUT_S):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == MESSAGES:
                        break
            await consumer.commit()
            assert await consumer.committed(TopicPartition(topic, 0)) == MESSAGES
        finally:
            await consumer.stop()
        return values

    return asyncio.run(run())


# (client, listener, identity): every client over SSL; each with a certificate on one listener.
CASES = [
    ("confluent", "SSL", None),
    ("confluent", "MTLS", "client"),
    ("kafka-python", "SSL", "service"),
    ("aiokafka", "MTLS", "client"),
]


@pytest.mark.parametrize(("client", "listener", "identity_name"), CASES)
def test_client_produces_consumes_in_a_group_and_commits_over_tls(
        certs: Certificates, ports: dict[str, int], client: str, listener: str, identity_name: str | None) -> None:
    identity: Identity | None = getattr(certs, identity_name) if identity_name else None
    bootstrap = f"localhost:{ports[listener]}"  # the host name is checked against the broker's SAN
    topic = f"tls-{client}-{uuid.uuid4().hex[:8]}"
    expected = [f"m{number}".encode() for number in range(MESSAGES)]
    if client == "confluent":
        values = _confluent_round_trip({"bootstrap.servers": bootstrap, **certs.confluent(identity)}, topic)
    elif client == "kafka-python":
        values = _kafka_python_round_trip({"bootstrap_servers": bootstrap, **certs.kafka_python(identity)}, topic)
    else:
        values = _aiokafka_round_trip({"bootstrap_servers": bootstrap, **certs.aiokafka(identity)}, topic)
    assert values == expected


def _api_versions_frame() -> bytes:
    return encode_request(ApiVersionsRequest(client_software_name="tls-test", client_software_version="1"), 3,
                          correlation_id=7, client_id="tls-test")


def _answer(sock: socket.socket | ssl.SSLSocket) -> bytes | None:
    """The first response frame on ``sock``, or None if the broker closed the connection."""
    decoder = FrameDecoder()
    while True:
        try:
            data = sock.recv(65536)
        except (ssl.SSLError, ConnectionResetError):
            return None
        if not data:
            return None
        frames = list(decoder.feed(data))
        if frames:
            return frames[0]


def _tls_client(certs: Certificates, identity: Identity | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if identity is not None:
        context.load_cert_chain(identity.cert, identity.key)
    return context


def _api_versions_over_tls(certs: Certificates, port: int, identity: Identity | None,
                           frame: bytes | None = None) -> bytes | None:
    """ApiVersions (or ``frame``) on a new TLS connection; the answer, or None if the broker
    refused us (during the handshake or, TLS 1.3, on the first request)."""
    with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT_S) as raw:
        try:
            sock = _tls_client(certs, identity).wrap_socket(raw, server_hostname="localhost")
        except (ssl.SSLError, ConnectionResetError):
            return None
        with sock:
            try:
                sock.sendall(frame or _api_versions_frame())
            except (ssl.SSLError, BrokenPipeError, ConnectionResetError):
                return None
            return _answer(sock)


def _api_versions_ok(frame: bytes | None) -> bool:
    if frame is None:
        return False
    correlation_id, response = decode_response(frame, 18, 3)
    assert isinstance(response, ApiVersionsResponse)
    return correlation_id == 7 and response.error_code == 0 and any(key.api_key == 18 for key in response.api_keys)


@pytest.mark.parametrize("identity_name", ["client", "service"])
def test_required_client_auth_accepts_a_trusted_certificate(
        certs: Certificates, ports: dict[str, int], identity_name: str) -> None:
    assert _api_versions_ok(_api_versions_over_tls(certs, ports["MTLS"], getattr(certs, identity_name)))


@pytest.mark.parametrize("identity_name", ["expired", "foreign", None])
def test_required_client_auth_refuses_the_first_request(
        certs: Certificates, ports: dict[str, int], identity_name: str | None) -> None:
    identity = getattr(certs, identity_name) if identity_name else None
    assert _api_versions_over_tls(certs, ports["MTLS"], identity) is None
    assert _api_versions_ok(_api_versions_over_tls(certs, ports["MTLS"], certs.client))  # the broker serves on


@pytest.mark.parametrize("identity_name", ["expired", "foreign"])
def test_requested_client_auth_refuses_a_bad_certificate_but_takes_none(
        certs: Certificates, ports: dict[str, int], identity_name: str) -> None:
    assert _api_versions_over_tls(certs, ports["SSL"], getattr(certs, identity_name)) is None
    assert _api_versions_ok(_api_versions_over_tls(certs, ports["SSL"], None))


def test_plaintext_client_on_the_tls_port_is_closed(certs: Certificates, ports: dict[str, int]) -> None:
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=TIMEOUT_S) as sock:
        sock.sendall(_api_versions_frame())
        assert _answer(sock) is None
    assert _api_versions_ok(_api_versions_over_tls(certs, ports["SSL"], None))


def test_tls_client_on_the_plaintext_port_fails_cleanly(certs: Certificates, ports: dict[str, int]) -> None:
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=TIMEOUT_S) as raw, \
            pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
        _tls_client(certs, None).wrap_socket(raw, server_hostname="localhost")
    with socket.create_connection(("127.0.0.1", ports["PLAINTEXT"]), timeout=TIMEOUT_S) as sock:
        sock.sendall(_api_versions_frame())
        assert _api_versions_ok(_answer(sock))


def test_a_large_fetch_over_tls_arrives_whole(certs: Certificates, ports: dict[str, int]) -> None:
    """Records well past the TLS write buffer (256 KiB) and one TLS record (16 KiB) each way."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    settings = {"bootstrap.servers": f"localhost:{ports['SSL']}", **certs.confluent(None)}
    topic = f"tls-large-{uuid.uuid4().hex[:8]}"
    payloads = [bytes([number]) * (300_000 + number) for number in range(6)]
    producer = Producer({**settings, "message.max.bytes": 2_000_000, "compression.type": "none"})
    for payload in payloads:
        producer.produce(topic, payload)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer({**settings, "group.id": f"g-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[bytes] = []
    with contextlib.closing(consumer):
        while len(received) < len(payloads):
            message = consumer.poll(TIMEOUT_S)
            assert message is not None and message.error() is None
            received.append(message.value())
    assert received == payloads


def test_the_connection_principal_is_the_mapped_certificate_dn(
        certs: Certificates, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, to read each connection's principal (nothing on the wire shows it before ACLs):
    the mapped DN with a certificate, the DN itself where only DEFAULT applies, ANONYMOUS without.
    Also: a client that opens a connection and never starts its handshake is closed."""
    config = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "1", "log.cleaner.enable": "false",
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", **certs.broker_overrides("SSL", "requested"),
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT"})

    async def principal_of(server: SocketServer, identity: Identity | None) -> str:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", server.ports["SSL"], ssl=_tls_client(certs, identity), server_hostname="localhost")
        try:
            writer.write(_api_versions_frame())
            size = int.from_bytes(await reader.readexactly(4), "big")
            assert _api_versions_ok(await reader.readexactly(size))
            local = writer.get_extra_info("sockname")
            [connection] = [connection for connection in server._connections.values()
                            if isinstance(connection, TlsConnection) and connection.address == local]
            return connection.principal
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError):
                await writer.wait_closed()

    async def silent_client_is_closed(server: SocketServer) -> bool:
        monkeypatch.setattr(server_module, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.ports["SSL"])
        try:
            async with asyncio.timeout(TIMEOUT_S):
                return await reader.read() == b""
        finally:
            writer.close()

    async def scenario() -> list[str]:
        broker = Broker(config)
        broker.startup()
        server = SocketServer(broker)
        await server.start()
        try:
            principals = [await principal_of(server, identity) for identity in (certs.service, certs.client, None)]
            assert await silent_client_is_closed(server)
            return principals
        finally:
            await server.stop()
            await broker.shutdown()

    assert asyncio.run(scenario()) == ["User:service-one", f"User:{certs.client.subject}", "User:ANONYMOUS"]


def test_acls_see_the_principal_the_listener_maps_the_certificate_to(
        certs: Certificates, ports: dict[str, int]) -> None:
    """The same client certificate is User:client on MTLS (a rule maps it) and its whole DN on
    SSL (DEFAULT); without a certificate, User:ANONYMOUS. An ACL for User:client alone tells
    them apart: Metadata on the topic by name answers 0 for it and 29 for the others."""
    from confluent_kafka.admin import (
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": f"localhost:{ports['MTLS']}", **certs.confluent(certs.service)})
    topic = f"guarded-{uuid.uuid4().hex[:8]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)  # User:service-one, a super user
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:client", "*",
                         AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    admin.create_acls([binding])[binding].result(TIMEOUT_S)

    def metadata_error(listener: str, identity: Identity | None) -> int:
        frame = encode_request(MetadataRequest(topics=(MetadataRequestTopic(name=topic),),
                                               allow_auto_topic_creation=False), 12, 9, "tls-test")
        answer = _api_versions_over_tls(certs, ports[listener], identity, frame)
        assert answer is not None
        _, response = decode_response(answer, 3, 12)
        assert isinstance(response, MetadataResponse)
        return response.topics[0].error_code

    assert metadata_error("MTLS", certs.client) == 0  # User:client
    assert metadata_error("SSL", certs.client) == 29  # User:CN=client,OU=eng,O=strom: TOPIC_AUTHORIZATION_FAILED
    assert metadata_error("SSL", None) == 29  # User:ANONYMOUS
    assert metadata_error("MTLS", certs.service) == 0  # the super user


def test_the_broker_closes_a_tls_connection_with_close_notify(certs: Certificates, ports: dict[str, int]) -> None:
    """A frame Kafka would drop the connection for (a negative size): the broker says TLS's
    close_notify before closing, so the client reads a clean end, not a truncated stream."""
    with socket.create_connection(("127.0.0.1", ports["SSL"]), timeout=TIMEOUT_S) as raw, \
            _tls_client(certs, None).wrap_socket(raw, server_hostname="localhost",
                                                 suppress_ragged_eofs=False) as sock:
        sock.sendall(b"\xff\xff\xff\xff")
        assert sock.recv(1024) == b""  # a ragged end would raise SSLEOFError here
    assert _api_versions_ok(_api_versions_over_tls(certs, ports["SSL"], None))
