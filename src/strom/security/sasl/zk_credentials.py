"""SCRAM credentials of a cluster (``zookeeper.connect`` set), where Kafka's ZooKeeper-mode
brokers keep them, so every broker authenticates the same users and Kafka's tools read them.

- ``/config/users/<sanitized user>``: ``{"version":1,"config":{"SCRAM-SHA-256":"salt=...,
  stored_key=...,server_key=...,iterations=4096",...}}`` (the same JSON as the single node's
  files, ``credential_store``); other keys of the entity (a user's quotas) are kept as found.
  A user whose last credential goes keeps its znode with what is left, as Kafka does.
- each change is announced by a sequential ``/config/changes/config_change_<seq>`` holding
  ``{"version":2,"entity_path":"users/<sanitized user>"}``; every broker watches the
  children of ``/config/changes`` and re-reads the users named by notifications newer than
  the last it saw (topic notifications are the cluster's own, ``ZkBroker``).

Every broker reads all users when its cluster side has connected (``start``, from
``Broker.start_background_work``) and serves from memory after that; a write (AlterUserScramCredentials, on the active controller only, as in
Kafka) is read-modify-write with the znode's version, retried on a concurrent change.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Final

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from strom.cluster import zk_data
from strom.security.sasl.credential_store import (
    ScramCredentialStore,
    decode_user_config,
    desanitize,
    encode_user_config,
    sanitize,
)

if TYPE_CHECKING:
    from strom.cluster.zk_client import KafkaZkClient
    from strom.security.sasl.scram import ScramCredential

logger = logging.getLogger(__name__)

USERS_PATH: Final = "/config/users"
WRITE_ATTEMPTS: Final = 10


class ZkScramCredentialStore(ScramCredentialStore):
    def __init__(self, zk: KafkaZkClient) -> None:
        self._configs: dict[str, dict[str, str]] = {}
        self._zk = zk
        self._last_change = -1
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """Read every user and follow the change notifications from now on. Called on the event
        loop once the cluster side has connected, before the broker says it is ready: a few
        blocking reads at start, so no client authenticates against credentials not yet read."""
        self._loop = asyncio.get_running_loop()
        self._last_change = max((sequence for sequence, _ in self._zk.get_config_changes()), default=-1)
        self.load()
        self._zk.watch_children(zk_data.CONFIG_CHANGES, self._changed)

    def load(self) -> None:
        try:
            children = self._zk.kazoo.get_children(USERS_PATH)
        except NoNodeError:
            return
        for child in children:
            self._read(child)

    def _read(self, sanitized: str) -> None:
        user = desanitize(sanitized)
        try:
            data, _ = self._zk.kazoo.get(f"{USERS_PATH}/{sanitized}")
            configs = decode_user_config(data)
        except NoNodeError:
            self._configs.pop(user, None)
            return
        except ValueError as exc:
            logger.warning("SCRAM credentials of %s not loaded from ZooKeeper: %s", user, exc)
            return
        self._configs[user] = configs

    def _changed(self, children: list[str]) -> bool:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._apply_changes()))
        return True

    async def _apply_changes(self) -> None:
        try:
            changes = await asyncio.to_thread(self._zk.get_config_changes, self._last_change)
            for sequence, entity_path in changes:
                self._last_change = max(self._last_change, sequence)
                kind, _, name = entity_path.partition("/")
                if kind == "users" and name and "/" not in name:  # not users/<u>/clients/<c> (quotas)
                    await asyncio.to_thread(self._read, name)
        except Exception as exc:  # ZooKeeper unreachable: the next notification tries again
            logger.warning("SCRAM credential changes not read from ZooKeeper: %s", exc)

    def set_user(self, user: str, credentials: dict[str, ScramCredential | None]) -> None:
        kazoo = self._zk.kazoo
        path = f"{USERS_PATH}/{sanitize(user)}"
        for _ in range(WRITE_ATTEMPTS):
            try:
                data, stat = kazoo.get(path)
                configs, version = decode_user_config(data), stat.version
            except NoNodeError:
                configs, version = {}, None
            for mechanism, credential in credentials.items():
                if credential is None:
                    configs.pop(mechanism, None)
                else:
                    configs[mechanism] = credential.to_kafka_string()
            try:
                if version is None:
                    kazoo.create(path, encode_user_config(configs), makepath=True)
                else:
                    kazoo.set(path, encode_user_config(configs), version=version)
                break
            except (NodeExistsError, BadVersionError):
                continue
        else:
            raise OSError(f"{path} kept changing while it was written")
        kazoo.create(f"{zk_data.CONFIG_CHANGES}/{zk_data.CONFIG_CHANGE_PREFIX}",
                     zk_data.encode_config_change(f"users/{sanitize(user)}"), sequence=True, makepath=True)
        self._configs[user] = configs
