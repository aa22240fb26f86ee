"""ZkQuotaStore: the client quotas of a cluster (``zookeeper.connect`` set), where Kafka's
ZooKeeper-mode brokers keep them, so every broker enforces the same quotas and Kafka's
tools read and write them.

- ``/config/users/<user>``, ``/config/users/<user>/clients/<client-id>`` and
  ``/config/clients/<client-id>``, names sanitized as Kafka's ``Sanitizer`` (the default is
  the literal ``<default>``), each ``{"version":1,"config":{"producer_byte_rate":"1024",
  "request_percentage":"200.0"}}``: whole numbers for the byte rates, doubles as Java prints
  them, as Kafka's ``ZkAdminManager.alterClientQuotas`` writes. Other keys of a user's znode
  (its SCRAM credentials, ``strom.security.sasl.zk_credentials``) are kept as found
  (``KafkaZkClient.update_entity_config``: read-modify-write on the znode's version).
- each change is announced by a sequential ``/config/changes/config_change_<seq>`` holding
  ``{"version":2,"entity_path":"users/<user>/clients/<client-id>"}`` (or ``users/<user>``,
  ``clients/<client-id>``); every broker re-reads the entities named by notifications newer
  than the last it saw (``ClientQuotas.start``, with ``strom.cluster.config_changes``).

An entity whose quotas are all removed keeps its znode, with what else it holds, as Kafka does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final

from kazoo.exceptions import NoNodeError

from strom.broker.quota.entity import (
    DEFAULT,
    QUOTA_KEYS,
    Name,
    QuotaEntity,
    QuotaError,
    validate_quota,
)
from strom.security.sasl.credential_store import desanitize, sanitize

if TYPE_CHECKING:
    from strom.cluster.zk_client import KafkaZkClient

logger = logging.getLogger(__name__)

DEFAULT_NODE: Final = "<default>"
WRITE_ATTEMPTS: Final = 10


def entity_path(entity: QuotaEntity) -> str:
    """``users/alice/clients/<default>``: the znode under /config, and the notification's path."""
    parts = []
    if entity.user is not None:
        parts.append(f"users/{_node(entity.user)}")
    if entity.client_id is not None:
        parts.append(f"clients/{_node(entity.client_id)}")
    return "/".join(parts)


def parse_entity_path(path: str) -> QuotaEntity | None:
    """The quota entity a notification names; None for others (topics, brokers, ...)."""
    parts = path.split("/")
    if len(parts) == 2 and parts[0] == "users" and parts[1]:
        return QuotaEntity(_name(parts[1]), None)
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients" and parts[1] and parts[3]:
        return QuotaEntity(_name(parts[1]), _name(parts[3]))
    if len(parts) == 2 and parts[0] == "clients" and parts[1]:
        return QuotaEntity(None, _name(parts[1]))
    return None


def _node(name: Name) -> str:
    assert name is not None
    return DEFAULT_NODE if name is DEFAULT else sanitize(name)


def _name(node: str) -> Name:
    return DEFAULT if node == DEFAULT_NODE else desanitize(node)


def encode_quota(key: str, value: float) -> str:
    """As Kafka writes it: a LONG key's whole number, a DOUBLE as Java's Double.toString."""
    return str(int(value)) if QUOTA_KEYS.get(key) == "Long" else repr(float(value))


class ZkQuotaStore:
    def __init__(self, zk: KafkaZkClient) -> None:
        self._zk = zk

    def read(self) -> dict[QuotaEntity, dict[str, float]]:
        """Every quota entity's quotas (a few blocking reads, at start)."""
        quotas: dict[QuotaEntity, dict[str, float]] = {}
        for user in self._children("/config/users"):
            for path in (f"users/{user}", *(f"users/{user}/clients/{client}"
                                            for client in self._children(f"/config/users/{user}/clients"))):
                self._read_into(quotas, path)
        for client in self._children("/config/clients"):
            self._read_into(quotas, f"clients/{client}")
        return quotas

    def read_entity(self, entity: QuotaEntity) -> dict[str, float]:
        """One entity's quotas as ZooKeeper holds them now (empty if none)."""
        found: dict[QuotaEntity, dict[str, float]] = {}
        self._read_into(found, entity_path(entity))
        return found.get(entity, {})

    def write(self, quotas: Mapping[QuotaEntity, Mapping[str, float]], changed: Iterable[QuotaEntity]) -> None:
        for entity in changed:
            self._write_entity(entity, quotas.get(entity, {}))

    def _write_entity(self, entity: QuotaEntity, values: Mapping[str, float]) -> None:
        def update(configs: dict[str, str]) -> dict[str, str]:
            kept = {key: value for key, value in configs.items() if key not in QUOTA_KEYS}
            kept.update((key, encode_quota(key, value)) for key, value in sorted(values.items()))
            return kept

        self._zk.update_entity_config(entity_path(entity), update)

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self._zk.kazoo.get_children(path))
        except NoNodeError:
            return []

    def _read_into(self, quotas: dict[QuotaEntity, dict[str, float]], path: str) -> None:
        entity = parse_entity_path(path)
        if entity is None:
            return
        try:
            configs = self._zk.get_entity_config(path)
        except ValueError as exc:
            logger.warning("client quotas of %s not read from ZooKeeper: %s", path, exc)
            return
        if configs is None:
            return
        values: dict[str, float] = {}
        for key, text in configs.items():
            if key not in QUOTA_KEYS:
                continue
            try:
                value = float(text)
                validate_quota(key, value)
            except (ValueError, QuotaError) as exc:
                logger.warning("client quota %s of %s ignored: %s", key, path, exc)
                continue
            values[key] = value
        if values:
            quotas[entity] = values

