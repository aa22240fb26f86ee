"""Listeners as Kafka configures them (strom.broker.listeners through BrokerConfig): what is
accepted, what each mistake says, and a broker binding every listener and answering each
client with the endpoint of the listener it connected through."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from strom.broker.broker import Broker, Endpoint
from strom.broker.config import BrokerConfig, ConfigError
from strom.broker.listeners import Listener
from strom.broker.server import SocketServer
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from strom.protocol.messages.find_coordinator_response import FindCoordinatorResponse
from strom.protocol.messages.metadata_request import MetadataRequest
from strom.protocol.messages.metadata_response import MetadataResponse

TWO = {
    "listeners": "CLIENT://127.0.0.1:9092,replication://[::1]:9093",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "replication",
}


def test_the_default_is_one_plaintext_listener_which_is_also_the_inter_broker_one() -> None:
    settings = BrokerConfig.from_properties({}).listener_settings()
    assert settings.listeners == (Listener("PLAINTEXT", "127.0.0.1", 9092, "PLAINTEXT"),)
    assert settings.advertised == settings.listeners
    assert settings.inter_broker_listener == "PLAINTEXT"


def test_several_listeners_names_upper_cased_ipv6_in_brackets() -> None:
    settings = BrokerConfig.from_properties(TWO).listener_settings()
    assert settings.listeners == (Listener("CLIENT", "127.0.0.1", 9092, "PLAINTEXT"),
                                  Listener("REPLICATION", "::1", 9093, "PLAINTEXT"))
    assert settings.inter_broker_listener == "REPLICATION"


def test_advertised_listeners_may_be_fewer_and_share_ports() -> None:
    settings = BrokerConfig.from_properties({
        **TWO, "advertised.listeners": "REPLICATION://10.0.0.1:7000,CLIENT://10.0.0.1:7000"}).listener_settings()
    assert [(a.name, a.host, a.port) for a in settings.advertised] == [
        ("REPLICATION", "10.0.0.1", 7000), ("CLIENT", "10.0.0.1", 7000)]
    only_one = BrokerConfig.from_properties({**TWO, "advertised.listeners": "REPLICATION://h:1"}).listener_settings()
    assert [a.name for a in only_one.advertised] == ["REPLICATION"]


@pytest.mark.parametrize("listeners", [
    "A://127.0.0.1:0,B://127.0.0.1:0",  # ephemeral ports never collide
    "A://127.0.0.1:9092,B://[::1]:9092",  # one IPv4 and one IPv6 address may share a port
    "A://:9092,B://:9093",  # an empty host: every interface
])
def test_ports_kafka_accepts(listeners: str) -> None:
    BrokerConfig.from_properties({"listeners": listeners, "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT",
                                  "inter.broker.listener.name": "A"})


@pytest.mark.parametrize(("properties", "message"), [
    ({"listeners": "PLAINTEXT://127.0.0.1:1,OTHER://127.0.0.1:2"},
     "no security protocol defined for listener OTHER (add it to listener.security.protocol.map)"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,plaintext://127.0.0.1:2"}, "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://localhost:1"}, "each listener must have a different port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SASL_PLAINTEXT://127.0.0.2:1"}, "each listener must have a different port"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "cannot parse 'PLAINTEXT://127.0.0.1' as NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:70000"}, "port 70000 is not 0..65535"),
    ({"listeners": " , "}, "listeners is empty"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2"},
     "listener SSL: ssl.keystore.location: a TLS listener needs a certificate"),
    ({"listeners": "PLAINTEXT://127.0.0.1:1,INTERNAL://127.0.0.1:2",
      "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT"},
     "listener INTERNAL enables SASL mechanism GSSAPI (Kerberos; Kafka's default for sasl.enabled.mechanisms), "
     "which Strom does not support"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "'PLAINTEXT:TLS' is not NAME:PROTOCOL with PROTOCOL one of"),
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,plaintext:SSL"}, "PLAINTEXT is mapped twice"),
    ({"advertised.listeners": "OTHER://h:1", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT"},
     "advertised.listeners names OTHER, which is not in listeners (the valid options are PLAINTEXT)"),
    ({"advertised.listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, "each listener must have a different name"),
    ({"listeners": "PLAINTEXT://0.0.0.0:9092"}, "advertised.listeners cannot use the nonroutable meta-address 0.0.0.0"),
    ({"listeners": "CLIENT://127.0.0.1:1", "listener.security.protocol.map": "CLIENT:PLAINTEXT"},
     "inter.broker.listener.name is not set and no listener is named PLAINTEXT (the default, after "
     "security.inter.broker.protocol): set inter.broker.listener.name to one of CLIENT"),
    ({**TWO, "inter.broker.listener.name": "OTHER"},
     "inter.broker.listener.name OTHER must be a listener name defined in advertised.listeners "
     "(the valid options are CLIENT,REPLICATION)"),
    ({**TWO, "advertised.listeners": "CLIENT://h:1"},
     "inter.broker.listener.name REPLICATION must be a listener name defined in advertised.listeners"),
])
def test_each_mistake_is_one_line_naming_the_rule(properties: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.from_properties(properties)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_strom_serve_refuses_a_bad_listener_with_one_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "strom", "serve", "--data-dir", str(tmp_path / "data"),
               "--listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0", "--log-level", "error"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [
        "strom serve: listener SSL: ssl.keystore.location: a TLS listener needs a certificate: set "
        "ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key"]


def _ask(port: int, body: MetadataRequest | FindCoordinatorRequest, version: int) -> object:
    """One request on a new connection to 127.0.0.1:``port`` (a blocking client, run in a thread)."""
    frame = encode_request(body, version, correlation_id=1, client_id="listeners-test")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(frame)
        decoder = FrameDecoder()
        while True:
            data = sock.recv(65536)
            assert data, "the broker closed the connection"
            frames = decoder.feed(data)
            if frames:
                assert body.API_KEY is not None
                return decode_response(frames[0], body.API_KEY, version)[1]


def test_a_broker_binds_every_listener_and_answers_with_the_one_asked_through(tmp_path: Path) -> None:
    config = BrokerConfig.from_properties({
        "log.dirs": str(tmp_path / "data"), "offsets.topic.num.partitions": "1", "log.cleaner.enable": "false",
        "listeners": "CLIENT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,OTHER://127.0.0.1:0",
        "advertised.listeners": "CLIENT://127.0.0.1:0,PLAINTEXT://broker-1.example:7001,OTHER://:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT",
    })

    async def scenario() -> None:
        broker = Broker(config)
        broker.startup()
        server = SocketServer(broker)
        await server.start()
        try:
            ports = server.ports
            assert len(set(ports.values())) == 3 and 0 not in ports.values()
            assert broker.inter_broker_listener == "PLAINTEXT"
            assert broker.advertised_endpoints == {  # port 0: the bound port; no host: this machine's name
                "CLIENT": Endpoint("127.0.0.1", ports["CLIENT"]), "PLAINTEXT": Endpoint("broker-1.example", 7001),
                "OTHER": Endpoint(socket.getfqdn(), ports["OTHER"])}
            assert broker.advertised == broker.advertised_endpoints["CLIENT"]
            for name, expected in (("CLIENT", ("127.0.0.1", ports["CLIENT"])), ("PLAINTEXT", ("broker-1.example", 7001))):
                metadata = await asyncio.to_thread(_ask, ports[name], MetadataRequest(topics=None), 12)
                assert isinstance(metadata, MetadataResponse)
                assert [(b.node_id, b.host, b.port) for b in metadata.brokers] == [(1, *expected)]
                found = await asyncio.to_thread(_ask, ports[name], FindCoordinatorRequest(key="g"), 3)
                assert isinstance(found, FindCoordinatorResponse)
                assert (found.error_code, found.host, found.port) == (0, *expected)
        finally:
            await server.stop()
            await broker.shutdown()

    asyncio.run(scenario())
