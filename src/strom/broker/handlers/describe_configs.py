"""DescribeConfigs (32): topic, broker and broker-logger configs, as Kafka's ConfigHelper answers.

Every setting's source is its highest layer, Kafka's order: DYNAMIC_TOPIC_CONFIG (the
topic's override), DYNAMIC_BROKER_CONFIG (this broker's dynamic layer),
DYNAMIC_DEFAULT_BROKER_CONFIG (the cluster-wide dynamic default), STATIC_BROKER_CONFIG
(server.properties or ``--override``; told apart from the default by its value), else
DEFAULT_CONFIG; synonyms (v1+, on request) list every layer that sets it in that order,
with the broker's property name for the broker layers (ConfigHelper's configSynonyms).
TOPIC: every topic setting (deprecated ones Kafka 3.9 still lists among them), never
read-only. BROKER: by this node's id, the broker's properties, read-only unless dynamic
(``strom.broker.dynamic_config``), then Kafka's dynamic configs Strom keeps without using
(with Kafka's types and defaults) and any other name a dynamic layer holds (an unknown
name as Kafka shows it: read-only, of unknown type, so sensitive and without a value);
by the empty name, only the cluster-wide dynamic defaults, each with its one synonym, as Kafka. BROKER_LOGGER: the ``strom`` loggers'
levels in Log4j's names (read-only here: levels cannot be changed at run time yet). Any
other resource type gets INVALID_REQUEST, as in Kafka. v0's ``is_default`` is always
false, as Kafka 3.9 sends it.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import TYPE_CHECKING, Final

from strom.broker.authorizer import AclOperation, config_refusal
from strom.broker.config import BROKER_TO_TOPIC, PROPERTY_NAMES, BrokerConfig
from strom.broker.dynamic_config import DYNAMIC_CONFIGS, is_kept_only
from strom.broker.kafka_broker_configs import LISTENER_CONFIG, NO_EFFECT_CONFIGS
from strom.broker.metadata_cache import TopicError, validate_topic_name
from strom.protocol.error_codes import ErrorCode
from strom.protocol.errors import KafkaException
from strom.protocol.message import Message
from strom.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from strom.protocol.messages.describe_configs_response import (
    DescribeConfigsResourceResult,
    DescribeConfigsResponse,
    DescribeConfigsResult,
    DescribeConfigsSynonym,
)
from strom.storage.config import LogConfig

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.protocol.headers import Request

REQUEST = DescribeConfigsRequest
logger = logging.getLogger(__name__)
VERSIONS = range(0, 5)


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


class ConfigSource(enum.IntEnum):
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


class ConfigType(enum.IntEnum):
    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


# Kafka's ConfigDef types where a Python type would not say (int is INT or LONG).
CONFIG_TYPES: Final = {
    "segment.bytes": ConfigType.INT,
    "segment.index.bytes": ConfigType.INT,
    "index.interval.bytes": ConfigType.INT,
    "max.message.bytes": ConfigType.INT,
    "cleanup.policy": ConfigType.LIST,
    "listeners": ConfigType.LIST,
    "advertised.listeners": ConfigType.LIST,
    "node.id": ConfigType.INT,
    "num.partitions": ConfigType.INT,
    "default.replication.factor": ConfigType.INT,
    "socket.request.max.bytes": ConfigType.INT,
    "offsets.topic.num.partitions": ConfigType.INT,
    "offsets.topic.replication.factor": ConfigType.SHORT,
    "zookeeper.session.timeout.ms": ConfigType.INT,
    "zookeeper.connection.timeout.ms": ConfigType.INT,
    "controlled.shutdown.max.retries": ConfigType.INT,
    "group.initial.rebalance.delay.ms": ConfigType.INT,
    "group.min.session.timeout.ms": ConfigType.INT,
    "group.max.session.timeout.ms": ConfigType.INT,
    "log.segment.bytes": ConfigType.INT,
    "log.index.size.max.bytes": ConfigType.INT,
    "log.index.interval.bytes": ConfigType.INT,
    "message.max.bytes": ConfigType.INT,
    "log.cleanup.policy": ConfigType.LIST,
    "min.insync.replicas": ConfigType.INT,
    "log.cleaner.threads": ConfigType.INT,
    "producer.id.expiration.ms": ConfigType.INT,
    "offset.metadata.max.bytes": ConfigType.INT,
    "transaction.state.log.num.partitions": ConfigType.INT,
    "transaction.state.log.replication.factor": ConfigType.SHORT,
    "transaction.state.log.min.isr": ConfigType.INT,
    "transaction.state.log.segment.bytes": ConfigType.INT,
    "transaction.max.timeout.ms": ConfigType.INT,
    "transactional.id.expiration.ms": ConfigType.INT,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ConfigType.INT,
    "transaction.remove.expired.transaction.cleanup.interval.ms": ConfigType.INT,
}
_PYTHON_TYPES: Final = {bool: ConfigType.BOOLEAN, int: ConfigType.LONG, float: ConfigType.DOUBLE, str: ConfigType.STRING}

# The broker property whose value is a topic setting's default (the first of its
# synonyms, the one in the topic setting's own unit).
TOPIC_TO_BROKER: Final = {topic: name for name, topic in reversed(BROKER_TO_TOPIC.items())}

_LOG_CONFIG_FIELDS: Final = {f.metadata["kafka"]: f.name for f in dataclasses.fields(LogConfig) if f.metadata["kafka"]}
_BROKER_FIELDS: Final = {f.metadata["kafka"]: f.name for f in dataclasses.fields(BrokerConfig) if f.metadata["kafka"]}
_BUILTIN_TOPIC: Final = LogConfig().to_properties()

# Kafka's synonyms of a broker property, its own name first (KafkaConfig's brokerSynonyms).
SYNONYM_GROUPS: Final = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
}
# Kafka's defaults of those synonyms: the ms and minutes ones have none (null), and neither
# has log.flush.interval.ms (Strom's built-in values are the effective ones).
KAFKA_DEFAULTS: Final[dict[str, str | None]] = {
    "log.retention.ms": None, "log.retention.minutes": None, "log.retention.hours": "168",
    "log.roll.ms": None, "log.roll.hours": "168", "log.flush.interval.ms": None,
}

# Python logging level names in Log4j's words.
_LOG4J_LEVELS: Final = {"WARNING": "WARN", "CRITICAL": "FATAL", "NOTSET": "ALL"}


async def handle(broker: Broker, request: Request) -> Message:
    body = request.body
    assert isinstance(body, DescribeConfigsRequest)
    version = request.api_version
    results = []
    authorizer = broker.authorizer
    for resource in body.resources:
        if authorizer is not None and (refusal := config_refusal(
                authorizer, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)):
            results.append(DescribeConfigsResult(refusal, refusal.message, resource.resource_type,
                                                 resource.resource_name, ()))
            continue
        try:
            zk_overrides = await _cluster_overrides(broker, resource)
        except KafkaException as exc:
            results.append(DescribeConfigsResult(ErrorCode(exc.error_code or ErrorCode.UNKNOWN_SERVER_ERROR), "",
                                                 resource.resource_type, resource.resource_name, ()))
            continue
        result = _describe(broker, resource, zk_overrides)
        configs = tuple(
            _for_version(entry, version, body.include_synonyms, body.include_documentation)
            for entry in result.configs
        )
        results.append(dataclasses.replace(result, configs=configs))
    return DescribeConfigsResponse(results=tuple(results))


async def _cluster_overrides(broker: Broker, resource: DescribeConfigsResource) -> dict[str, str] | None:
    """A cluster keeps topic configs in ZooKeeper (/config/topics/<t>): any broker answers from
    there, hosting the topic or not, as Kafka's ZooKeeper mode. None: not a cluster's topic."""
    if broker.cluster is None or resource.resource_type != ResourceType.TOPIC:
        return None
    if broker.metadata.get(resource.resource_name) is None:
        return None  # unknown: topic_configs answers it
    return await broker.cluster.read_topic_config(resource.resource_name)


def _describe(broker: Broker, resource: DescribeConfigsResource,
              zk_overrides: dict[str, str] | None = None) -> DescribeConfigsResult:
    kind, name = resource.resource_type, resource.resource_name
    try:
        if kind == ResourceType.TOPIC:
            entries = topic_configs(broker, name, zk_overrides)
        elif kind == ResourceType.BROKER:
            entries = broker_configs(broker) if broker_id(broker, name, allow_empty=True) is not None \
                else dynamic_default_configs(broker)
        elif kind == ResourceType.BROKER_LOGGER:
            broker_id(broker, name, allow_empty=False)
            entries = logger_configs()
        else:
            raise TopicError(ErrorCode.INVALID_REQUEST, f"unsupported resource type {kind}")
    except TopicError as exc:
        # Kafka 3.9 answers "" whatever the error (its words go to its log only).
        logger.debug("DescribeConfigs %s %r: %s", kind, name, exc)
        return DescribeConfigsResult(exc.error_code, "", kind, name, ())
    keys = resource.configuration_keys
    if keys:
        entries = [entry for entry in entries if entry.name in keys]
    return DescribeConfigsResult(ErrorCode.NONE, "", kind, name, tuple(entries))


def broker_id(broker: Broker, name: str, *, allow_empty: bool) -> int | None:
    """This node's id from a BROKER resource name; None for "" (the cluster default)."""
    if not name and allow_empty:
        return None
    try:
        node = int(name)
    except ValueError:
        raise TopicError(ErrorCode.INVALID_REQUEST, f"broker id must be an integer, not {name!r}") from None
    if node != broker.node_id:
        expected = f"{broker.node_id} or empty string" if allow_empty else str(broker.node_id)
        raise TopicError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {expected}, but received {name}")
    return node


