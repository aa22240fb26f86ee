"""What a client knows of the cluster, and its connections to the brokers in it.

``ClusterMetadata`` is an immutable snapshot of one Metadata answer (brokers, topics,
leaders with their epochs); a refresh replaces it whole, so code holding a snapshot
never sees half an update. ``Cluster`` owns one connection per broker, opened on first
use, and reconnects with Kafka's exponential backoff (``reconnect.backoff.ms`` doubling
up to ``reconnect.backoff.max.ms``, with ±20 % jitter) so a dead broker is not hammered.

Connections are keyed by node id; before the first Metadata answer the bootstrap
addresses stand in as nodes -1, -2, … as in the Java client. Metadata is refreshed
when asked (a NOT_LEADER answer, an unknown topic), and otherwise every
``metadata.max.age.ms``, on the next use.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from uuid import UUID

from strom.client.config import ClientConfig
from strom.client.connection import BrokerConnection
from strom.client.errors import (
    ClientClosedError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
)
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from strom.protocol.messages.metadata_response import MetadataResponse

logger = logging.getLogger(__name__)

ZERO_UUID = UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: UUID = ZERO_UUID
    internal: bool = False


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    topics: dict[str, TopicInfo] = field(default_factory=dict)
    controller_id: int = -1
    cluster_id: str | None = None
    fetched_at: float = 0.0  # time.monotonic() of the answer

    def leader(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None when unknown or leaderless."""
        info = self.topics.get(topic)
        part = None if info is None else info.partitions.get(partition)
        if part is None or part.leader < 0:
            return None
        return part.leader

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids in order ([] if the topic is unknown)."""
        info = self.topics.get(topic)
        return [] if info is None else sorted(info.partitions)

    def topic_ids(self) -> dict[UUID, str]:
        return {t.topic_id: t.name for t in self.topics.values() if t.topic_id != ZERO_UUID}

    @classmethod
    def from_response(cls, response: MetadataResponse) -> ClusterMetadata:
        brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        topics = {}
        for topic in response.topics:
            if topic.name is None:
                continue
            partitions = {
                p.partition_index: PartitionInfo(p.partition_index, p.leader_id, p.leader_epoch,
                                                 tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code)
                for p in topic.partitions
            }
            topics[topic.name] = TopicInfo(topic.name, topic.error_code, partitions, topic.topic_id,
                                           topic.is_internal)
        return cls(brokers, topics, response.controller_id, response.cluster_id, time.monotonic())


class _Backoff:
    """Kafka's exponential reconnect backoff with jitter, per broker."""

    def __init__(self, initial_ms: int, max_ms: int) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max(max_ms, initial_ms)
        self.failures = 0
        self.not_before = 0.0

    def failed(self) -> None:
        delay = min(self.initial_ms * (2 ** self.failures), self.max_ms)
        delay *= random.uniform(0.8, 1.2)
        self.failures += 1
        self.not_before = time.monotonic() + delay / 1000

    def succeeded(self) -> None:
        self.failures = 0
        self.not_before = 0.0


