"""Where a transaction's markers go: this broker's own partitions, or another leader's.

The marker channel hands over one round (a producer's markers on the partitions still
without one). A partition this broker leads gets its marker through
``strom.broker.txn_markers.write_txn_markers`` (appended acks=-1; on ``__consumer_offsets``
the group coordinator then applies or drops the transaction's offsets). In a cluster, a
partition led by another broker gets it through a WriteTxnMarkers (27) request to that
leader on the inter-broker listener (Kafka's ``TransactionMarkerChannelManager`` sends
all of them that way, its own partitions included); one connection per leader, kept
open. A partition with no live leader, or a leader that cannot be reached, answers a
retriable error, and the channel tries again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from strom.broker.transaction.transaction_marker_channel import MarkerRound
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.client.connection import BrokerConnection

logger = logging.getLogger(__name__)

WRITE_TXN_MARKERS_VERSIONS = range(0, 2)


class BrokerMarkerWriter:
    """A ``MarkerWriter`` for one broker: local partitions directly, others by request."""

    def __init__(self, broker: Broker, request_timeout_ms: int = 30_000) -> None:
        self.broker = broker
        self.request_timeout_ms = request_timeout_ms
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}
        self._connecting: dict[int, asyncio.Lock] = {}  # one connection attempt per leader at a time

    async def __call__(self, marker_round: MarkerRound) -> Mapping[TopicPartition, ErrorCode]:
        from strom.broker.txn_markers import (  # the handler side's module
            TxnMarker,
            write_txn_markers,
        )

        local, remote = self._split(marker_round.partitions)
        results: dict[TopicPartition, ErrorCode] = {}
        jobs = [self._send(leader, marker_round, partitions) for leader, partitions in remote.items() if leader >= 0]
        results.update(dict.fromkeys(remote.get(-1, ()), ErrorCode.NOT_LEADER_OR_FOLLOWER))
        if local:
            marker = TxnMarker(marker_round.producer_id, marker_round.producer_epoch, marker_round.committed,
                               marker_round.coordinator_epoch, tuple(local))
            written = await write_txn_markers(self.broker, [marker])
            results.update({tp: error for (_, tp), error in written.items()})
        for answered in await asyncio.gather(*jobs):
            results.update(answered)
        return results

    def _split(self, partitions: tuple[TopicPartition, ...]) -> tuple[list[TopicPartition],
                                                                     dict[int, list[TopicPartition]]]:
        """(partitions led here, other partitions by leader id; -1: no leader known)."""
        local: list[TopicPartition] = []
        remote: dict[int, list[TopicPartition]] = {}
        me = self.broker.node_id
        for tp in partitions:
            hosted = self.broker.replica_manager.get_partition(*tp)
            if not self.broker.config.cluster_mode or (hosted is not None and hosted.is_leader):
                local.append(tp)
                continue
            state = self.broker.metadata.partition_state(*tp)
            leader = state.leader if state is not None and state.leader != me else -1
            remote.setdefault(leader, []).append(tp)
        return local, remote

    async def _send(self, leader: int, marker_round: MarkerRound, partitions: list[TopicPartition]
                    ) -> dict[TopicPartition, ErrorCode]:
        # Imported here: a single node never sends one (the client side and the codec's
        # messages stay out of ``strom serve``'s start-up).
        from strom.client.errors import KafkaError
        from strom.protocol.messages.write_txn_markers_request import (
            WritableTxnMarker,
            WritableTxnMarkerTopic,
            WriteTxnMarkersRequest,
        )
        from strom.protocol.messages.write_txn_markers_response import WriteTxnMarkersResponse

        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=marker_round.producer_id, producer_epoch=marker_round.producer_epoch,
            transaction_result=marker_round.committed,
            topics=tuple(WritableTxnMarkerTopic(topic, tuple(indexes)) for topic, indexes in by_topic.items()),
            coordinator_epoch=marker_round.coordinator_epoch),))
        try:
            connection = await self._connection(leader)
            version = connection.version_for(WriteTxnMarkersRequest.API_KEY or 27, WRITE_TXN_MARKERS_VERSIONS)
            response = await connection.send(request, version=version, timeout_ms=self.request_timeout_ms)
        except (KafkaError, OSError) as exc:
            logger.info("WriteTxnMarkers to broker %d failed: %s", leader, exc)
            self._drop(leader)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        assert isinstance(response, WriteTxnMarkersResponse)
        answered: dict[TopicPartition, ErrorCode] = {}
        for result in response.markers:
            for topic_result in result.topics:
                for partition in topic_result.partitions:
                    answered[(topic_result.name, partition.partition_index)] = ErrorCode.from_code(
                        partition.error_code)
        return answered

    async def _connection(self, leader: int) -> BrokerConnection:
        from strom.client.connection import BrokerConnection
        from strom.client.errors import KafkaError

        live = self.broker.metadata.live_broker(leader)
        endpoint = None if live is None else live.endpoint(self.broker.inter_broker_listener)
        if endpoint is None:
            raise KafkaError(ErrorCode.LEADER_NOT_AVAILABLE, f"broker {leader} has no inter-broker endpoint")
        where = (endpoint.host, endpoint.port)
        async with self._connecting.setdefault(leader, asyncio.Lock()):
            known = self._connections.get(leader)
            if known is not None and known[0] == where and not known[1].closed:
                return known[1]
            self._drop(leader)
            connection = await BrokerConnection.open(
                endpoint.host, endpoint.port, node_id=leader,
                client_id=f"broker-{self.broker.node_id}-txn-markers", request_timeout_ms=self.request_timeout_ms)
            self._connections[leader] = (where, connection)
            return connection

    def _drop(self, leader: int) -> None:
        known = self._connections.pop(leader, None)
        if known is not None:
            known[1].close()

    def close(self) -> None:
        for leader in list(self._connections):
            self._drop(leader)