def topic_configs(broker: Broker, topic: str,
                  zk_overrides: dict[str, str] | None = None) -> list[DescribeConfigsResourceResult]:
    """A topic's every setting; ``zk_overrides``: a cluster's, as ZooKeeper holds them."""
    validate_topic_name(topic)
    if broker.metadata.get(topic) is None:
        raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic!r}")
    if zk_overrides is not None:
        overrides = zk_overrides
        effective = broker.log_manager.default_config.with_overrides(overrides).to_properties()
    else:
        overrides = broker.log_manager.topic_overrides.get(topic, {})
        effective = broker.log_manager.topic_config(topic).to_properties()
    return [
        _entry(name, value, topic_synonyms(broker, name, value, overrides), read_only=False,
               kind=config_type(name, _default(name)))
        for name, value in effective.items()
    ]


def topic_synonyms(
    broker: Broker, name: str, value: str, overrides: dict[str, str]
) -> list[DescribeConfigsSynonym]:
    """The layers that set topic setting ``name``, highest first (the first is its source):
    the topic's override, then its broker property in each layer that sets it."""
    synonyms = []
    if name in overrides:
        synonyms.append(DescribeConfigsSynonym(name, value, ConfigSource.DYNAMIC_TOPIC_CONFIG))
    broker_name = TOPIC_TO_BROKER[name]
    synonyms += _broker_layers(broker, broker_name, broker.config.log.to_properties()[name], _BUILTIN_TOPIC[name])
    return synonyms