class Cluster:
    """Metadata plus one connection per broker, shared by a client's components."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self.metadata = ClusterMetadata()
        self._bootstrap = {-(i + 1): BrokerInfo(-(i + 1), host, port)
                           for i, (host, port) in enumerate(config.bootstrap_addresses())}
        self._connections: dict[int, BrokerConnection] = {}
        self._connecting: dict[int, asyncio.Future[BrokerConnection]] = {}
        self._backoff: dict[int, _Backoff] = {}
        self._refreshing: asyncio.Future[ClusterMetadata] | None = None
        self._last_background_refresh = 0.0
        self._background: asyncio.Future[ClusterMetadata] | None = None
        self._wanted_topics: set[str] = set()
        self._all_topics = False
        self._closed = False

    # -- connections ---------------------------------------------------------------------
    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to ``node_id`` (a bootstrap address if negative)."""
        if self._closed:
            raise ClientClosedError()
        connection = self._connections.get(node_id)
        if connection is not None and not connection.closed:
            return connection
        pending = self._connecting.get(node_id)
        if pending is None:
            pending = asyncio.ensure_future(self._connect(node_id))
            self._connecting[node_id] = pending
            pending.add_done_callback(lambda _: self._connecting.pop(node_id, None))
        return await asyncio.shield(pending)

    async def _connect(self, node_id: int) -> BrokerConnection:
        broker = self.metadata.brokers.get(node_id) or self._bootstrap.get(node_id)
        if broker is None:
            raise KafkaConnectionError(f"node {node_id} is not in the cluster metadata")
        config = self.config
        backoff = self._backoff.setdefault(
            node_id, _Backoff(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms))
        wait = backoff.not_before - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        try:
            connection = await BrokerConnection.open(
                broker.host, broker.port, node_id=node_id, client_id=config.client_id,
                request_timeout_ms=config.request_timeout_ms,
                connect_timeout_ms=config.socket_connection_setup_timeout_ms)
        except KafkaError:
            backoff.failed()
            raise
        backoff.succeeded()
        self._connections[node_id] = connection
        return connection

    async def any_connection(self) -> BrokerConnection:
        """The least loaded open connection, else a new one to a known broker in turn."""
        open_ = [c for c in self._connections.values() if not c.closed]
        if open_:
            return min(open_, key=lambda c: c.in_flight)
        candidates = list(self.metadata.brokers) or list(self._bootstrap)
        random.shuffle(candidates)
        candidates.sort(key=lambda n: self._backoff[n].not_before if n in self._backoff else 0.0)
        error: KafkaError | None = None
        for node_id in candidates:
            try:
                return await self.connection(node_id)
            except KafkaConnectionError as exc:
                error = exc
        if self.metadata.brokers:  # every known broker is down: fall back to bootstrap
            for node_id in self._bootstrap:
                try:
                    return await self.connection(node_id)
                except KafkaConnectionError as exc:
                    error = exc
        raise error or KafkaConnectionError("no broker to connect to")

    async def request(self, node_id: int | None, request: Message, versions: range | None = None,
                      timeout_ms: int | None = None) -> Message:
        """Send ``request`` to ``node_id`` (None: any broker) at the best common version."""
        connection = await (self.any_connection() if node_id is None else self.connection(node_id))
        assert request.API_KEY is not None
        version = connection.version_for(request.API_KEY, versions or request.VALID_VERSIONS)
        return await connection.send(request, version=version, timeout_ms=timeout_ms)

    # -- metadata ------------------------------------------------------------------------
    def add_topics(self, topics: Collection[str]) -> None:
        """Topics the next refreshes must cover (a producer's or a consumer's)."""
        self._wanted_topics.update(topics)

    def want_all_topics(self, enabled: bool = True) -> None:
        """Refresh every topic (pattern subscriptions, admin listings)."""
        self._all_topics = enabled

    def refresh_soon(self, then: Callable[[], object]) -> None:
        """Refresh in the background, at most once per ``retry.backoff.ms``, then call
        ``then`` (after a failure too: the caller looks again and may ask again)."""
        now = time.monotonic()
        if self._closed or now - self._last_background_refresh < self.config.retry_backoff_ms / 1000:
            return
        self._last_background_refresh = now

        def done(task: asyncio.Future[ClusterMetadata]) -> None:
            if task.cancelled():
                return
            if task.exception() is not None and not self._closed:
                logger.info("metadata refresh failed: %s", task.exception())
            then()

        self._background = asyncio.ensure_future(self.refresh())
        self._background.add_done_callback(done)

    @property
    def stale(self) -> bool:
        return time.monotonic() - self.metadata.fetched_at > self.config.metadata_max_age_ms / 1000

    async def refresh(self, topics: Collection[str] | None = None) -> ClusterMetadata:
        """Fetch metadata for the wanted topics (plus ``topics``); one refresh at a time."""
        if topics:
            self._wanted_topics.update(topics)
        if self._refreshing is not None and not self._refreshing.done():
            return await asyncio.shield(self._refreshing)
        self._refreshing = asyncio.ensure_future(self._refresh())
        return await asyncio.shield(self._refreshing)

    async def _refresh(self) -> ClusterMetadata:
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            try:
                connection = await self.any_connection()
                version = connection.version_for(MetadataRequest.API_KEY, MetadataRequest.VALID_VERSIONS)
                response = await connection.send(self._metadata_request(version), version=version)
                assert isinstance(response, MetadataResponse)
                self.metadata = ClusterMetadata.from_response(response)
                self._forget_departed_brokers()
                return self.metadata
            except (KafkaConnectionError, KafkaTimeoutError) as exc:
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"no metadata within request.timeout.ms: {exc}") from None
                logger.debug("metadata refresh failed (%s); retrying", exc)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)

    def _metadata_request(self, version: int) -> MetadataRequest:
        if self._all_topics:
            topics: tuple[MetadataRequestTopic, ...] | None = () if version == 0 else None
        else:
            topics = tuple(MetadataRequestTopic(name=name) for name in sorted(self._wanted_topics))
            if not topics and version == 0:
                topics = ()  # v0 cannot ask for no topics; it gets all of them
        # v0-3 cannot say no to auto-creation (the broker's setting decides); v4+ can.
        auto_create = self.config.allow_auto_create_topics or version < 4
        return MetadataRequest(topics=topics, allow_auto_topic_creation=auto_create)

    def _forget_departed_brokers(self) -> None:
        for node_id in [n for n in self._connections if n >= 0 and n not in self.metadata.brokers]:
            self._connections.pop(node_id).close()

    async def wait_for_topic(self, topic: str, timeout_ms: int) -> TopicInfo:
        """Metadata for ``topic``, refreshing until it has partitions with leaders."""
        deadline = time.monotonic() + timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        self._wanted_topics.add(topic)
        info = self.metadata.topics.get(topic)
        while info is None or info.error_code or not info.partitions or self.stale:
            metadata = await self.refresh()
            info = metadata.topics.get(topic)
            if info is not None and info.partitions and not info.error_code:
                break
            code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if info is None else ErrorCode(info.error_code)
            if info is not None and info.error_code and not code.retriable:
                raise KafkaError(code, f"topic {topic!r}")
            if time.monotonic() + backoff > deadline:
                raise KafkaTimeoutError(f"topic {topic!r} not available ({code.name}) within {timeout_ms} ms")
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, self.config.retry_backoff_max_ms / 1000)
        return info

    # -- lifetime ------------------------------------------------------------------------
    async def close(self) -> None:
        self._closed = True
        # A background refresh must not outlive the client (its failure would be
        # reported as never retrieved once the loop is gone).
        for pending in (self._background, self._refreshing, *self._connecting.values()):
            if pending is not None and not pending.done():
                pending.cancel()
        background = [p for p in (self._background, self._refreshing) if p is not None]
        if background:
            await asyncio.wait(background)
        connections = list(self._connections.values())
        self._connections.clear()
        for connection in connections:
            connection.close()
        for connection in connections:
            await connection.wait_closed()
