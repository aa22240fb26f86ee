"""DynamicBrokerConfig: broker settings changed at run time (Kafka's KIP-226), kept across restarts.

Two dynamic layers sit over the static config (server.properties, ``--override``, flags),
highest first, as in Kafka's DynamicBrokerConfig:

1. per-broker: AlterConfigs on the BROKER resource named by this broker's id;
2. cluster-wide default: the BROKER resource with the empty name.

A topic setting resolves as: topic override > per-broker > cluster default > static >
Kafka's default. What may be set is what Kafka 3.9 takes (DynamicBrokerConfig.validateConfigs):

- the dynamic configs Strom has (``DYNAMIC_CONFIGS``: the first broker synonym of each
  topic default, ``log.retention.ms`` not ``log.retention.hours`` as Kafka, the log
  cleaner's settings and ``producer.id.expiration.ms``), which apply at once;
- Kafka's dynamic configs Strom has no equivalent for (thread pools, connection quotas,
  SASL/SSL: ``kafka_broker_configs.NO_EFFECT_CONFIGS``), listener-prefixed configs
  (``listener.name.<l>.<config>``) and names nobody knows: kept, persisted and described
  as Kafka describes them, with no effect (one INFO line per name says so). Their values
  get Kafka's type checks and, for thread pools, its at-most-double-or-half rule;
- refused with Kafka's message (INVALID_REQUEST): a name Kafka or Strom knows that is not
  dynamic, an SSL key/trust store without the listener prefix, a per-broker config on the
  cluster default, a bad value. ``listeners``/``advertised.listeners`` are dynamic in
  Kafka but not in Strom: refused with Strom's own message.

A change applies at once: the LogManager's topic defaults (and so every log that does
not override the setting), the producer-state expiry of every log and, for
``log.cleaner.*``, the cleaner threads, restarted as Kafka's LogCleaner.reconfigure does.

On disk, single node (``FileConfigStore``): ``<data-dir>/broker-configs/<entity>``, where
``<entity>`` is the broker id or ``<default>`` (the names ZooKeeper uses under
``/config/brokers/``). Each file is Java-properties text holding that layer's settings
only, ``name=value`` per line (``#`` comments), e.g. ``log.retention.ms=3600000``; a
missing file is an empty layer. A file is replaced whole, atomically (temp file, fsync,
rename, fsync of the directory), so a crash leaves the old layer or the new one.
Invariant: a file holds names that could be set dynamically, with values valid when
written; a setting that is not (edited by hand, or from another version) is logged and
ignored at load, as Kafka ignores invalid dynamic configs, and never stops the broker.
Names and values are escaped as in Java's Properties (``\\``, ``\\n``, ``\\=`` ...), as
any name a client sends is kept: a line break in a value cannot make a second setting.
The directory is not log data: the LogManager does not count it when it tells a new data
directory from an unclean shutdown. In cluster
mode the store is ZooKeeper's ``/config/brokers/<id>`` and ``/config/brokers/<default>``:
another ``DynamicConfigStore`` behind the same two calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

from strom.broker.config import PROPERTY_NAMES, BrokerConfig, ConfigError
from strom.broker.kafka_broker_configs import (
    CLUSTER_LEVEL_LISTENER_CONFIGS,
    KAFKA_STATIC_CONFIGS,
    LISTENER_CONFIG,
    NO_EFFECT_CONFIGS,
    THREAD_POOL_CONFIGS,
    Scope,
)
from strom.compaction.log_cleaner import CleanerConfig
from strom.protocol.error_codes import ErrorCode
from strom.storage.fs import FileSystem, read_file, write_file_atomically
from strom.storage.log_manager import BROKER_CONFIGS_DIR
from strom.storage.producer_state import ProducerStateManagerConfig

if TYPE_CHECKING:
    from strom.compaction.log_cleaner import LogCleaner
    from strom.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

DEFAULT_ENTITY: Final = "<default>"  # ZooKeeper's name for the cluster-wide default
STORE_DIR: Final = BROKER_CONFIGS_DIR  # the LogManager knows it holds no log data

# Kafka's DynamicLogConfig.ReconfigurableConfigs (the first synonym of each topic default)
# and LogCleaner.ReconfigurableConfigs, where Strom has the setting. As Kafka 3.9 answers:
# log.message.downconversion.enable is dynamic, log.message.format.version is not.
DYNAMIC_TOPIC_DEFAULTS: Final = frozenset({
    "log.segment.bytes", "log.roll.ms", "log.index.size.max.bytes", "log.index.interval.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.retention.ms", "log.retention.bytes",
    "log.cleanup.policy", "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.timestamp.difference.max.ms", "log.segment.delete.delay.ms",
    "compression.type", "log.preallocate", "message.max.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio", "min.insync.replicas", "log.message.downconversion.enable",
})
DYNAMIC_CLEANER_CONFIGS: Final = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
})
# Kafka's DynamicProducerStateManagerConfig (transaction.partition.verification.enable: not in Strom).
DYNAMIC_PRODUCER_STATE_CONFIGS: Final = frozenset({"producer.id.expiration.ms"})
DYNAMIC_CONFIGS: Final = DYNAMIC_TOPIC_DEFAULTS | DYNAMIC_CLEANER_CONFIGS | DYNAMIC_PRODUCER_STATE_CONFIGS


class DynamicConfigError(ValueError):
    """A dynamic config change refused; the message is Kafka's, sent with ``error_code``."""

    error_code: ErrorCode = ErrorCode.INVALID_REQUEST


