"""AlterPartitionManager: the broker side of KIP-497 — leaders' ISR changes, sent to the controller.

Kafka's ``DefaultAlterPartitionManager``. The active controller is the only writer of a
partition's state (its ``state`` znode, versioned by the partition epoch), so a leader never
applies an ISR change itself: ``Partition`` proposes one (``submit``) and applies only the
state the controller answers with.

- **One proposal per partition.** A second ``submit`` for a partition whose proposal is
  not answered yet fails at once with OPERATION_NOT_ATTEMPTED (the partition drops back to
  its committed state and may propose again later); ``Partition`` keeps one change in
  flight anyway.
- **Batched, one request in flight.** Whatever is unsent when the previous answer arrives
  goes in the next AlterPartition, with this broker's id and epoch (KIP-380).
- **Retries.** A connection failure, a timeout or a top-level error (NOT_CONTROLLER while
  the controller moves, STALE_BROKER_EPOCH before the controller has seen this broker's
  registration) resends the same proposals after a backoff, to whichever broker
  ``metadata.controller_id`` names by then, on the inter-broker listener. A partition
  missing from an answer is resent too.
- **Answers.** Each future gets the committed ``LeaderAndIsr`` (leader, leader epoch, ISR,
  partition epoch) or the partition's error code; it is never failed with an exception.

Versions: v2+ names topics by id (the MetadataCache has them from UpdateMetadata), v3
carries the ISR with broker epochs (-1: ZooKeeper mode does not check them); a batch with
a topic whose id is unknown here goes as v1, by name, as Kafka's ``canUseTopicIds``.
Runs on the broker's event loop only (no locks); in cluster mode only.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from strom.broker.metadata_cache import MetadataCache
from strom.broker.periodic import cancel_and_wait
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaError
from strom.cluster.zk_data import LeaderAndIsr
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from strom.protocol.messages.alter_partition_response import AlterPartitionResponse
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker

logger = logging.getLogger(__name__)

VERSIONS = range(0, 4)
TOPIC_IDS_FROM = 2
BROKER_EPOCHS_FROM = 3
ZERO_ID = uuid.UUID(int=0)

AlterPartitionAnswer = LeaderAndIsr | ErrorCode


@dataclass(frozen=True, slots=True)
class _Proposal:
    leader_and_isr: LeaderAndIsr
    future: asyncio.Future[AlterPartitionAnswer]


class AlterPartitionManager:
    """Sends leaders' ISR proposals to the active controller; see the module docstring."""

    def __init__(self, metadata: MetadataCache, broker_id: int, broker_epoch: Callable[[], int],
                 listener: Callable[[], str], *, request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 10_000, retry_backoff_ms: int = 100,
                 retry_backoff_max_ms: int = 1_000) -> None:
        self.metadata = metadata
        self.broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._listener = listener
        self.request_timeout_ms = request_timeout_ms
        self.connect_timeout_ms = connect_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        # Submitted and not answered yet (sent or not): at most one per partition.
        self._unsent: dict[TopicPartition, _Proposal] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._connection: BrokerConnection | None = None
        self._connected_to: tuple[int, str, int] | None = None
        self.requests_sent = 0  # for tests and logs: AlterPartition requests written

    @classmethod
    def for_broker(cls, broker: Broker) -> AlterPartitionManager:
        """The manager of a cluster's broker: its id, its epoch as it changes, the
        inter-broker listener (``Broker.inter_broker_listener``, resolved from the config)."""
        config = broker.config

        return cls(broker.metadata, broker.node_id, lambda: broker.broker_epoch, lambda: broker.inter_broker_listener,
                   connect_timeout_ms=config.replica_socket_timeout_ms)

    # -- the seam ------------------------------------------------------------------------
    def submit(self, topic_partition: TopicPartition, leader_and_isr: LeaderAndIsr
               ) -> asyncio.Future[AlterPartitionAnswer]:
        """Propose ``leader_and_isr`` (leader, its epoch, the proposed ISR, the partition
        epoch it was based on); the future has the committed state or the error."""
        future: asyncio.Future[AlterPartitionAnswer] = asyncio.get_running_loop().create_future()
        if topic_partition in self._unsent:
            future.set_result(ErrorCode.OPERATION_NOT_ATTEMPTED)
            return future
        self._unsent[topic_partition] = _Proposal(leader_and_isr, future)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"alter-partition-{self.broker_id}")
        self._wake.set()
        return future

    async def shutdown(self) -> None:
        """Stop sending; unanswered proposals are cancelled (their partitions ignore that)."""
        task, self._task = self._task, None
        await cancel_and_wait(task)
        self._close()
        for proposal in self._unsent.values():
            proposal.future.cancel()
        self._unsent.clear()

    # -- sending -------------------------------------------------------------------------
    async def _run(self) -> None:
        backoff = self.retry_backoff_ms
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._unsent:
                batch = dict(self._unsent)
                try:
                    version, response = await self._send(batch)
                except Exception as exc:  # connection, timeout, no controller yet -- or a bug of ours
                    if isinstance(exc, (KafkaError, OSError, _NoController)):
                        logger.warning("AlterPartition for %d partition(s) not answered (%s); retrying in %d ms",
                                       len(batch), exc, backoff)
                    else:  # must not strand the proposals either
                        logger.exception("AlterPartition for %d partition(s) failed; retrying in %d ms",
                                         len(batch), backoff)
                    self._close()
                    await asyncio.sleep(backoff / 1000)
                    backoff = min(backoff * 2, self.retry_backoff_max_ms)
                    continue
                error = ErrorCode.from_code(response.error_code)
                if error:
                    logger.warning("AlterPartition refused as a whole (%s); retrying in %d ms", error.name, backoff)
                    if error is ErrorCode.NOT_CONTROLLER:
                        self._close()
                    await asyncio.sleep(backoff / 1000)
                    backoff = min(backoff * 2, self.retry_backoff_max_ms)
                    continue
                backoff = self.retry_backoff_ms
                self._complete(batch, version, response)

    async def _send(self, batch: dict[TopicPartition, _Proposal]) -> tuple[int, AlterPartitionResponse]:
        connection = await self._controller_connection()
        version = connection.version_for(AlterPartitionRequest.API_KEY or 56, VERSIONS)
        ids = {topic: self._topic_id(topic) for topic, _ in batch}
        if version >= TOPIC_IDS_FROM and any(topic_id == ZERO_ID for topic_id in ids.values()):
            version = TOPIC_IDS_FROM - 1  # a topic without a known id: by name, as Kafka
        request = _request(self.broker_id, self._broker_epoch(), batch, ids, version)
        self.requests_sent += 1
        response = await connection.send(request, version=version, timeout_ms=self.request_timeout_ms)
        assert isinstance(response, AlterPartitionResponse)
        return version, response

    def _topic_id(self, topic: str) -> uuid.UUID:
        found = self.metadata.get(topic)
        return ZERO_ID if found is None else found.topic_id

    async def _controller_connection(self) -> BrokerConnection:
        controller_id = self.metadata.controller_id
        listener = self._listener()
        broker = self.metadata.live_broker(controller_id) if controller_id >= 0 else None
        endpoint = None if broker is None else broker.endpoint(listener)
        if endpoint is None:
            raise _NoController(f"no controller endpoint on listener {listener} (controller {controller_id})")
        where = (controller_id, endpoint.host, endpoint.port)
        if self._connection is not None and not self._connection.closed and self._connected_to == where:
            return self._connection
        self._close()
        self._connection = await BrokerConnection.open(
            endpoint.host, endpoint.port, node_id=controller_id, client_id=f"broker-{self.broker_id}-alter-partition",
            request_timeout_ms=self.request_timeout_ms, connect_timeout_ms=self.connect_timeout_ms)
        self._connected_to = where
        return self._connection

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._connection = None
        self._connected_to = None

    def _complete(self, batch: dict[TopicPartition, _Proposal], version: int,
                  response: AlterPartitionResponse) -> None:
        """Resolve each sent proposal the answer names; one it leaves out is sent again."""
        names = {self._topic_id(topic): topic for topic, _ in batch}
        answers: dict[TopicPartition, AlterPartitionAnswer] = {}
        for topic in response.topics:
            name = names.get(topic.topic_id) if version >= TOPIC_IDS_FROM else topic.topic_name
            if not name:
                logger.error("AlterPartition answered for a topic not asked about: %s", topic)
                continue
            for partition in topic.partitions:
                error = ErrorCode.from_code(partition.error_code)
                answers[(name, partition.partition_index)] = error if error else LeaderAndIsr(
                    partition.leader_id, partition.leader_epoch, tuple(partition.isr), partition.partition_epoch)
        for key, proposal in batch.items():
            answer = answers.get(key)
            if answer is None:
                logger.warning("AlterPartition answer left out %s-%d; sending it again", *key)
                continue
            if self._unsent.get(key) is proposal:
                del self._unsent[key]
            if not proposal.future.done():
                proposal.future.set_result(answer)
        if self._unsent:
            self._wake.set()


class _NoController(Exception):
    """No live controller with an endpoint on the inter-broker listener is known yet."""


def _request(broker_id: int, broker_epoch: int, batch: dict[TopicPartition, _Proposal],
             ids: dict[str, uuid.UUID], version: int) -> AlterPartitionRequest:
    by_topic: dict[str, list[PartitionData]] = {}
    for (topic, index), proposal in batch.items():
        state = proposal.leader_and_isr
        isr = tuple(state.isr)
        by_topic.setdefault(topic, []).append(PartitionData(
            partition_index=index, leader_epoch=state.leader_epoch,
            new_isr=isr if version < BROKER_EPOCHS_FROM else (),
            new_isr_with_epochs=tuple(BrokerState(r, -1) for r in isr) if version >= BROKER_EPOCHS_FROM else (),
            partition_epoch=state.partition_epoch))
    return AlterPartitionRequest(broker_id=broker_id, broker_epoch=broker_epoch, topics=tuple(
        TopicData(topic_name=topic if version < TOPIC_IDS_FROM else "",
                  topic_id=ids[topic] if version >= TOPIC_IDS_FROM else ZERO_ID,
                  partitions=tuple(partitions))
        for topic, partitions in by_topic.items()))

