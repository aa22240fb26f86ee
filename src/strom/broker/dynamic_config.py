"""DynamicBrokerConfig: broker settings changed at run time (Kafka's KIP-226), kept across restarts.

Two dynamic layers sit over the static config (server.properties, ``--override``, flags),
highest first, as in Kafka's DynamicBrokerConfig:

1. per-broker: AlterConfigs on the BROKER resource named by this broker's id;
2. cluster-wide default: the BROKER resource with the empty name.

A topic setting resolves as: topic override > per-broker > cluster default > static >
Kafka's default. Only the settings Kafka lists as dynamic (``AllDynamicConfigs``) that
Strom has may be set: ``DYNAMIC_CONFIGS``, the first broker synonym of each topic default
(``log.retention.ms``, not ``log.retention.hours``, as Kafka), the log cleaner's settings
and ``producer.id.expiration.ms``. Anything else is refused with Kafka's message. A change
applies at once: the LogManager's topic defaults (and so every log that does not override
the setting), the producer-state expiry of every log and, for ``log.cleaner.*``, the
cleaner threads, restarted as Kafka's LogCleaner.reconfigure does.

On disk, single node (``FileConfigStore``): ``<data-dir>/broker-configs/<entity>``, where
``<entity>`` is the broker id or ``<default>`` (the names ZooKeeper uses under
``/config/brokers/``). Each file is Java-properties text holding that layer's settings
only, ``name=value`` per line (``#`` comments), e.g. ``log.retention.ms=3600000``; a
missing file is an empty layer. A file is replaced whole, atomically (temp file, fsync,
rename, fsync of the directory), so a crash leaves the old layer or the new one.
Invariant: a file holds names of ``DYNAMIC_CONFIGS`` with values valid when written; a
setting that is not (edited by hand, or from another version) is logged and ignored at
load, as Kafka ignores invalid dynamic configs, and never stops the broker. In cluster
mode the store is ZooKeeper's ``/config/brokers/<id>`` and ``/config/brokers/<default>``:
another ``DynamicConfigStore`` behind the same two calls.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

from strom.broker.config import PROPERTY_NAMES, BrokerConfig, ConfigError
from strom.compaction.log_cleaner import CleanerConfig
from strom.storage.config import parse_properties
from strom.storage.fs import FileSystem, read_file, write_file_atomically
from strom.storage.producer_state import ProducerStateManagerConfig

if TYPE_CHECKING:
    from strom.compaction.log_cleaner import LogCleaner
    from strom.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

DEFAULT_ENTITY: Final = "<default>"  # ZooKeeper's name for the cluster-wide default
STORE_DIR: Final = "broker-configs"

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
    """A dynamic config change refused; the message is Kafka's (sent as INVALID_REQUEST)."""


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
        return parse_properties(read_file(self.fs, path).decode("utf-8"))

    def write(self, entity: str, configs: Mapping[str, str]) -> None:
        self.fs.makedirs(self.directory)
        lines = [f"# Strom dynamic broker configs of {entity} (Kafka property names)"]
        lines += [f"{name}={value}" for name, value in sorted(configs.items())]
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
        if self.per_broker or self.cluster_default:
            logger.info("dynamic broker configs: %s (this broker), %s (cluster default)",
                        self.per_broker, self.cluster_default)

    def validate(self, configs: Mapping[str, str], *, per_broker: bool) -> BrokerConfig:
        """The effective config ``configs`` would make as the given layer; raises DynamicConfigError.

        Beyond each value, a change checks what Kafka's reconfigurables check: the cleaner
        thread count may at most double or halve in one step (LogCleaner.validateReconfiguration).
        """
        effective = self._effective(configs, per_broker=per_broker)
        threads, current = effective.log_cleaner_threads, self.current.log_cleaner_threads
        if threads < current / 2:
            raise DynamicConfigError(
                f"Log cleaner threads cannot be reduced to less than half the current value {current}")
        if threads > current * 2:
            raise DynamicConfigError(
                f"Log cleaner threads cannot be increased to more than double the current value {current}")
        return effective

    async def update(self, configs: Mapping[str, str], *, per_broker: bool) -> None:
        """Replace one layer: validate, persist, then apply to the logs and the cleaner."""
        async with self._lock:
            effective = self.validate(configs, per_broker=per_broker)
            self.store.write(self.entity if per_broker else DEFAULT_ENTITY, configs)
            if per_broker:
                self.per_broker = dict(configs)
            else:
                self.cluster_default = dict(configs)
            cleaner_before = self._cleaner_config(self.current)
            self.current = effective
            self._apply_to_logs()
            cleaner_after = self._cleaner_config(effective)
            if cleaner_after != cleaner_before:
                await asyncio.to_thread(self.log_cleaner.reconfigure, cleaner_after)
            logger.info("dynamic %s configs are now %s",
                        f"broker {self.entity}" if per_broker else "cluster default", dict(configs))

    # -- inside ----------------------------------------------------------------------------
    def _effective(self, configs: Mapping[str, str], *, per_broker: bool) -> BrokerConfig:
        """Names dynamic, values valid alone and together: the config the layer would make."""
        static_only = sorted(name for name in configs if name in PROPERTY_NAMES and name not in DYNAMIC_CONFIGS)
        if static_only:
            raise DynamicConfigError(f"Cannot update these configs dynamically: Set({', '.join(static_only)})")
        unknown = sorted(name for name in configs if name not in PROPERTY_NAMES)
        if unknown:  # Kafka would keep them as custom configs; Strom refuses what it cannot use
            raise DynamicConfigError(f"Unknown broker configs: Set({', '.join(unknown)})")
        if per_broker:
            effective = self._resolve(self.cluster_default, configs)
        else:
            effective = self._resolve(configs, self.per_broker)
        self._cleaner_config(effective)
        return effective

    def _resolve(self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]) -> BrokerConfig:
        try:
            return self.static.with_properties(cluster_default).with_properties(per_broker)
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