class PasswordNotStorableError(DynamicConfigError):
    """A password config for this broker: Kafka's ZooKeeper mode stores those only encrypted
    with ``password.encoder.secret``, and refuses them without one; Strom has no encoder."""

    error_code = ErrorCode.INVALID_CONFIG


class DynamicConfigStore(Protocol):
    """Where the two dynamic layers live: one settings map per entity (a broker id or
    ``DEFAULT_ENTITY``). Reads happen once at startup; each write replaces an entity's map."""

    def read(self, entity: str) -> dict[str, str]: ...

    def write(self, entity: str, configs: Mapping[str, str]) -> None: ...


class FileConfigStore:
    """The single-node store: one properties file per entity in the data directory."""

    def __init__(self, data_dir: str, fs: FileSystem | None = None) -> None:
        self.directory = os.path.join(data_dir, STORE_DIR)
        self.fs = fs or FileSystem()

    def read(self, entity: str) -> dict[str, str]:
        path = os.path.join(self.directory, entity)
        if not self.fs.exists(path):
            return {}
        return read_properties(read_file(self.fs, path).decode("utf-8"))

    def write(self, entity: str, configs: Mapping[str, str]) -> None:
        self.fs.makedirs(self.directory)
        lines = [f"# Strom dynamic broker configs of {entity} (Kafka property names)"]
        lines += [f"{_escape(name, key=True)}={_escape(value, key=False)}" for name, value in sorted(configs.items())]
        write_file_atomically(self.fs, os.path.join(self.directory, entity), ("\n".join(lines) + "\n").encode("utf-8"))


