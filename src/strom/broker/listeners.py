"""Listeners as Kafka configures them: ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map`` and ``inter.broker.listener.name``.

A listener is a name, a bind address and a security protocol (``CLIENT://127.0.0.1:9092``
with ``CLIENT:PLAINTEXT`` in the map). A broker binds one socket per listener and tells
every client the endpoints of the listener that client connected through, so one broker
can be reached at different addresses by different networks (clients, other brokers, or
in the tests a TCP proxy per broker pair). Kafka's rules (``EndpointUtils``,
``KafkaConfig.validateValues``), checked once at start, each broken one a one-line
``ListenerConfigError``:

- an entry is ``NAME://host:port`` (``[v6]`` in brackets; an empty host binds every
  interface); names are case-insensitive (upper-cased) and each must be in the protocol map;
- listener names are distinct, and so are their ports (0, an ephemeral port, excepted;
  one IPv4 and one IPv6 address may share a port); advertised listeners may share ports;
- advertised names are a subset of the listeners' (default: the listeners themselves);
  0.0.0.0 is never advertised (a client cannot connect to it); an empty host is advertised
  as this machine's name, a port of 0 as the port the same-named listener bound;
- the inter-broker listener is ``inter.broker.listener.name``, or where unset the one named
  after ``security.inter.broker.protocol``'s default, PLAINTEXT; it must be advertised.

A listener mapped to a protocol not in ``SERVED_PROTOCOLS`` is refused (issue 20); SSL
listeners run over TLS (``TLS_PROTOCOLS``, ``strom.security.tls``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SERVED_PROTOCOLS: Final = frozenset({"PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"})  # SASL_*: strom.security.sasl
# The protocols whose connections run over TLS (strom.security.tls, the server's TlsConnection):
# SASL_SSL is wrapped as soon as it is in SERVED_PROTOCOLS.
TLS_PROTOCOLS: Final = frozenset({"SSL", "SASL_SSL"})
DEFAULT_INTER_BROKER_LISTENER: Final = "PLAINTEXT"  # security.inter.broker.protocol's default
_ENTRY: Final = re.compile(r"^(.*)://\[?([0-9a-zA-Z\-%._:]*)\]?:(-?[0-9]+)$")


class ListenerConfigError(ValueError):
    """A listener setting the broker cannot start with; the message is one line."""


@dataclass(frozen=True, slots=True)
class Listener:
    """One ``NAME://host:port`` entry; ``host`` is "" for every interface."""

    name: str
    host: str
    port: int
    security_protocol: str


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    listeners: tuple[Listener, ...]  # bound, in the order given
    advertised: tuple[Listener, ...]  # told to others, in the order given; the first is the clients'
    inter_broker_listener: str

    def listener(self, name: str) -> Listener:
        return next(listener for listener in self.listeners if listener.name == name)


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` (``listener.security.protocol.map``), names upper-cased."""
    mapping: dict[str, str] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        name, colon, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not colon or not name or protocol not in SECURITY_PROTOCOLS:
            raise ListenerConfigError(
                f"invalid value {text!r} for listener.security.protocol.map: {item!r} is not "
                f"NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        if name in mapping:
            raise ListenerConfigError(
                f"invalid value {text!r} for listener.security.protocol.map: {name} is mapped twice")
        mapping[name] = protocol
    return mapping


def parse_listeners(text: str, protocols: dict[str, str], what: str, *, distinct_ports: bool) -> tuple[Listener, ...]:
    """The entries of ``listeners`` or ``advertised.listeners`` (``what``), checked as Kafka does."""
    entries = [entry.strip() for entry in text.split(",") if entry.strip()]
    if not entries:
        raise ListenerConfigError(f"{what} is empty: give at least one NAME://host:port")
    parsed: list[Listener] = []
    for entry in entries:
        match = _ENTRY.match(entry)
        if match is None:
            raise ListenerConfigError(f"invalid value {text!r} for {what}: cannot parse {entry!r} as NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2), int(match.group(3))
        if not name:
            raise ListenerConfigError(f"invalid value {text!r} for {what}: {entry!r} has no listener name")
        if not 0 <= port <= 65535:
            raise ListenerConfigError(f"invalid value {text!r} for {what}: port {port} is not 0..65535")
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerConfigError(
                f"invalid value {text!r} for {what}: no security protocol defined for listener {name} "
                "(add it to listener.security.protocol.map)")
        parsed.append(Listener(name, host, port, protocol))
    names = [listener.name for listener in parsed]
    if len(set(names)) != len(names):
        raise ListenerConfigError(f"invalid value {text!r} for {what}: each listener must have a different name")
    if distinct_ports:
        _check_ports(parsed, text, what)
    return tuple(parsed)


def _check_ports(listeners: list[Listener], text: str, what: str) -> None:
    """Kafka's rule: distinct ports, except 0 and one IPv4 plus one IPv6 address on a port."""
    by_port: dict[int, list[Listener]] = {}
    for listener in listeners:
        if listener.port != 0:
            by_port.setdefault(listener.port, []).append(listener)
    for port, sharing in by_port.items():
        if len(sharing) == 1:
            continue
        versions = sorted(_ip_version(listener.host) for listener in sharing)
        if versions != [4, 6]:
            raise ListenerConfigError(
                f"invalid value {text!r} for {what}: each listener must have a different port unless exactly one "
                f"has an IPv4 address and the other an IPv6 address (port {port})")


def _ip_version(host: str) -> int:
    import ipaddress  # only when two listeners share a port: ~4 ms kept off every start

    try:
        return ipaddress.ip_address(host.split("%")[0]).version
    except ValueError:
        return 0  # a host name


def parse_listener_settings(listeners: str, advertised_listeners: str, protocol_map: str,
                            inter_broker_listener_name: str) -> ListenerSettings:
    """All four settings together; ``ListenerConfigError`` names the first rule broken."""
    protocols = parse_protocol_map(protocol_map)
    bound = parse_listeners(listeners, protocols, "listeners", distinct_ports=True)
    for listener in bound:
        if listener.security_protocol not in SERVED_PROTOCOLS:
            raise ListenerConfigError(
                f"listener {listener.name} uses security protocol {listener.security_protocol}, which is not "
                f"supported yet: the protocols served are {', '.join(sorted(SERVED_PROTOCOLS))}")
    if advertised_listeners.strip():
        advertised = parse_listeners(advertised_listeners, protocols, "advertised.listeners", distinct_ports=False)
    else:
        advertised = bound
    bound_names = [listener.name for listener in bound]
    for listener in advertised:
        if listener.name not in bound_names:
            raise ListenerConfigError(
                f"advertised.listeners names {listener.name}, which is not in listeners "
                f"(the valid options are {','.join(bound_names)})")
        if listener.host == "0.0.0.0":
            raise ListenerConfigError(
                f"advertised.listeners cannot use the nonroutable meta-address 0.0.0.0 (listener {listener.name}; "
                "set advertised.listeners to a routable address)")
    advertised_names = [listener.name for listener in advertised]
    inter_broker = inter_broker_listener_name.strip().upper()
    if not inter_broker:
        if DEFAULT_INTER_BROKER_LISTENER not in advertised_names:
            raise ListenerConfigError(
                "inter.broker.listener.name is not set and no listener is named PLAINTEXT (the default, after "
                f"security.inter.broker.protocol): set inter.broker.listener.name to one of {','.join(advertised_names)}")
        inter_broker = DEFAULT_INTER_BROKER_LISTENER
    elif inter_broker not in advertised_names:
        raise ListenerConfigError(
            f"inter.broker.listener.name {inter_broker} must be a listener name defined in advertised.listeners "
            f"(the valid options are {','.join(advertised_names)})")
    return ListenerSettings(bound, advertised, inter_broker)
