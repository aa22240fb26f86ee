"""SCRAM credentials: the broker's copy, read by every SCRAM exchange and changed by
AlterUserScramCredentials (KIP-554), so a new credential works for the next authentication.

Kept as Kafka keeps user configs in ZooKeeper, one entity per user named by Kafka's
``Sanitizer`` (URL-encoding), holding Kafka's JSON::

    {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}

On a single node the entity is a file, ``<data-dir>/broker-configs/users/<sanitized name>``
(beside the dynamic broker configs, a directory the log manager knows holds no log data),
replaced whole and atomically (temp file, fsync, rename), so a crash leaves the old
credentials or the new ones; a user without credentials left has no file. All files are read
at start; a file that cannot be read is logged and skipped, never stopping the broker.
Values other than SCRAM mechanisms (a user's quotas share Kafka's znode) are kept as found.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from typing import Final

from strom.security.sasl.scram import MECHANISMS, ScramCredential
from strom.storage.fs import FileSystem, read_file, write_file_atomically
from strom.storage.log_manager import BROKER_CONFIGS_DIR

logger = logging.getLogger(__name__)

USERS_DIR: Final = "users"


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: a user name as a file or znode name."""
    return urllib.parse.quote(name, safe="")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def encode_user_config(configs: dict[str, str]) -> bytes:
    """Kafka's ``ConfigEntityZNode.encode`` JSON (compact, as Jackson writes it)."""
    return json.dumps({"version": 1, "config": configs}, separators=(",", ":")).encode()


def decode_user_config(data: bytes) -> dict[str, str]:
    obj = json.loads(data)
    config = obj.get("config") if isinstance(obj, dict) else None
    if not isinstance(config, dict):
        raise ValueError("no 'config' object")
    return {str(key): str(value) for key, value in config.items()}


class ScramCredentialStore:
    """Every user's SCRAM credentials in memory, persisted per user in the data directory."""

    def __init__(self, data_dir: str, fs: FileSystem | None = None) -> None:
        self.directory = os.path.join(data_dir, BROKER_CONFIGS_DIR, USERS_DIR)
        self.fs = fs or FileSystem()
        self._configs: dict[str, dict[str, str]] = {}  # user -> its config entity

    def load(self) -> None:
        if not self.fs.exists(self.directory):
            return
        for file_name in sorted(self.fs.listdir(self.directory)):
            if file_name.startswith(".") or file_name.endswith(".tmp"):  # a write a crash cut short
                continue
            try:
                self._configs[desanitize(file_name)] = decode_user_config(
                    read_file(self.fs, os.path.join(self.directory, file_name)))
            except (OSError, ValueError) as exc:
                logger.warning("SCRAM credentials of %s not loaded: %s", desanitize(file_name), exc)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        text = self._configs.get(user, {}).get(mechanism)
        if text is None:
            return None
        try:
            return ScramCredential.from_kafka_string(text)
        except ValueError:
            logger.warning("the stored %s credential of %s cannot be read", mechanism, user)
            return None

    def users(self) -> list[str]:
        """Users with at least one SCRAM credential, sorted."""
        return sorted(user for user, configs in self._configs.items() if configs.keys() & MECHANISMS.keys())

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        return {mechanism: credential for mechanism in sorted(self._configs.get(user, {}))
                if mechanism in MECHANISMS and (credential := self.get(user, mechanism)) is not None}

    def set_user(self, user: str, credentials: dict[str, ScramCredential | None]) -> None:
        """Upsert (a credential) or delete (None) the user's credentials, persisted at once."""
        configs = dict(self._configs.get(user, {}))
        for mechanism, credential in credentials.items():
            if credential is None:
                configs.pop(mechanism, None)
            else:
                configs[mechanism] = credential.to_kafka_string()
        self._write(user, configs)
        if configs:
            self._configs[user] = configs
        else:
            self._configs.pop(user, None)

    def _write(self, user: str, configs: dict[str, str]) -> None:
        path = os.path.join(self.directory, sanitize(user))
        if not configs:
            if self.fs.exists(path):
                self.fs.unlink(path)
            self.fs.fsync_dir(self.directory)
            return
        self.fs.makedirs(self.directory)
        write_file_atomically(self.fs, path, encode_user_config(configs))