class DynamicBrokerConfig:
    """The dynamic layers of one broker, and the parts they reconfigure when they change.

    ``current`` is the effective BrokerConfig (static with both layers over it);
    ``static`` stays what the broker started with.
    """

    def __init__(self, static: BrokerConfig, store: DynamicConfigStore, log_manager: LogManager,
                 log_cleaner: LogCleaner) -> None:
        self.static = static
        self.store = store
        self.log_manager = log_manager
        self.log_cleaner = log_cleaner
        self.per_broker: dict[str, str] = {}
        self.cluster_default: dict[str, str] = {}
        self.current = static
        self._lock = asyncio.Lock()
        self._told: set[tuple[str, str]] = set()  # (name, value) logged as having no effect

    @property
    def entity(self) -> str:
        return str(self.static.node_id)

    def layer(self, *, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.cluster_default

    def load(self) -> None:
        """Read both layers from the store and apply them (before the logs are loaded)."""
        self.cluster_default = self._valid_part(self.store.read(DEFAULT_ENTITY), per_broker=False)
        self.per_broker = self._valid_part(self.store.read(self.entity), per_broker=True)
        self.current = self._resolve(self.cluster_default, self.per_broker)
        self._apply_to_logs()
        self.log_cleaner.reconfigure(self._cleaner_config(self.current))  # threads not started yet
        self._log_no_effect({**self.cluster_default, **self.per_broker})
        if self.per_broker or self.cluster_default:
            logger.info("dynamic broker configs: %s (this broker), %s (cluster default)",
                        _for_log(self.per_broker), _for_log(self.cluster_default))

    def validate(self, configs: Mapping[str, str], *, per_broker: bool) -> BrokerConfig:
        """The effective config ``configs`` would make as the given layer; raises DynamicConfigError.

        Beyond each value, a change checks what Kafka's reconfigurables check: a thread
        count (the cleaner's, and Kafka's pools Strom keeps without using) may at most double
        or halve in one step (LogCleaner and DynamicThreadPool.validateReconfiguration).
        """
        effective = self._effective(configs, per_broker=per_broker)
        threads, current = effective.log_cleaner_threads, self.current.log_cleaner_threads
        if threads < current / 2:
            raise _reconfiguration_refused(
                f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if threads > current * 2:
            raise _reconfiguration_refused(
                f"Log cleaner threads cannot be increased to more than double the current value {current}")
        for name in sorted(THREAD_POOL_CONFIGS):
            self._check_thread_pool(name, configs, per_broker=per_broker)
        return effective

    def _check_thread_pool(self, name: str, configs: Mapping[str, str], *, per_broker: bool) -> None:
        old_text = self.kafka_only_value(name)
        if per_broker:
            new_text = configs.get(name, self.cluster_default.get(name, old_text))
        else:
            new_text = self.per_broker.get(name, configs.get(name, old_text))
        assert old_text is not None and new_text is not None  # every pool has a Kafka default
        old, new = int(old_text.strip()), int(new_text.strip())
        if new == old:
            return
        prefix = f"Dynamic thread count update validation failed for {name}={new}"
        if new < old / 2:
            raise _reconfiguration_refused(f"{prefix}, value should be at least half the current value {old}")
        if new > old * 2:
            raise _reconfiguration_refused(f"{prefix}, value should not be greater than double the current value {old}")

    async def update(self, configs: Mapping[str, str], *, per_broker: bool) -> None:
        """Replace one layer: validate, persist, then apply to the logs and the cleaner."""
        async with self._lock:
            effective = self.validate(configs, per_broker=per_broker)
            passwords = [name for name in configs if _kafka_type(name) == "PASSWORD"]
            if passwords:  # only when stored, as Kafka: validate_only takes them
                raise PasswordNotStorableError(
                    f"Invalid config value for resource ConfigResource(type=BROKER, name='{self.entity}'): "
                    "Password encoder secret not configured")
            before = dict(self.layer(per_broker=per_broker))
            self.store.write(self.entity if per_broker else DEFAULT_ENTITY, configs)
            if per_broker:
                self.per_broker = dict(configs)
            else:
                self.cluster_default = dict(configs)
            self._log_no_effect({name: value for name, value in configs.items() if before.get(name) != value})
            cleaner_before = self._cleaner_config(self.current)
            self.current = effective
            self._apply_to_logs()
            cleaner_after = self._cleaner_config(effective)
            if cleaner_after != cleaner_before:
                await asyncio.to_thread(self.log_cleaner.reconfigure, cleaner_after)
            logger.info("dynamic %s configs are now %s",
                        f"broker {self.entity}" if per_broker else "cluster default", _for_log(configs))

    # -- inside ----------------------------------------------------------------------------
    def _log_no_effect(self, configs: Mapping[str, str]) -> None:
        """One INFO line per name and value Strom keeps and reports but does not use."""
        for name, value in sorted(configs.items()):
            if is_kept_only(name) and (name, value) not in self._told:
                self._told.add((name, value))
                what = ("a Kafka config Strom has no equivalent for" if name in NO_EFFECT_CONFIGS
                        else "a listener config" if LISTENER_CONFIG.fullmatch(name)
                        else "not a config Kafka defines: kept as a custom config")
                logger.info("dynamic broker config %s is kept and reported but has no effect in Strom (%s)", name, what)

    def _effective(self, configs: Mapping[str, str], *, per_broker: bool) -> BrokerConfig:
        """Names dynamic, values valid alone and together: the config the layer would make.

        Kafka's DynamicBrokerConfig.validateConfigs, in its order: names Kafka (or Strom)
        knows but cannot change at run time; SSL key and trust stores without a listener
        prefix; each value of a name Kafka knows by its type; per-broker configs at the
        cluster default. Names nobody knows pass, as in Kafka.
        """
        static_only = sorted(name for name in configs if _is_static(name))
        if static_only:
            raise DynamicConfigError(f"Cannot update these configs dynamically: Set({', '.join(static_only)})")
        listeners = sorted(name for name in configs if name in STROM_STATIC_LISTENER_CONFIGS)
        if listeners:
            raise DynamicConfigError(
                f"Strom cannot change these configs at run time (set them in server.properties and restart): "
                f"Set({', '.join(listeners)})")
        listener_only = sorted(name for name in configs if _scope(name) is Scope.LISTENER and name in NO_EFFECT_CONFIGS)
        if listener_only:
            raise DynamicConfigError("These security configs can be dynamically updated only per-listener using "
                                     f"the listener prefix: HashSet({', '.join(listener_only)})")
        for name, value in configs.items():
            _check_type(name, value)
        if not per_broker:
            broker_only = sorted(name for name in configs if _scope(name) is not Scope.CLUSTER)
            if broker_only:
                raise DynamicConfigError("Cannot update these configs at default cluster level, broker id must be "
                                         f"specified: Set({', '.join(broker_only)})")
        if per_broker:
            effective = self._resolve(self.cluster_default, configs)
        else:
            effective = self._resolve(configs, self.per_broker)
        self._cleaner_config(effective)
        return effective

    def kafka_only_value(self, name: str) -> str | None:
        """The value of a config Strom keeps without using: the highest layer's, else Kafka's default."""
        for layer in (self.per_broker, self.cluster_default):
            if name in layer:
                return layer[name]
        setting = NO_EFFECT_CONFIGS.get(name)
        return setting.default if setting is not None else None

    def _resolve(self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        """The static config with both layers' settings Strom has over it (the rest are kept only)."""
        try:
            return self.static.with_properties(_strom_part(cluster_default)).with_properties(_strom_part(per_broker))
        except ConfigError as exc:
            raise DynamicConfigError(str(exc)) from None

    def _cleaner_config(self, config: BrokerConfig) -> CleanerConfig:
        try:
            return CleanerConfig(
                enable=config.log_cleaner_enable, threads=config.log_cleaner_threads,
                dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
                io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
                io_max_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                backoff_ms=config.log_cleaner_backoff_ms)
        except ValueError as exc:
            raise DynamicConfigError(str(exc)) from None

    def _apply_to_logs(self) -> None:
        """New topic defaults and producer-state settings for the LogManager and every log
        (the config objects are frozen: each log gets new ones).

        Runs on the event loop, as every topic config change does, so no handler sees a
        half-applied change; cleaner threads read ``log.config`` whole."""
        manager = self.log_manager
        manager.default_config = self.current.log
        producer_state = ProducerStateManagerConfig(self.current.producer_id_expiration_ms)
        manager.producer_state_config = producer_state
        for (topic, _), log in list(manager.logs.items()):
            log.config = manager.topic_config(topic)
            log.producer_state.config = producer_state

    def _valid_part(self, stored: Mapping[str, str], *, per_broker: bool) -> dict[str, str]:
        """The settings of a stored layer that are still valid; the rest logged and ignored."""
        what = "broker" if per_broker else "default cluster"
        kept: dict[str, str] = {}
        for name, value in stored.items():
            try:
                self._effective({**kept, name: value}, per_broker=per_broker)
            except DynamicConfigError as exc:
                logger.error("dynamic %s config %s=%s ignored: %s", what, name, value, exc)
                continue
            kept[name] = value
        return kept


# Dynamic in Kafka, static in Strom: its listeners cannot change without a restart.
STROM_STATIC_LISTENER_CONFIGS: Final = frozenset({"listeners", "advertised.listeners"})
_KAFKA_INTEGER_RANGES: Final = {"INT": 2**31, "SHORT": 2**15, "LONG": 2**63}
_JAVA_INTEGER: Final = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.parseInt takes


def _is_static(name: str) -> bool:
    """A name Kafka or Strom knows that cannot be changed at run time."""
    if name in DYNAMIC_CONFIGS or name in NO_EFFECT_CONFIGS or name in STROM_STATIC_LISTENER_CONFIGS:
        return False
    return name in PROPERTY_NAMES or name in KAFKA_STATIC_CONFIGS


def is_kept_only(name: str) -> bool:
    """A name kept and reported with no effect: a Kafka dynamic config Strom has no
    equivalent for, a listener-prefixed config or a name nobody knows."""
    return name not in PROPERTY_NAMES


def _scope(name: str) -> Scope:
    """Where Kafka lets ``name`` be set; a listener-prefixed config is per broker unless its
    base config is one of the cluster-wide listener configs; unknown names anywhere."""
    match = LISTENER_CONFIG.fullmatch(name)
    if match is not None:
        return Scope.CLUSTER if match[1] in CLUSTER_LEVEL_LISTENER_CONFIGS else Scope.PER_BROKER
    setting = NO_EFFECT_CONFIGS.get(name)
    return setting.scope if setting is not None else Scope.CLUSTER


def _check_type(name: str, value: str) -> None:
    """Kafka's ConfigDef check of a config Strom keeps without using (of its base config
    for a listener-prefixed name); Strom's own configs are checked when resolved."""
    match = LISTENER_CONFIG.fullmatch(name)
    base = match[1] if match is not None else name
    setting = NO_EFFECT_CONFIGS.get(base)
    if setting is None:
        return
    text = value.strip()
    prefix = f"Invalid value {value} for configuration {base}"
    if setting.type == "BOOLEAN":
        if text.lower() not in ("true", "false"):
            raise DynamicConfigError(f"{prefix}: Expected value to be either true or false")
    elif setting.type in _KAFKA_INTEGER_RANGES:
        bound = _KAFKA_INTEGER_RANGES[setting.type]
        number = int(text) if _JAVA_INTEGER.fullmatch(text) else bound  # not a number: out of range
        if not -bound <= number < bound:
            raise DynamicConfigError(f"{prefix}: Not a number of type {setting.type}")
        if setting.minimum is not None and number < setting.minimum:
            raise DynamicConfigError(f"{prefix}: Value must be at least {setting.minimum}")
    elif setting.type == "DOUBLE":
        try:
            float(text)
        except ValueError:
            raise DynamicConfigError(f"{prefix}: Not a number of type DOUBLE") from None


def _kafka_type(name: str) -> str | None:
    """Kafka's type of a config Strom keeps without using (its base config's, for a
    listener-prefixed name); None for Strom's own configs and unknown names."""
    match = LISTENER_CONFIG.fullmatch(name)
    setting = NO_EFFECT_CONFIGS.get(match[1] if match is not None else name)
    return setting.type if setting is not None else None


def _for_log(configs: Mapping[str, str]) -> dict[str, str]:
    """A layer fit for the log: the values Kafka would call sensitive hidden (passwords, and
    names of unknown type: custom configs may hold secrets)."""
    def sensitive(name: str) -> bool:  # Kafka's passwords include Strom's own (ssl.keystore.key)
        kafka_type = _kafka_type(name)
        return kafka_type == "PASSWORD" or (kafka_type is None and name not in PROPERTY_NAMES)

    return {name: "[hidden]" if sensitive(name) else value for name, value in configs.items()}


def _strom_part(configs: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in configs.items() if name in PROPERTY_NAMES}


def _reconfiguration_refused(reason: str) -> DynamicConfigError:
    """Kafka's wording for a change a reconfigurable refuses (a ConfigException wrapped twice)."""
    return DynamicConfigError(f"Invalid value org.apache.kafka.common.config.ConfigException: {reason} "
                              "for configuration Invalid dynamic configuration")


_ESCAPES: Final = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}
_KEY_ESCAPES: Final = {**_ESCAPES, "=": "\\=", ":": "\\:", " ": "\\ ", "#": "\\#", "!": "\\!"}
_UNESCAPES: Final = {"n": "\n", "r": "\r", "t": "\t", "f": "\f"}


def _escape(text: str, *, key: bool) -> str:
    """Java Properties escaping: every character that would end or change the line's
    meaning; a value's leading space too (the reader strips it otherwise)."""
    table = _KEY_ESCAPES if key else _ESCAPES
    escaped = "".join(table.get(char, char) for char in text)
    if not key and escaped.startswith(" "):
        escaped = "\\" + escaped
    return escaped


def read_properties(text: str) -> dict[str, str]:
    """Java-properties lines as ``FileConfigStore`` writes them (and as a person would):
    ``#``/``!`` comments, the key up to the first unescaped ``=`` or ``:``, whitespace
    around it ignored, backslash escapes undone."""
    result: dict[str, str] = {}
    for line in text.splitlines():
        line = line.lstrip()
        if not line or line[0] in "#!":
            continue
        key: list[str] = []
        index = 0
        while index < len(line) and line[index] not in "=:":
            if line[index] == "\\" and index + 1 < len(line):
                index += 1
                key.append(_UNESCAPES.get(line[index], line[index]))
            else:
                key.append(line[index])
            index += 1
        result["".join(key).strip()] = _unescape(line[index + 1:].lstrip())
    return result


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            index += 1
            char = _UNESCAPES.get(text[index], text[index])
        out.append(char)
        index += 1
    return "".join(out)
