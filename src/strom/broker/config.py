"""Broker settings with Kafka's property names and defaults, listed once.

A ``server.properties`` file, ``--override name=value`` pairs and the command line's
own flags all end up as one property map; ``BrokerConfig.from_properties`` turns it
into a frozen, typed object. Unknown names are refused, so a typo is an error at start
rather than a setting silently ignored: a ``ConfigError`` whose one-line message names
the property (and, for an unknown name, the closest known one). Topic defaults come from the broker's
``log.*`` properties, as in Kafka (``log.retention.ms`` is the default ``retention.ms``).
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from strom.broker.kafka_broker_configs import (  # issue 20, R1
    SECURITY_CLASSES,
    SECURITY_NO_EFFECT,
    SECURITY_NO_EFFECT_PREFIXES,
    SECURITY_PROTOCOLS,
)
from strom.broker.listeners import (
    TLS_PROTOCOLS,
    ListenerConfigError,
    ListenerSettings,
    parse_listener_settings,
)
from strom.storage.config import LogConfig, parse_properties
from strom.storage.errors import StorageError

if TYPE_CHECKING:
    from strom.security.tls import ListenerTls  # issue 20, D

logger = logging.getLogger(__name__)  # issue 20, R1: Kafka security properties without effect


class ConfigError(ValueError):
    """A property the broker cannot start with; the message is one line for the operator."""


def _kafka(name: str) -> dict[str, str]:
    return {"kafka": name}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """One broker's settings; field metadata carries the Kafka property name."""

    node_id: int = field(default=1, metadata=_kafka("node.id"))
    listeners: str = field(default="PLAINTEXT://127.0.0.1:9092", metadata=_kafka("listeners"))
    advertised_listeners: str = field(default="", metadata=_kafka("advertised.listeners"))
    log_dirs: str = field(default="./strom-data", metadata=_kafka("log.dirs"))
    cluster_id: str = field(default="", metadata=_kafka("cluster.id"))
    num_partitions: int = field(default=1, metadata=_kafka("num.partitions"))
    default_replication_factor: int = field(
        default=1, metadata=_kafka("default.replication.factor")
    )
    auto_create_topics_enable: bool = field(
        default=True, metadata=_kafka("auto.create.topics.enable")
    )
    delete_topic_enable: bool = field(default=True, metadata=_kafka("delete.topic.enable"))
    socket_request_max_bytes: int = field(
        default=104857600, metadata=_kafka("socket.request.max.bytes")
    )
    connections_max_idle_ms: int = field(
        default=600000, metadata=_kafka("connections.max.idle.ms")
    )
    log_retention_check_interval_ms: int = field(
        default=300000, metadata=_kafka("log.retention.check.interval.ms")
    )
    log_flush_scheduler_interval_ms: int = field(
        default=1000, metadata=_kafka("log.flush.scheduler.interval.ms")
    )
    log_flush_offset_checkpoint_interval_ms: int = field(
        default=60000, metadata=_kafka("log.flush.offset.checkpoint.interval.ms")
    )
    max_incremental_fetch_session_cache_slots: int = field(
        default=1000, metadata=_kafka("max.incremental.fetch.session.cache.slots")
    )
    producer_id_expiration_ms: int = field(default=86400000, metadata=_kafka("producer.id.expiration.ms"))
    producer_id_expiration_check_interval_ms: int = field(
        default=600000, metadata=_kafka("producer.id.expiration.check.interval.ms")
    )
    offsets_topic_num_partitions: int = field(
        default=50, metadata=_kafka("offsets.topic.num.partitions")
    )
    group_initial_rebalance_delay_ms: int = field(
        default=3000, metadata=_kafka("group.initial.rebalance.delay.ms")
    )
    group_min_session_timeout_ms: int = field(
        default=6000, metadata=_kafka("group.min.session.timeout.ms")
    )
    group_max_session_timeout_ms: int = field(
        default=1800000, metadata=_kafka("group.max.session.timeout.ms")
    )
    group_max_size: int = field(default=2**31 - 1, metadata=_kafka("group.max.size"))
    offsets_topic_segment_bytes: int = field(default=104857600, metadata=_kafka("offsets.topic.segment.bytes"))
    offset_metadata_max_bytes: int = field(default=4096, metadata=_kafka("offset.metadata.max.bytes"))
    offsets_retention_minutes: int = field(default=10080, metadata=_kafka("offsets.retention.minutes"))
    offsets_retention_check_interval_ms: int = field(
        default=600000, metadata=_kafka("offsets.retention.check.interval.ms")
    )
    log_cleaner_enable: bool = field(default=True, metadata=_kafka("log.cleaner.enable"))
    log_cleaner_threads: int = field(default=1, metadata=_kafka("log.cleaner.threads"))
    log_cleaner_dedupe_buffer_size: int = field(
        default=134217728, metadata=_kafka("log.cleaner.dedupe.buffer.size"))
    log_cleaner_io_buffer_load_factor: float = field(
        default=0.9, metadata=_kafka("log.cleaner.io.buffer.load.factor"))
    log_cleaner_io_max_bytes_per_second: float = field(
        default=1.7976931348623157e308, metadata=_kafka("log.cleaner.io.max.bytes.per.second"))
    log_cleaner_backoff_ms: int = field(default=15000, metadata=_kafka("log.cleaner.backoff.ms"))
    # Cluster mode (strom.cluster): set zookeeper.connect and the broker joins the cluster whose
    # ZooKeeper ensemble it names (host:port[,host:port...][/chroot]); empty: a single node.
    zookeeper_connect: str = field(default="", metadata=_kafka("zookeeper.connect"))
    zookeeper_session_timeout_ms: int = field(default=18000, metadata=_kafka("zookeeper.session.timeout.ms"))
    # Kafka's default is unset, meaning the session timeout; 0 stands for unset here.
    zookeeper_connection_timeout_ms: int = field(default=0, metadata=_kafka("zookeeper.connection.timeout.ms"))
    offsets_topic_replication_factor: int = field(default=3, metadata=_kafka("offsets.topic.replication.factor"))
    controlled_shutdown_enable: bool = field(default=True, metadata=_kafka("controlled.shutdown.enable"))
    controlled_shutdown_max_retries: int = field(default=3, metadata=_kafka("controlled.shutdown.max.retries"))
    controlled_shutdown_retry_backoff_ms: int = field(
        default=5000, metadata=_kafka("controlled.shutdown.retry.backoff.ms"))
    broker_rack: str = field(default="", metadata=_kafka("broker.rack"))
    # Replication (cluster mode part 2), Kafka's names and defaults. An empty
    # inter.broker.listener.name means the listener named PLAINTEXT (strom.broker.listeners).
    inter_broker_listener_name: str = field(default="", metadata=_kafka("inter.broker.listener.name"))
    listener_security_protocol_map: str = field(
        default="PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        metadata=_kafka("listener.security.protocol.map"))
    replica_lag_time_max_ms: int = field(default=30000, metadata=_kafka("replica.lag.time.max.ms"))
    replica_fetch_max_bytes: int = field(default=1048576, metadata=_kafka("replica.fetch.max.bytes"))
    replica_fetch_response_max_bytes: int = field(
        default=10485760, metadata=_kafka("replica.fetch.response.max.bytes"))
    replica_fetch_wait_max_ms: int = field(default=500, metadata=_kafka("replica.fetch.wait.max.ms"))
    replica_fetch_min_bytes: int = field(default=1, metadata=_kafka("replica.fetch.min.bytes"))
    replica_fetch_backoff_ms: int = field(default=1000, metadata=_kafka("replica.fetch.backoff.ms"))
    replica_socket_timeout_ms: int = field(default=30000, metadata=_kafka("replica.socket.timeout.ms"))
    num_replica_fetchers: int = field(default=1, metadata=_kafka("num.replica.fetchers"))
    replica_high_watermark_checkpoint_interval_ms: int = field(
        default=5000, metadata=_kafka("replica.high.watermark.checkpoint.interval.ms"))
    offsets_commit_required_acks: int = field(default=-1, metadata=_kafka("offsets.commit.required.acks"))
    offsets_commit_timeout_ms: int = field(default=5000, metadata=_kafka("offsets.commit.timeout.ms"))
    # The transaction coordinator (strom.broker.transaction), Kafka's names and defaults. The
    # replication factor is capped to the live brokers when the topic is made, as the offsets
    # topic's; on one node min.isr is 1 (its only replica could never make 2).
    transaction_state_log_num_partitions: int = field(
        default=50, metadata=_kafka("transaction.state.log.num.partitions"))
    transaction_state_log_replication_factor: int = field(
        default=3, metadata=_kafka("transaction.state.log.replication.factor"))
    transaction_state_log_min_isr: int = field(default=2, metadata=_kafka("transaction.state.log.min.isr"))
    transaction_state_log_segment_bytes: int = field(
        default=104857600, metadata=_kafka("transaction.state.log.segment.bytes"))
    transaction_max_timeout_ms: int = field(default=900000, metadata=_kafka("transaction.max.timeout.ms"))
    transactional_id_expiration_ms: int = field(
        default=604800000, metadata=_kafka("transactional.id.expiration.ms"))
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = field(
        default=10000, metadata=_kafka("transaction.abort.timed.out.transaction.cleanup.interval.ms"))
    transaction_remove_expired_transaction_cleanup_interval_ms: int = field(
        default=3600000, metadata=_kafka("transaction.remove.expired.transaction.cleanup.interval.ms"))
    # KIP-890 part 1: a partition leader asks the transaction coordinator before a producer's
    # first transactional append to it (strom.broker.transaction.verification).
    transaction_partition_verification_enable: bool = field(
        default=True, metadata=_kafka("transaction.partition.verification.enable"))
    # ACL authorization (issue 20, strom.security.acl): any authorizer.class.name turns the ACL
    # authorizer on; super.users is principals separated by ";" (User:alice;User:bob).
    authorizer_class_name: str = field(default="", metadata=_kafka("authorizer.class.name"))
    super_users: str = field(default="", metadata=_kafka("super.users"))
    allow_everyone_if_no_acl_found: bool = field(default=False, metadata=_kafka("allow.everyone.if.no.acl.found"))
    # SASL (issue 20, area E: strom.security.sasl), Kafka's names and defaults; per listener (and
    # mechanism) as listener.name.<l>.[<mechanism>.]<name>, read by strom.security.sasl.listener_config.
    sasl_enabled_mechanisms: str = field(default="GSSAPI", metadata=_kafka("sasl.enabled.mechanisms"))
    sasl_mechanism_inter_broker_protocol: str = field(
        default="GSSAPI", metadata=_kafka("sasl.mechanism.inter.broker.protocol"))
    connections_max_reauth_ms: int = field(default=0, metadata=_kafka("connections.max.reauth.ms"))
    connection_failed_authentication_delay_ms: int = field(
        default=100, metadata=_kafka("connection.failed.authentication.delay.ms"))
    sasl_server_max_receive_size: int = field(default=524288, metadata=_kafka("sasl.server.max.receive.size"))
    # TLS listeners (issue 20, area D: strom.security.tls): Kafka's ssl.* names, PEM key material
    # (KIP-651), each also settable per listener as listener.name.<listener>.ssl.*. Only PEM is
    # read, so both store types default to it (Kafka's default, JKS, is refused at start).
    ssl_keystore_type: str = field(default="PEM", metadata=_kafka("ssl.keystore.type"))
    ssl_keystore_location: str = field(default="", metadata=_kafka("ssl.keystore.location"))
    ssl_keystore_certificate_chain: str = field(default="", metadata=_kafka("ssl.keystore.certificate.chain"))
    ssl_keystore_key: str = field(default="", metadata=_kafka("ssl.keystore.key"))
    ssl_keystore_password: str = field(default="", metadata=_kafka("ssl.keystore.password"))
    ssl_key_password: str = field(default="", metadata=_kafka("ssl.key.password"))
    ssl_truststore_type: str = field(default="PEM", metadata=_kafka("ssl.truststore.type"))
    ssl_truststore_location: str = field(default="", metadata=_kafka("ssl.truststore.location"))
    ssl_truststore_certificates: str = field(default="", metadata=_kafka("ssl.truststore.certificates"))
    ssl_truststore_password: str = field(default="", metadata=_kafka("ssl.truststore.password"))
    ssl_protocol: str = field(default="TLSv1.3", metadata=_kafka("ssl.protocol"))
    ssl_enabled_protocols: str = field(default="TLSv1.2,TLSv1.3", metadata=_kafka("ssl.enabled.protocols"))
    ssl_cipher_suites: str = field(default="", metadata=_kafka("ssl.cipher.suites"))
    ssl_client_auth: str = field(default="none", metadata=_kafka("ssl.client.auth"))
    ssl_principal_mapping_rules: str = field(default="DEFAULT", metadata=_kafka("ssl.principal.mapping.rules"))
    # Client quotas (issue 20, strom.broker.quota): rates measured over quota.window.num samples of
    # quota.window.size.seconds each, as Kafka's ClientQuotaManager (both at least 1).
    quota_window_num: int = field(default=11, metadata=_kafka("quota.window.num"))
    quota_window_size_seconds: int = field(default=1, metadata=_kafka("quota.window.size.seconds"))
    log: LogConfig = field(default_factory=LogConfig, metadata=_kafka(""))
    # Prometheus metrics (issue 21, R4: strom.metrics): /metrics served on http://host:port; off when "".
    metrics_listener: str = field(default="", metadata=_kafka("metrics.listener"))
    # Per-listener overrides, ``listener.name.<listener>.<property>`` (names lower-case, as
    # Kafka's ``ListenerName.configPrefix``): security settings of one listener (issue 20).
    # Kept raw; ``listener_property`` looks one up and the module that owns the property parses it.
    listener_overrides: tuple[tuple[str, str, str], ...] = field(default=(), metadata=_kafka(""))
    # Every property given (server.properties, --override, flags), as written: DescribeConfigs
    # reports these as STATIC_BROKER_CONFIG even when equal to the default, as Kafka does.
    given: tuple[tuple[str, str], ...] = field(default=(), metadata=_kafka(""), compare=False, repr=False)

    @classmethod
    def from_properties(cls, properties: Mapping[str, str]) -> BrokerConfig:
        """Build from Kafka property names; ``log.*`` names set the topic defaults."""
        config = cls().with_properties(properties)
        config.listener_settings()  # refused at start, as Kafka's KafkaConfig does
        config.tls_listeners()  # TLS key material read at start (issue 20, D): a bad file is one line
        from strom.security.sasl import listener_config  # SASL listeners' settings (issue 20, E)

        try:
            listener_config.check(config)
        except listener_config.SaslConfigError as exc:
            raise ConfigError(str(exc)) from None
        from strom.metrics.listener import (  # issue 21, R4
            MetricsListenerError,
            parse_metrics_listener,
        )

        try:
            parse_metrics_listener(config.metrics_listener)
        except MetricsListenerError as exc:
            raise ConfigError(str(exc)) from None
        return config

    def with_properties(self, properties: Mapping[str, str]) -> BrokerConfig:
        """A copy with ``properties`` (Kafka names) set over this config's values.

        Static configs are built this way over the defaults, and the dynamic layers
        (``strom.broker.dynamic_config``) over the static config: a later layer wins for
        every synonym of a topic default, as Kafka's ``overrideProps`` does.
        """
        values: dict[str, Any] = {}
        topic_defaults: dict[str, str] = {}
        properties = _broker_id_synonym(properties)
        for name, text in properties.items():
            if name in _FIELDS:
                fld = _FIELDS[name]
                values[fld.name] = _parse(name, fld.type, text)
            elif name in BROKER_TO_TOPIC:
                topic_defaults[BROKER_TO_TOPIC[name]] = _topic_default(name, text)
            elif name.startswith(_LISTENER_PREFIX):
                overrides = values.setdefault("listener_overrides", list(self.listener_overrides))
                overrides.append(_listener_override(name, text))
                _kafka_security_property(name, _without_mechanism(overrides[-1][1]), text)  # issue 20, R1
            elif name == "security.inter.broker.protocol":  # issue 20, R1: Kafka's older name
                values["inter_broker_listener_name"] = _inter_broker_protocol(properties, text)
            elif _kafka_security_property(name, name, text):  # issue 20, R1: accepted, no effect
                pass
            else:
                raise ConfigError(_unknown(name, [*_FIELDS, *BROKER_TO_TOPIC, "broker.id"]))
        if "listener_overrides" in values:
            values["listener_overrides"] = tuple(values["listener_overrides"])
        values["given"] = (*self.given, *((name, text.strip()) for name, text in properties.items()))
        try:
            values["log"] = self.log.with_overrides(topic_defaults)
        except StorageError as exc:  # settings valid alone but not together
            raise ConfigError(f"invalid topic defaults: {_reason(exc)}") from None
        return dataclasses.replace(self, **values)

    @classmethod
    def load(cls, path: str | None, overrides: Mapping[str, str]) -> BrokerConfig:
        properties: dict[str, str] = {}
        if path is not None:
            try:
                with open(path, encoding="utf-8") as file:
                    properties.update(parse_properties(file.read()))
            except OSError as exc:
                raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
        properties.update(overrides)
        return cls.from_properties(properties)

    def listener_property(self, listener: str, name: str) -> str | None:
        """``listener.name.<listener>.<name>`` if given, else None: the caller falls back to the
        broker-wide ``name`` (Kafka's ``KafkaConfig.valuesWithPrefixOverride``)."""
        wanted = listener.lower()
        found = None
        for listener_name, prop, text in self.listener_overrides:  # a later layer wins
            if listener_name == wanted and prop == name:
                found = text
        return found

    def listener_settings(self) -> ListenerSettings:
        """The listeners parsed and checked together (``ConfigError`` naming the rule broken)."""
        try:
            return parse_listener_settings(self.listeners, self.advertised_listeners,
                                           self.listener_security_protocol_map, self.inter_broker_listener_name)
        except ListenerConfigError as exc:
            raise ConfigError(str(exc)) from None

    def tls_listeners(self) -> dict[str, ListenerTls]:
        """Each SSL/SASL_SSL listener's TLS context, from its ``ssl.*`` settings (issue 20, D)."""
        settings = self.listener_settings()
        names = [listener.name for listener in settings.listeners if listener.security_protocol in TLS_PROTOCOLS]
        if not names:
            return {}
        if self.cluster_mode and settings.inter_broker_listener in names:  # brokers' own clients speak PLAINTEXT
            raise ConfigError(f"inter.broker.listener.name {settings.inter_broker_listener} is a TLS listener: "
                              "brokers do not connect to each other over TLS yet; use a PLAINTEXT listener")
        from strom.security.tls import TlsConfigError, listener_tls  # ssl only where TLS is served

        try:
            return {name: listener_tls(self, name) for name in names}
        except TlsConfigError as exc:
            raise ConfigError(str(exc)) from None

    @property
    def cluster_mode(self) -> bool:
        """A broker of a ZooKeeper-coordinated cluster (``zookeeper.connect`` set)."""
        return bool(self.zookeeper_connect.strip())

    @property
    def zookeeper_connection_timeout(self) -> int:
        """``zookeeper.connection.timeout.ms``, or the session timeout where unset (Kafka's rule)."""
        return self.zookeeper_connection_timeout_ms or self.zookeeper_session_timeout_ms

    @property
    def data_dir(self) -> str:
        """Strom keeps one data directory; the first of ``log.dirs``."""
        return self.log_dirs.split(",")[0].strip()


# Broker-level names of topic settings (Kafka's LogConfig "server default" mapping).
BROKER_TO_TOPIC = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.hours": "segment.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.ms": "retention.ms",
    "log.retention.minutes": "retention.ms",
    "log.retention.hours": "retention.ms",
    "log.retention.bytes": "retention.bytes",
    "log.cleanup.policy": "cleanup.policy",
    "log.message.timestamp.type": "message.timestamp.type",
    "log.message.timestamp.before.max.ms": "message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms": "message.timestamp.after.max.ms",
    "log.message.timestamp.difference.max.ms": "message.timestamp.difference.max.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "message.max.bytes": "max.message.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    # Deprecated, accepted and ignored as in Kafka 3.9 (storage.config.DEPRECATED_TOPIC_CONFIGS).
    "log.message.format.version": "message.format.version",
    "log.message.downconversion.enable": "message.downconversion.enable",
}
_FIELDS: Final = {f.metadata["kafka"]: f for f in dataclasses.fields(BrokerConfig) if f.metadata["kafka"]}
PROPERTY_NAMES: Final = frozenset(_FIELDS) | frozenset(BROKER_TO_TOPIC)  # every name Strom knows
_TOPIC_TYPES = {f.metadata["kafka"]: type(f.default) for f in dataclasses.fields(LogConfig) if f.metadata["kafka"]}
_UNIT_MS = {"log.roll.hours": 3600000, "log.retention.hours": 3600000, "log.retention.minutes": 60000}


