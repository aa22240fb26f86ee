"""KafkaZkClient: Kafka's ZooKeeper operations (KafkaZkClient.scala, AdminZkClient) over kazoo.

Invariants (znode payloads in zk_data):

- ``/brokers/ids/<id>`` is written only by broker <id>, as a "checked ephemeral" (KAFKA-7165):
  a multi create + setData(version 0); a node left by an older session of this broker (a
  crash) is waited out; its czxid is the broker epoch.
- ``/controller`` + ``/controller_epoch`` change together in one multi at election; from then
  on every controller write is a multi that starts with check(/controller_epoch, the epoch
  zkVersion won at election). A failed check means another controller was elected since:
  ``ControllerMovedError``, and the caller resigns. Partition states are also conditional on
  their own version (the partition epoch), so a stale read cannot overwrite a newer decision.
- kazoo reports a failed multi as a list with an exception *instance* per op (RolledBackError
  before the failing op, RuntimeInconsistency after), never by raising: every element is
  checked.
- Topic creation and config changes (AdminZkClient) may come from any broker: config znode
  first, then the assignment (NodeExists = the topic exists); a config change is announced by
  a sequential ``/config/changes/config_change_`` node every broker watches.

This module holds the session, registration, election and reads; the fenced controller
writes are in zk_fenced (FencedZkWrites) and the any-broker writes in zk_admin
(AdminZkOperations), both base classes of KafkaZkClient; the exceptions are in zk_errors and
re-exported here.

Every method blocks and is thread-safe; asyncio code calls it through ``asyncio.to_thread``.
Operations that lose the connection are retried until ``retry_timeout`` (reads freely; writes
only where a replay is harmless or detected: conditional versions, epoch checks, read-back).

Watches are left to callers through ``watch_children``/``watch_data``: kazoo's re-arming
ChildrenWatch/DataWatch. Their callbacks, like state listeners, run on kazoo's event thread
and must neither block nor call ZooKeeper: hand the event to the asyncio loop
(``loop.call_soon_threadsafe``) and re-read state there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NodeExistsError,
    NoNodeError,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch
from kazoo.retry import KazooRetry, RetryFailedError

from strom.cluster import zk_data
from strom.cluster.zk_admin import AdminZkOperations
from strom.cluster.zk_data import (
    BrokerInfo,
    LeaderIsrAndControllerEpoch,
    TopicAssignment,
)
from strom.cluster.zk_errors import (
    BrokerRegistrationError,
    ControllerMovedError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    TopicExistsError,
    UnknownTopicError,
    ZooKeeperError,
)
from strom.cluster.zk_fenced import FencedZkWrites, failures
from strom.cluster.zk_multi_read import read_many
from strom.protocol.topic_partition import TopicPartition

__all__ = [
    "BrokerRegistrationError", "ControllerMovedError", "InvalidPartitionsError", "InvalidReplicaAssignmentError",
    "KafkaZkClient", "TopicExistsError", "UnknownTopicError", "ZooKeeperError",
]

T = TypeVar("T")
StateListener = Callable[[str], None]  # "CONNECTED", "SUSPENDED" or "LOST" (kazoo's KazooState)


def _split_chroot(connect: str) -> tuple[str, str]:
    """``h1:p,h2:p/strom`` -> (``h1:p,h2:p``, ``/strom``); no chroot -> (connect, "")."""
    hosts, slash, chroot = connect.partition("/")
    return hosts, (slash + chroot).rstrip("/")


def ensure_paths(zk: KazooClient, paths: Iterable[str]) -> None:
    """Create each path and its missing parents with no data (null, as Kafka's
    makeSurePersistentPathExists; kazoo's ensure_path would store b"", and kazoo's multi ops
    cannot store null, so nodes created inside a fenced multi hold b""). One pipelined round:
    ZooKeeper applies a session's requests in order, so parents exist before their children."""
    prefixes = dict.fromkeys(
        "/".join(parts[:i]) for path in paths for parts in [path.rstrip("/").split("/")] for i in range(2, len(parts) + 1))
    pending = [zk.create_async(prefix, None) for prefix in prefixes]
    for answer in pending:
        try:
            answer.get()
        except NodeExistsError:
            continue


