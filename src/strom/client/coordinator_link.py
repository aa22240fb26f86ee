"""The way to a group's coordinator broker: FindCoordinator, and a connection of its own.

Which broker coordinates a group can change (its ``__consumer_offsets`` partition moved,
the broker restarted), and the only sign is an answer NOT_COORDINATOR or
COORDINATOR_NOT_AVAILABLE, or a dropped connection. Every such sign calls
``mark_unknown`` and the next request looks the coordinator up again.

The connection is separate from the consumer's connections to the same broker, as in
the Java client: a broker serves one connection's requests in order, so a heartbeat
must not wait behind a long-polling Fetch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Final

from strom.client.cluster import BrokerInfo, Cluster
from strom.client.config import ClientConfig
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from strom.client.find_coordinator import GROUP_KEY_TYPE, find_coordinator
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message

logger = logging.getLogger(__name__)

# The answers that say the coordinator moved or is not ready: forget it, find it again.
COORDINATOR_GONE: Final = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE)


class Retry(Exception):
    """This attempt failed in a way a new attempt may fix (after a backoff if ``backoff``)."""

    def __init__(self, reason: str, backoff: bool = True) -> None:
        super().__init__(reason)
        self.backoff = backoff


class CoordinatorLink:
    """One group's coordinator: found on demand, forgotten on any sign it moved.

    A transactional producer keeps one for its ``transactional.id`` too (``key_type``
    1, TRANSACTION): the same lookup and the same signs of a move.
    """

    def __init__(self, cluster: Cluster, config: ClientConfig, group_id: str,
                 key_type: int = GROUP_KEY_TYPE) -> None:
        self.cluster = cluster
        self.config = config
        self.group_id = group_id
        self.key_type = key_type
        self._coordinator: BrokerInfo | None = None
        self._connection: BrokerConnection | None = None
        self._finding: asyncio.Future[BrokerInfo] | None = None

    @property
    def known(self) -> bool:
        return self._coordinator is not None

    async def ensure(self) -> BrokerInfo:
        """The coordinator, looked up if unknown (one lookup at a time)."""
        if self._coordinator is not None:
            return self._coordinator
        if self._finding is None or self._finding.done():
            self._finding = asyncio.ensure_future(self._find())
        return await asyncio.shield(self._finding)

    async def _find(self) -> BrokerInfo:
        deadline = time.monotonic() + self.config.request_timeout_ms / 1000
        backoff = self.config.retry_backoff_ms / 1000
        while True:
            try:
                connection = await self.cluster.any_connection()
                self._coordinator = await find_coordinator(connection, self.group_id, self.key_type)
                logger.info("group %s: coordinator is node %d at %s:%d", self.group_id,
                            self._coordinator.node_id, self._coordinator.host, self._coordinator.port)
                return self._coordinator
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                if time.monotonic() + backoff > deadline:
                    raise KafkaTimeoutError(f"no coordinator for group {self.group_id!r}: {exc}") from None
                await asyncio.sleep(backoff)

    def mark_unknown(self, reason: str) -> None:
        if self._coordinator is not None:
            logger.info("group %s: coordinator %d unknown: %s", self.group_id, self._coordinator.node_id, reason)
        self._coordinator = None
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    async def _open(self) -> BrokerConnection:
        if self._connection is not None and not self._connection.closed:
            return self._connection
        coordinator = await self.ensure()
        try:
            self._connection = await BrokerConnection.open(
                coordinator.host, coordinator.port, node_id=coordinator.node_id, client_id=self.config.client_id,
                request_timeout_ms=self.config.request_timeout_ms,
                connect_timeout_ms=self.config.socket_connection_setup_timeout_ms)
        except KafkaConnectionError as exc:
            self.mark_unknown(str(exc))
            raise Retry(str(exc)) from None
        return self._connection

    async def send(self, api_key: int, build: Callable[[int], Message], supported: range,
                   timeout_ms: int | None = None) -> tuple[Message, int]:
        """Send the request ``build`` makes for the negotiated version; answer and version.

        A lost or timed-out connection forgets the coordinator and raises ``Retry``.
        """
        connection = await self._open()
        version = connection.version_for(api_key, supported)
        try:
            return await connection.send(build(version), version=version, timeout_ms=timeout_ms), version
        except (KafkaConnectionError, KafkaTimeoutError) as exc:
            self.mark_unknown(str(exc))
            raise Retry(str(exc)) from None

    async def close(self) -> None:
        if self._finding is not None and not self._finding.done():
            self._finding.cancel()
        if self._connection is not None:
            connection, self._connection = self._connection, None
            connection.close()
            await connection.wait_closed()