def _broker_id_synonym(properties: Mapping[str, str]) -> Mapping[str, str]:
    """``broker.id`` (ZooKeeper mode's name) is ``node.id``; both given must agree, as in Kafka."""
    if "broker.id" not in properties:
        return properties
    renamed = dict(properties)
    broker_id = renamed.pop("broker.id").strip()
    node_id = renamed.get("node.id")
    if node_id is not None and node_id.strip() != broker_id:
        raise ConfigError(f"broker.id {broker_id} and node.id {node_id.strip()} differ: they name the same "
                          "setting, give one (or the same value)")
    renamed["node.id"] = broker_id
    return renamed


_LISTENER_PREFIX: Final = "listener.name."


def _listener_override(name: str, text: str) -> tuple[str, str, str]:
    """``listener.name.<listener>.<property>`` split into (listener lower-cased, property, value)."""
    listener, dot, prop = name[len(_LISTENER_PREFIX):].partition(".")
    if not listener or not dot or not prop:
        raise ConfigError(f"invalid property name {name}: expected listener.name.<listener>.<property>")
    return listener.lower(), prop, text.strip()


def _kafka_security_property(name: str, base: str, text: str) -> bool:
    """True for a Kafka security property Strom accepts without acting on it (logged); a
    ``ConfigError`` for one whose value Strom cannot honour; False for any other name.
    ``base`` is the name without a ``listener.name.<listener>.[<mechanism>.]`` prefix (issue 20, R1)."""
    allowed = SECURITY_CLASSES.get(base)
    if allowed is not None:
        if text.strip() not in allowed:
            raise ConfigError(f"{name}={text.strip()} is not supported: Strom runs no Java classes and acts as "
                              f"{' or '.join(sorted(allowed))}; remove the property")
        return True
    if base in SECURITY_NO_EFFECT or base.startswith(SECURITY_NO_EFFECT_PREFIXES):
        logger.info("%s has no effect in Strom (JVM TLS plumbing, or the login side of SASL between brokers, "
                    "which talk PLAINTEXT to each other)", name)
        return True
    return False


