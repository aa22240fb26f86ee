"""Each SASL listener's settings, from Kafka's properties, checked once at start.

- ``sasl.enabled.mechanisms`` (Kafka's default ``GSSAPI``), overridable per listener as
  ``listener.name.<listener>.sasl.enabled.mechanisms``. Strom serves PLAIN, SCRAM-SHA-256,
  SCRAM-SHA-512 and OAUTHBEARER; GSSAPI (Kerberos) is not supported, so a SASL listener
  that would enable it is a one-line ``ConfigError`` saying so.
- ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (mechanism lower-cased), as
  Kafka's brokers take JAAS: PLAIN's users (``user_<name>="<password>"``; required for
  PLAIN), OAUTHBEARER's unsecured validator options; SCRAM needs none (the users are the
  credential store's).
- ``connections.max.reauth.ms`` (KIP-368; 0, off, by default), overridable per listener and
  per listener and mechanism (``listener.name.<l>.<mechanism>.connections.max.reauth.ms``).
- ``connection.failed.authentication.delay.ms`` (100, less than ``connections.max.idle.ms``):
  how long a failed authentication's connection stays open after the answer;
  ``sasl.server.max.receive.size`` (524288): a larger frame before authentication closes the
  connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from strom.security.sasl import oauthbearer, plain, scram
from strom.security.sasl.jaas import JaasConfigError, JaasEntry, parse_jaas_config

if TYPE_CHECKING:
    from strom.broker.config import BrokerConfig

SUPPORTED_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_LOGIN_MODULES: Final = {"PLAIN": plain.LOGIN_MODULE, "SCRAM-SHA-256": scram.LOGIN_MODULE,
                         "SCRAM-SHA-512": scram.LOGIN_MODULE, "OAUTHBEARER": oauthbearer.LOGIN_MODULE}


class SaslConfigError(ValueError):
    """A SASL setting the broker cannot start with; one line (made a ``ConfigError``)."""


@dataclass(frozen=True, slots=True)
class SaslListenerConfig:
    listener: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    oauthbearer_validator: oauthbearer.TokenValidator
    max_reauth_ms: Mapping[str, int]  # mechanism -> connections.max.reauth.ms
    failed_authentication_delay_ms: int
    max_receive_size: int = 524288  # sasl.server.max.receive.size: the largest frame before authentication


def _int(name: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise SaslConfigError(f"invalid value {text!r} for {name}: must be an integer") from None
    if value < 0:
        raise SaslConfigError(f"invalid value {text!r} for {name}: must be at least 0")
    return value


def _jaas(config: BrokerConfig, listener: str, mechanism: str) -> JaasEntry | None:
    name = f"{mechanism.lower()}.sasl.jaas.config"
    text = config.listener_property(listener, name)
    if text is None:
        return None
    full_name = f"listener.name.{listener.lower()}.{name}"
    try:
        entry = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise SaslConfigError(f"invalid value for {full_name}: {exc}") from None
    if entry.login_module != _LOGIN_MODULES[mechanism]:
        raise SaslConfigError(f"invalid value for {full_name}: {mechanism} needs login module "
                              f"{_LOGIN_MODULES[mechanism]}, not {entry.login_module}")
    return entry


def listener_config(config: BrokerConfig, listener: str) -> SaslListenerConfig:
    """The settings of SASL listener ``listener`` (``SaslConfigError`` naming what is wrong)."""
    override = config.listener_property(listener, "sasl.enabled.mechanisms")
    text = override if override is not None else config.sasl_enabled_mechanisms
    mechanisms = tuple(dict.fromkeys(m.strip().upper() for m in text.split(",") if m.strip()))
    if not mechanisms:
        raise SaslConfigError(f"listener {listener} uses SASL but sasl.enabled.mechanisms is empty")
    for mechanism in mechanisms:
        if mechanism == "GSSAPI":
            raise SaslConfigError(
                f"listener {listener} enables SASL mechanism GSSAPI (Kerberos; Kafka's default for "
                f"sasl.enabled.mechanisms), which Strom does not support: set sasl.enabled.mechanisms to some of "
                f"{','.join(SUPPORTED_MECHANISMS)}")
        if mechanism not in SUPPORTED_MECHANISMS:
            raise SaslConfigError(f"listener {listener} enables SASL mechanism {mechanism}, which is not "
                                  f"supported (supported: {','.join(SUPPORTED_MECHANISMS)})")
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        entry = _jaas(config, listener, "PLAIN")
        if entry is None:
            raise SaslConfigError(
                f"listener {listener} enables PLAIN but listener.name.{listener.lower()}.plain.sasl.jaas.config "
                f"is not set (give {plain.LOGIN_MODULE} required user_<name>=\"<password>\" ...;)")
        users = plain.users_from_options(entry.options)
    validator: oauthbearer.TokenValidator = oauthbearer.UnsecuredJwsValidator()
    if "OAUTHBEARER" in mechanisms:
        entry = _jaas(config, listener, "OAUTHBEARER")
        try:
            validator = oauthbearer.UnsecuredJwsValidator.from_jaas_options(entry.options if entry else {})
        except ValueError as exc:
            raise SaslConfigError(f"invalid OAUTHBEARER options on listener {listener}: {exc}") from None
    for mechanism in mechanisms:
        if mechanism.startswith("SCRAM-"):
            _jaas(config, listener, mechanism)  # checked if given; the users are the credential store's
    reauth: dict[str, int] = {}
    for mechanism in mechanisms:
        for name in (f"{mechanism.lower()}.connections.max.reauth.ms", "connections.max.reauth.ms"):
            value = config.listener_property(listener, name)
            if value is not None:
                reauth[mechanism] = _int(f"listener.name.{listener.lower()}.{name}", value)
                break
        else:
            reauth[mechanism] = config.connections_max_reauth_ms
    return SaslListenerConfig(listener, mechanisms, users, validator, reauth,
                              config.connection_failed_authentication_delay_ms, config.sasl_server_max_receive_size)


def sasl_listener_configs(config: BrokerConfig) -> dict[str, SaslListenerConfig]:
    """Every SASL listener's settings by listener name; ``SaslConfigError`` for the first wrong."""
    settings = config.listener_settings()
    configs = {listener.name: listener_config(config, listener.name) for listener in settings.listeners
               if listener.security_protocol.startswith("SASL_")}
    if config.cluster_mode and settings.inter_broker_listener in configs:
        raise SaslConfigError(f"the inter-broker listener {settings.inter_broker_listener} uses SASL, which "
                              "Strom's brokers cannot authenticate with to each other yet: use a PLAINTEXT or SSL "
                              "listener for inter.broker.listener.name")
    if configs and config.connection_failed_authentication_delay_ms >= config.connections_max_idle_ms:
        raise SaslConfigError(  # Kafka's KafkaConfig rule
            f"connection.failed.authentication.delay.ms={config.connection_failed_authentication_delay_ms} should "
            f"always be less than connections.max.idle.ms={config.connections_max_idle_ms} to prevent failed "
            "authentication responses from timing out")
    mechanism = config.sasl_mechanism_inter_broker_protocol.strip().upper()
    if mechanism not in (*SUPPORTED_MECHANISMS, "GSSAPI"):
        raise SaslConfigError(f"invalid value {mechanism!r} for sasl.mechanism.inter.broker.protocol")
    return configs


def check(config: BrokerConfig) -> None:
    """At start (``BrokerConfig.from_properties``): refuse a broker whose SASL settings are wrong
    (``SaslConfigError``, which the config turns into its one-line ``ConfigError``)."""
    sasl_listener_configs(config)