class KafkaZkClient(FencedZkWrites, AdminZkOperations):
    """One ZooKeeper session for one broker: registration, controller election, Kafka's znodes."""

    def __init__(self, connect: str, session_timeout_ms: int = 18_000, connection_timeout_ms: int = 18_000,
                 retry_timeout_ms: int | None = None) -> None:
        self.connect_string = connect
        self.session_timeout_s = session_timeout_ms / 1000
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.retry_timeout_s = (retry_timeout_ms / 1000 if retry_timeout_ms is not None
                                else self.session_timeout_s + self.connection_timeout_s)
        self._zk = KazooClient(
            hosts=connect, timeout=self.session_timeout_s,
            # Reconnect quickly for ever: kazoo's default backoff grows to an hour.
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0))
        self._retry = KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, deadline=self.retry_timeout_s)
        # Set while connected: a call made while ZooKeeper is unreachable waits for it at most
        # retry_timeout instead of sitting in kazoo's queue (and an executor thread) for ever.
        self._connected = threading.Event()
        self.answer_timeout_s = self.retry_timeout_s
        self._closed = False
        self._zk.add_listener(self._track_connection)

    # ------------------------------------------------------------------ session

    def connect(self) -> None:
        """Open the session (creating the chroot first, as Kafka does: kazoo will not)."""
        hosts, chroot = _split_chroot(self.connect_string)
        try:
            if chroot:
                bare = KazooClient(hosts=hosts, timeout=self.session_timeout_s)
                bare.start(timeout=self.connection_timeout_s)
                try:
                    ensure_paths(bare, [chroot])
                finally:
                    bare.stop()
                    bare.close()
            self._zk.start(timeout=self.connection_timeout_s)
        except KazooTimeoutError:
            raise ZooKeeperError(
                f"could not connect to ZooKeeper at {self.connect_string} within "
                f"{self.connection_timeout_s:g} s (zookeeper.connection.timeout.ms)") from None

    def close(self) -> None:
        """End the session: its ephemerals (registration, /controller) go at once."""
        self._closed = True
        self._zk.stop()
        self._zk.close()

    def _track_connection(self, state: KazooState) -> None:
        if state == KazooState.CONNECTED:
            self._connected.set()
        else:
            self._connected.clear()

    def add_state_listener(self, listener: StateListener) -> None:
        """``listener(state)`` on kazoo's thread at every CONNECTED/SUSPENDED/LOST; must not block.
        LOST means the session expired: its ephemerals are gone and must be re-created."""
        def forward(state: KazooState) -> None:
            listener(str(state))
        self._zk.add_listener(forward)

    @property
    def session_id(self) -> int:
        client_id = self._zk.client_id
        return int(client_id[0]) if client_id else 0

    @property
    def connected(self) -> bool:
        return bool(self._zk.connected)

    @property
    def kazoo(self) -> KazooClient:
        """The kazoo client underneath, for recipes this class does not wrap."""
        return self._zk

    def _call(self, operation: Callable[[], T]) -> T:
        """Run ``operation``, retried across connection losses until ``retry_timeout``."""
        if self._closed:
            raise ZooKeeperError("the ZooKeeper client is closed")
        if not self._connected.wait(self.retry_timeout_s):
            raise ZooKeeperError(
                f"ZooKeeper at {self.connect_string} unavailable for {self.retry_timeout_s:g} s")
        try:
            result: T = self._retry.copy()(self._while_connected, operation)
        except RetryFailedError:
            raise ZooKeeperError(
                f"ZooKeeper at {self.connect_string} unavailable for {self.retry_timeout_s:g} s") from None
        return result

    def _while_connected(self, operation: Callable[[], T]) -> T:
        """One attempt of ``operation``, made only while connected: kazoo queues a request made
        while it reconnects and sends it once connected, so without a quorum (no server
        accepts the session) the request, and the thread waiting on it, would wait for ever.
        Not connected, the attempt fails as a lost connection and the retry backs off until
        its deadline. (A connection lost between this check and the request leaves that
        request queued; explicit async answers are waited on with ``answer_timeout_s``.)"""
        if not self._connected.is_set():
            raise ConnectionLoss()
        return operation()

    def sync(self, path: str = "/") -> None:
        """Make this session's server catch up with the leader before a read that must be fresh."""
        self._call(lambda: self._zk.sync(path))

    # ------------------------------------------------------------------ watches

    def watch_children(self, path: str, callback: Callable[[list[str]], bool | None]) -> None:
        """``callback(children)`` now and after every change, re-armed (across sessions too)
        until it returns False. Runs on kazoo's thread: must not block or call ZooKeeper.
        The path must exist (kazoo drops a children watch on a missing or deleted node), as
        Kafka's persistent paths do after ``create_top_level_paths``."""
        def forward(children: list[str]) -> bool | None:
            return callback(children)
        ChildrenWatch(self._zk, path, forward)

    def watch_data(self, path: str, callback: Callable[[bytes | None, ZnodeStat | None], bool | None]) -> None:
        """``callback(data, stat)`` now and after every change, (None, None) while the node is
        absent; re-armed until it returns False. Same threading rule as ``watch_children``."""
        def forward(data: bytes | None, stat: ZnodeStat | None) -> bool | None:
            return callback(data, stat)
        DataWatch(self._zk, path, forward)

    # ------------------------------------------------------------------ start-up

    def create_top_level_paths(self) -> None:
        """Kafka's persistent paths (ZkData.PersistentZkPaths), created if missing."""
        self._call(lambda: ensure_paths(self._zk, zk_data.PERSISTENT_PATHS))

    def get_or_create_cluster_id(self, proposed: str) -> str:
        """The cluster's id: ``proposed`` if this broker is the first, else the one already there."""
        def create_or_get() -> str:
            try:
                self._zk.create(zk_data.CLUSTER_ID, zk_data.encode_cluster_id(proposed), makepath=True)
                return proposed
            except NodeExistsError:
                data, _ = self._zk.get(zk_data.CLUSTER_ID)
                return zk_data.decode_cluster_id(data)
        return self._call(create_or_get)

    # ------------------------------------------------------------------ brokers

    def register_broker(self, info: BrokerInfo, timestamp_ms: int | None = None) -> int:
        """Create ``/brokers/ids/<id>`` as Kafka's checked ephemeral; return its czxid (the broker
        epoch). A node of this session (a retried create) is ours; one of another session is
        waited out for up to session timeout + a margin, since that is what a crashed previous
        run of this broker leaves; if it stays, BrokerRegistrationError names the broker id."""
        path = zk_data.broker_id_path(info.id)
        data = zk_data.encode_broker_info(info, int(time.time() * 1000) if timestamp_ms is None else timestamp_ms)
        deadline = time.monotonic() + self.session_timeout_s + max(2.0, self.session_timeout_s / 2)
        owner = 0
        while True:
            czxid = self._call(lambda: self._create_checked_ephemeral(path, data))
            if isinstance(czxid, int):
                return czxid
            owner = czxid[1]
            gone = threading.Event()
            if self._call(partial(self._zk.exists, path, watch=lambda event, gone=gone: gone.set())) is None:
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not gone.wait(remaining):
                raise BrokerRegistrationError(
                    f"broker id {info.id} is already registered in ZooKeeper ({path}) by another live "
                    f"session 0x{owner:x} (ours 0x{self.session_id:x}): is another broker running with "
                    f"broker.id={info.id}?")

    def _create_checked_ephemeral(self, path: str, data: bytes) -> int | tuple[str, int]:
        """The czxid if the node is (now) ours, else ("owner", the owning session id)."""
        transaction = self._zk.transaction()
        transaction.create(path, b"", ephemeral=True)
        transaction.set_data(path, data, version=0)
        results = transaction.commit()
        if not failures(results):
            stat = results[1]
            assert isinstance(stat, ZnodeStat)
            return int(stat.czxid)
        if not any(isinstance(r, NodeExistsError) for r in results):
            if any(isinstance(r, NoNodeError) for r in results):
                ensure_paths(self._zk, [zk_data.BROKER_IDS])
                return self._create_checked_ephemeral(path, data)
            raise ZooKeeperError(f"registering {path} failed: {results}")
        try:
            existing, stat = self._zk.get(path)
        except NoNodeError:
            return self._create_checked_ephemeral(path, data)
        if stat.ephemeralOwner == self.session_id:
            if existing != data:
                self._zk.set(path, data)
            return int(stat.czxid)
        return ("owner", int(stat.ephemeralOwner))

    def get_all_brokers(self) -> dict[int, BrokerInfo]:
        """Every registered broker, with its epoch (czxid)."""
        def read() -> dict[int, BrokerInfo]:
            ids = sorted(int(child) for child in self._zk.get_children(zk_data.BROKER_IDS))
            found = self._get_many({broker_id: zk_data.broker_id_path(broker_id) for broker_id in ids})
            return {broker_id: zk_data.decode_broker_info(broker_id, data, stat.czxid)
                    for broker_id, (data, stat) in found.items()}
        return self._call(read)

    def get_broker(self, broker_id: int) -> BrokerInfo | None:
        answer = self._get(zk_data.broker_id_path(broker_id))
        return zk_data.decode_broker_info(broker_id, answer[0], answer[1].czxid) if answer else None

    def _get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        def read() -> tuple[bytes, ZnodeStat] | None:
            try:
                data, stat = self._zk.get(path)
            except NoNodeError:
                return None
            return data, stat
        return self._call(read)

    # ------------------------------------------------------------------ controller

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """Become controller: one multi creates the ephemeral ``/controller`` and bumps
        ``/controller_epoch`` conditionally. Returns (new epoch, epoch zkVersion): the fencing
        token of every later write. ControllerMovedError if another broker won."""
        current = self.get_controller_epoch()
        if current is None:
            current = self._create_controller_epoch()
        epoch, epoch_zk_version = current
        new_epoch = epoch + 1
        controller_data = zk_data.encode_controller(broker_id, int(time.time() * 1000))

        def elect() -> tuple[int, int]:
            transaction = self._zk.transaction()
            transaction.create(zk_data.CONTROLLER, controller_data, ephemeral=True)
            transaction.set_data(zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(new_epoch), epoch_zk_version)
            results = transaction.commit()
            if not failures(results):
                stat = results[1]
                assert isinstance(stat, ZnodeStat)
                return new_epoch, int(stat.version)
            if not any(isinstance(r, (NodeExistsError, BadVersionError)) for r in results):
                raise ZooKeeperError(f"controller election failed: {results}")
            # A retry after a lost answer lands here too: ours if /controller is us at new_epoch.
            if self.get_controller_id() == broker_id:
                now = self.get_controller_epoch()
                if now is not None and now[0] == new_epoch:
                    return now
            raise ControllerMovedError(f"broker {broker_id} lost the controller election (epoch {new_epoch})")
        return self._call(elect)

    def _create_controller_epoch(self) -> tuple[int, int]:
        def create() -> tuple[int, int]:
            try:
                self._zk.create(zk_data.CONTROLLER_EPOCH, zk_data.encode_controller_epoch(0))
                return 0, 0
            except NodeExistsError:
                data, stat = self._zk.get(zk_data.CONTROLLER_EPOCH)
                return zk_data.decode_controller_epoch(data), int(stat.version)
        return self._call(create)

    def get_controller_id(self) -> int | None:
        answer = self._get(zk_data.CONTROLLER)
        return zk_data.decode_controller(answer[0]) if answer else None

    def delete_stale_controller(self, broker_id: int) -> bool:
        """Delete ``/controller`` if it names ``broker_id``, a broker that is not acting as the
        controller (it resigned while ZooKeeper was away and could not delete it then, or an
        earlier process with its id left it): while it is there no other broker stands, so the
        cluster would have no controller until that session ends, and a session that outlives
        a quorum loss may never end. The epoch is read first: a broker elected between the
        two reads has bumped it, so the fenced delete cannot remove its ``/controller``."""
        epoch = self.get_controller_epoch()
        if epoch is None or self.get_controller_id() != broker_id:
            return False
        self.delete_controller(epoch[1])
        return True

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion of /controller_epoch), or None before the first election."""
        answer = self._get(zk_data.CONTROLLER_EPOCH)
        return (zk_data.decode_controller_epoch(answer[0]), int(answer[1].version)) if answer else None

    # ------------------------------------------------------------------ reads

    def get_all_topics(self) -> set[str]:
        return set(self._call(lambda: self._children_or_empty(zk_data.TOPICS)))

    def get_topic_deletions(self) -> set[str]:
        return set(self._call(lambda: self._children_or_empty(zk_data.DELETE_TOPICS)))

    def _children_or_empty(self, path: str) -> list[str]:
        try:
            return list(self._zk.get_children(path))
        except NoNodeError:
            return []

    def get_topic_assignments(self, topics: Iterable[str]) -> dict[str, TopicAssignment]:
        """Topics that exist, with their assignments (one pipelined round of reads)."""
        paths = {topic: zk_data.topic_path(topic) for topic in topics}

        def read() -> dict[str, TopicAssignment]:
            answers = self._get_many(paths)
            return {topic: zk_data.decode_topic_assignment(topic, data) for topic, (data, _) in answers.items()}
        return self._call(read)

    def get_partition_states(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """States that exist; each partition_epoch is its znode's version."""
        paths = {tp: zk_data.partition_state_path(*tp) for tp in tps}

        def read() -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
            answers = self._get_many(paths)
            return {tp: zk_data.decode_partition_state(tp, data, stat.version) for tp, (data, stat) in answers.items()}
        return self._call(read)

    def _get_many(self, paths: Mapping[T, str]) -> dict[T, tuple[bytes, ZnodeStat]]:
        """Existing nodes among ``paths`` in one multiRead (zk_multi_read)."""
        return read_many(self._zk, paths)