def _without_mechanism(prop: str) -> str:
    """A listener override's property without its SASL mechanism prefix
    (``plain.sasl.server.callback.handler.class`` → ``sasl.server.callback.handler.class``)."""
    head, sasl, tail = prop.rpartition("sasl.")
    return sasl + tail if sasl and head.count(".") == 1 else prop


def _inter_broker_protocol(properties: Mapping[str, str], text: str) -> str:
    """``security.inter.broker.protocol``: the inter-broker listener is the one named after the
    protocol, as Kafka's KafkaConfig reads it; only one of it and inter.broker.listener.name."""
    protocol = text.strip().upper()
    if "inter.broker.listener.name" in properties:
        raise ConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
    if protocol not in SECURITY_PROTOCOLS:
        raise ConfigError(f"invalid value {text!r} for security.inter.broker.protocol: "
                          f"must be one of {', '.join(SECURITY_PROTOCOLS)}")
    return protocol


def _unknown(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown broker property {name!r}{hint}"


def _reason(exc: StorageError) -> str:
    return str(exc).removeprefix("invalid topic config: ")


def _topic_default(name: str, text: str) -> str:
    """The topic-level value of broker property ``name``, checked on its own."""
    text = text.strip()
    topic_name = BROKER_TO_TOPIC[name]
    parsed = _parse(name, int if name in _UNIT_MS else _TOPIC_TYPES[topic_name], text)
    value = str(parsed * _UNIT_MS[name]) if name in _UNIT_MS else text
    try:
        LogConfig().with_overrides({topic_name: value})
    except StorageError as exc:
        raise ConfigError(f"invalid value {text!r} for {name}: {_reason(exc)}") from None
    return value


def _parse(name: str, kind: object, text: str) -> int | float | bool | str:
    text = text.strip()
    if kind in (float, "float"):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"invalid value {text!r} for {name}: must be a number") from None
    if kind in (int, "int"):
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"invalid value {text!r} for {name}: must be an integer") from None
    if kind in (bool, "bool"):
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"invalid value {text!r} for {name}: must be true or false")
        return text.lower() == "true"
    return text
