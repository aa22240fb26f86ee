"""FileQuotaStore: the client quotas of a single node, kept in the data directory.

On disk: ``<data-dir>/client-quotas``, one JSON document replaced whole, atomically
(temp file, fsync, rename, fsync of the directory), so a crash leaves the old quotas or
the new ones::

    {"version": 1,
     "entities": [{"entity": {"user": "alice", "client-id": null},
                   "quotas": {"producer_byte_rate": 1048576.0}}]}

An entity's parts are Kafka's entity types with the name, null for ``<default>`` (as
DescribeClientQuotas answers); quotas are Kafka's keys with float values (what
AlterClientQuotas carries). Invariant: only entities with at least one quota are
written, each validated when altered. An entry that is not valid (edited by hand) is
logged and skipped at load, as Kafka skips invalid dynamic configs: it never stops the
broker. A cluster's brokers keep them in ZooKeeper instead, as Kafka's (``zk_store``).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from typing import Any, Final, Protocol

from strom.broker.quota.entity import QuotaEntity, QuotaError, validate_quota
from strom.storage.fs import FileSystem, read_file, write_file_atomically
from strom.storage.log_manager import CLIENT_QUOTAS_FILE

logger = logging.getLogger(__name__)

QUOTAS_FILE: Final = CLIENT_QUOTAS_FILE  # not log data to the LogManager


class QuotaStore(Protocol):
    """Where the quotas live: read whole at start; a write gets every quota and the entities
    changed (a file is replaced whole, a ZooKeeper znode per changed entity)."""

    def read(self) -> dict[QuotaEntity, dict[str, float]]: ...

    def write(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], changed: Iterable[QuotaEntity]) -> None: ...


class FileQuotaStore:
    def __init__(self, data_dir: str, fs: FileSystem | None = None) -> None:
        self.data_dir = data_dir
        self.path = os.path.join(data_dir, QUOTAS_FILE)
        self.fs = fs or FileSystem()

    def read(self) -> dict[QuotaEntity, dict[str, float]]:
        if not self.fs.exists(self.path):
            return {}
        try:
            document = json.loads(read_file(self.fs, self.path).decode("utf-8"))
            entries = document["entities"]
            if not isinstance(entries, list):
                raise TypeError("entities is not a list")
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("ignoring %s: not a client quotas file (%s)", self.path, exc)
            return {}
        quotas: dict[QuotaEntity, dict[str, float]] = {}
        for entry in entries:
            try:
                entity, values = _entry(entry)
            except (QuotaError, ValueError, KeyError, TypeError, AttributeError) as exc:
                logger.warning("ignoring a client quota in %s: %r (%s)", self.path, entry, exc)
                continue
            if values:
                quotas[entity] = values
        return quotas

    def write(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], changed: Iterable[QuotaEntity] = ()) -> None:
        entities = [{"entity": entity.parts(), "quotas": dict(sorted(values.items()))}
                    for entity, values in sorted(quotas.items(), key=lambda item: item[0].describe()) if values]
        text = json.dumps({"version": 1, "entities": entities}, indent=1)
        self.fs.makedirs(self.data_dir)
        write_file_atomically(self.fs, self.path, (text + "\n").encode("utf-8"))


def _entry(entry: Any) -> tuple[QuotaEntity, dict[str, float]]:
    entity = QuotaEntity.from_parts((str(kind), None if name is None else str(name))
                                    for kind, name in entry["entity"].items())
    values = {str(key): float(value) for key, value in entry["quotas"].items()}
    for key, value in values.items():
        validate_quota(key, value)
    return entity, values