def topic_source(synonyms: list[DescribeConfigsSynonym]) -> ConfigSource:
    """A setting's source: its highest layer; DEFAULT_CONFIG when no layer is listed."""
    return ConfigSource(synonyms[0].source) if synonyms else ConfigSource.DEFAULT_CONFIG


def _broker_layers(broker: Broker, name: str, static: str, builtin: str) -> list[DescribeConfigsSynonym]:
    """Broker property ``name`` and its synonyms in each layer that sets them, as Kafka's
    configSynonyms: dynamic, dynamic default, static (given in server.properties /
    ``--override``; for a config built in code, different from the default), default (only
    where Kafka has one: ``log.retention.hours``, not ``log.retention.ms``); then every
    layer before the first that names ``name`` itself is dropped."""
    dynamic = broker.dynamic_config
    group = SYNONYM_GROUPS.get(name, (name,))
    given = dict(broker.config.given)
    static_layer = {n: given[n] for n in group if n in given}
    if not static_layer and static != builtin:
        static_layer[name] = static
    defaults = {n: KAFKA_DEFAULTS.get(n, builtin if n == name else None) for n in group}
    layers: list[DescribeConfigsSynonym] = []
    for values, source in ((dynamic.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                           (dynamic.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                           (static_layer, ConfigSource.STATIC_BROKER_CONFIG),
                           (defaults, ConfigSource.DEFAULT_CONFIG)):
        dynamic_layer = source in (ConfigSource.DYNAMIC_BROKER_CONFIG, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        layers += [DescribeConfigsSynonym(n, values[n] if dynamic_layer else _nullable(values[n] or ""), source)
                   for n in group if n in values and (values[n] is not None or source != ConfigSource.DEFAULT_CONFIG)]
    while layers and layers[0].name != name:
        layers.pop(0)
    return layers


def broker_configs(broker: Broker) -> list[DescribeConfigsResourceResult]:
    """Every broker property: its effective value, the layers that set it, dynamic or not."""
    effective, static, defaults = broker.dynamic_config.current, broker.config, BrokerConfig()
    rows: list[tuple[str, str, str, str, ConfigType]] = []
    for item in dataclasses.fields(BrokerConfig):
        name = item.metadata["kafka"]
        if name:
            default = getattr(defaults, item.name)
            kafka = NO_EFFECT_CONFIGS.get(name)  # Kafka's type where Kafka has the setting (PASSWORD: hidden)
            rows.append((name, _format(getattr(effective, item.name)), _format(getattr(static, item.name)),
                         _format(default), ConfigType[kafka.type] if kafka else config_type(name, default)))
    current, static_log = effective.log.to_properties(), static.log.to_properties()
    for topic_name, name in TOPIC_TO_BROKER.items():
        kind = CONFIG_TYPES.get(name) or config_type(topic_name, _default(topic_name))
        rows.append((name, current[topic_name], static_log[topic_name], _BUILTIN_TOPIC[topic_name], kind))
    entries = []
    for name, value, static_value, default, kind in rows:
        layers = _broker_layers(broker, name, static_value, default)
        # A property no layer sets and without a default of its own (log.retention.ms when
        # only log.retention.hours applies) is null, as Kafka describes it.
        shown = _nullable(value) if layers or name not in KAFKA_DEFAULTS else None
        read_only = name not in DYNAMIC_CONFIGS and name not in NO_EFFECT_CONFIGS  # Kafka's dynamic ones are not
        entries.append(_entry(name, shown, layers, read_only=read_only, kind=kind))
    dynamic = broker.dynamic_config
    kept = (set(NO_EFFECT_CONFIGS) - PROPERTY_NAMES) | {  # Strom's own are listed above, once
        n for n in (*dynamic.per_broker, *dynamic.cluster_default) if is_kept_only(n)}
    entries += [_kept_entry(broker, name, per_broker=True) for name in kept]
    return sorted(entries, key=lambda entry: entry.name)


def dynamic_default_configs(broker: Broker) -> list[DescribeConfigsResourceResult]:
    """The BROKER resource "": the cluster-wide dynamic defaults only, as Kafka lists them."""
    return [
        _kept_entry(broker, name, per_broker=False) if is_kept_only(name) else
        _entry(name, value, [DescribeConfigsSynonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)],
               read_only=False, kind=_broker_type(name))
        for name, value in sorted(broker.dynamic_config.cluster_default.items())
    ]


def _kept_entry(broker: Broker, name: str, *, per_broker: bool) -> DescribeConfigsResourceResult:
    """A config Strom keeps with no effect, as Kafka describes it: a Kafka dynamic config
    with its type and Kafka's default below the dynamic layers; a listener-prefixed one,
    read-only, with its base config's type and default; an unknown name read-only, of
    unknown type and so sensitive (no value shown), as Kafka's ConfigHelper treats it."""
    dynamic = broker.dynamic_config
    match = LISTENER_CONFIG.fullmatch(name)
    setting = NO_EFFECT_CONFIGS.get(match[1] if match is not None else name)
    kind = ConfigType[setting.type] if setting is not None else ConfigType.UNKNOWN
    layers = [(dynamic.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG)] if per_broker else []
    layers.append((dynamic.cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
    synonyms = [DescribeConfigsSynonym(name, layer[name], source) for layer, source in layers if name in layer]
    if setting is not None and per_broker:
        base = match[1] if match is not None else name
        synonyms.append(DescribeConfigsSynonym(base, setting.default, ConfigSource.DEFAULT_CONFIG))
    return _entry(name, synonyms[0].value, synonyms, read_only=name not in NO_EFFECT_CONFIGS, kind=kind,
                  sensitive=kind in (ConfigType.PASSWORD, ConfigType.UNKNOWN))


def _broker_type(name: str) -> ConfigType:
    topic_name = BROKER_TO_TOPIC.get(name)
    if topic_name is not None:
        return CONFIG_TYPES.get(name) or config_type(topic_name, _default(topic_name))
    return config_type(name, getattr(BrokerConfig(), _BROKER_FIELDS[name]))


def logger_configs() -> list[DescribeConfigsResourceResult]:
    loggers = [logging.getLogger()] + [
        found
        for name, found in sorted(logging.Logger.manager.loggerDict.items())
        if isinstance(found, logging.Logger) and name.split(".")[0] == "strom"
    ]
    return [
        DescribeConfigsResourceResult(
            name="root" if found is logging.getLogger() else found.name,
            value=_log4j_level(found.getEffectiveLevel()),
            read_only=True,
            config_source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG,
            config_type=ConfigType.STRING,
        )
        for found in loggers
    ]


def config_type(name: str, default: object) -> ConfigType:
    """Kafka's type of a setting: from the table, else from its default's Python type."""
    return CONFIG_TYPES.get(name) or _PYTHON_TYPES.get(type(default), ConfigType.UNKNOWN)


def _default(topic_setting: str) -> object:
    """The built-in default of a topic setting, by its Kafka name."""
    return getattr(LogConfig(), _LOG_CONFIG_FIELDS[topic_setting])


def _entry(
    name: str, value: str | None, synonyms: list[DescribeConfigsSynonym], *, read_only: bool, kind: ConfigType,
    sensitive: bool | None = None,
) -> DescribeConfigsResourceResult:
    if sensitive is None:
        sensitive = "password" in name or kind is ConfigType.PASSWORD
    if sensitive:
        value = None
        synonyms = [dataclasses.replace(s, value=None) for s in synonyms]
    return DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=read_only,
        config_source=topic_source(synonyms),
        is_sensitive=sensitive,
        synonyms=tuple(synonyms),
        config_type=kind,
        documentation=DOCUMENTATION.get(name),
    )


def _for_version(
    entry: DescribeConfigsResourceResult, version: int, synonyms: bool, documentation: bool
) -> DescribeConfigsResourceResult:
    """Fit one entry to the request: synonyms and docs only when asked. v0's ``is_default``
    is false for every config, default or not, as Kafka 3.9 sends it (its ConfigHelper
    never sets the field since the generated messages replaced the hand-written ones)."""
    return dataclasses.replace(
        entry,
        is_default=False,
        synonyms=entry.synonyms if synonyms and version >= 1 else (),
        documentation=entry.documentation if documentation else None,
    )


def _format(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _nullable(value: str) -> str | None:
    """Kafka describes an unset string property (no default) as null."""
    return value or None


def _log4j_level(level: int) -> str:
    name = logging.getLevelName(level)
    return _LOG4J_LEVELS.get(name, name)


# One line each, after Kafka's documentation (include_documentation, v3+).
DOCUMENTATION: Final = {
    "segment.bytes": "The segment file size for the log; retention and cleaning work a segment at a time.",
    "segment.ms": "The time after which a segment is rolled even if it is not full.",
    "segment.index.bytes": "The size of the index that maps offsets to file positions.",
    "index.interval.bytes": "How often (in bytes) an entry is added to the offset index.",
    "flush.messages": "Force an fsync of the log after this many messages.",
    "flush.ms": "Force an fsync of the log after this much time.",
    "retention.ms": "How long a log is kept before old segments are deleted (cleanup.policy delete).",
    "retention.bytes": "The size a partition may grow to before old segments are deleted; -1 for no limit.",
    "cleanup.policy": "delete, compact, or both (comma-separated): how old segments are discarded.",
    "message.timestamp.type": "CreateTime or LogAppendTime: which timestamp records carry.",
    "max.message.bytes": "The largest record batch size allowed in this topic.",
    "file.delete.delay.ms": "The time to wait before deleting a file from the filesystem.",
    "compression.type": "The final compression of the topic's data; producer keeps the producer's codec.",
    "delete.retention.ms": "How long delete tombstones are kept for log compacted topics.",
    "min.compaction.lag.ms": "The minimum time a message stays uncompacted in the log.",
    "max.compaction.lag.ms": "The maximum time a message stays ineligible for compaction.",
    "min.cleanable.dirty.ratio": "The dirty fraction of the log at which the cleaner compacts it.",
    "preallocate": "Preallocate each new segment file on disk.",
    "node.id": "The id of this broker.",
    "listeners": "The addresses the broker listens on.",
    "advertised.listeners": "The addresses given to clients, if different from listeners.",
    "log.dirs": "The directory the log data is kept in (Strom uses the first).",
    "cluster.id": "The cluster id; made once and kept in meta.properties when not set.",
    "num.partitions": "The default number of partitions of a new topic.",
    "default.replication.factor": "The default replication factor of a new topic.",
    "auto.create.topics.enable": "Create a topic when a client asks for its metadata.",
    "delete.topic.enable": "Allow deleting topics.",
    "socket.request.max.bytes": "The largest request the broker accepts.",
    "connections.max.idle.ms": "Idle connections are closed after this long.",
    "log.retention.check.interval.ms": "How often retention is applied.",
    "log.flush.scheduler.interval.ms": "How often logs are checked for flush.ms.",
    "log.flush.offset.checkpoint.interval.ms": "How often recovery points are checkpointed.",
    "offsets.topic.num.partitions": "The number of partitions of __consumer_offsets.",
    "group.initial.rebalance.delay.ms": "How long the first rebalance of a new group waits for more members.",
    "group.min.session.timeout.ms": "The smallest session timeout a member may ask for.",
    "group.max.session.timeout.ms": "The largest session timeout a member may ask for.",
}
