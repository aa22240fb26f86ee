"""SCRAM credentials of a cluster (``zookeeper.connect`` set), where Kafka's ZooKeeper-mode
brokers keep them, so every broker authenticates the same users and Kafka's tools read them.

- ``/config/users/<sanitized user>``: ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,
  stored_key=...,server_key=...,iterations=4096",...}}`` (the same JSON as the single node's
  files, ``credential_store``); other keys of the entity (a user's quotas) are kept as found.
  A user whose last credential goes keeps its znode with what is left, as Kafka does.
- each change is announced by a sequential ``/config/changes/config_change_<seq>`` holding
  ``{"version":2,"entity_path":"users/<sanitized user>"}``; every broker follows them
  (``strom.cluster.config_changes``) and re-reads the users they name.

Every broker reads all users when its cluster side has connected (``start``, from
``Broker.start_background_work``) and serves from memory after that; a write (AlterUserScramCredentials, on the active controller only, as in
Kafka) is read-modify-write with the znode's version, retried on a concurrent change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from kazoo.exceptions import NoNodeError

from strom.cluster.config_changes import ConfigChangeFollower
from strom.security.sasl.credential_store import ScramCredentialStore, desanitize, sanitize

if TYPE_CHECKING:
    from strom.cluster.zk_client import KafkaZkClient
    from strom.security.sasl.scram import ScramCredential

logger = logging.getLogger(__name__)

USERS: Final = "users"


class ZkScramCredentialStore(ScramCredentialStore):
    def __init__(self, zk: KafkaZkClient) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._zk = zk
        self._changes = ConfigChangeFollower(zk, self._changed, "SCRAM credential")

    def start(self) -> None:
        """Read every user and follow the change notifications from now on. Called on the event
        loop once the cluster side has connected, before the broker says it is ready: a few
        blocking reads at start, so no client authenticates against credentials not yet read."""
        self._changes.start(from_now=True)
        self.load()

    def load(self) -> None:
        try:
            children = self._zk.kazoo.get_children(f"/config/{USERS}")
        except NoNodeError:
            return
        for child in children:
            self._read(child)

    def _read(self, sanitized: str) -> None:
        user = desanitize(sanitized)
        try:
            configs = self._zk.get_entity_config(f"{USERS}/{sanitized}")
        except ValueError as exc:
            logger.warning("SCRAM credentials of %s not loaded from ZooKeeper: %s", user, exc)
            return
        if configs is None:
            self._configs.pop(user, None)
        else:
            self._configs[user] = configs

    async def _changed(self, entity_path: str) -> None:
        kind, _, name = entity_path.partition("/")
        if kind == USERS and name and "/" not in name:  # not users/<u>/clients/<c> (quotas)
            await asyncio.to_thread(self._read, name)

    def set_user(self, user: str, credentials: dict[str, ScramCredential | None]) -> None:
        written: dict[str, str] = {}

        def update(configs: dict[str, str]) -> dict[str, str]:
            for mechanism, credential in credentials.items():
                if credential is None:
                    configs.pop(mechanism, None)
                else:
                    configs[mechanism] = credential.to_kafka_string()
            written.clear()
            written.update(configs)
            return configs

        self._zk.update_entity_config(f"{USERS}/{sanitize(user)}", update)
        self._configs[user] = written
