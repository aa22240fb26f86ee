"""KIP-890 part 1 when the transaction coordinator is another broker: a partition leader
asks it with AddPartitionsToTxn v4 ``VerifyOnly`` (Kafka's ``AddPartitionsToTxnManager``).

The coordinator node of a transactional id is the leader of its ``__transaction_state``
partition (``partition_for(id)``), as FindCoordinator answers; the leader reads it from
its metadata. Questions for one node are batched: while a request to the node is in
flight, the next ones wait and leave together in one request (one ``Transactions`` entry
per transactional id; a second question for an id already in the batch waits for the
next one, since the request's map is keyed by id). The request goes on the inter-broker
listener, one connection per coordinator node, kept open (the pattern of
``marker_writer.BrokerMarkerWriter``).

The answer is the coordinator's per partition. What the leader cannot learn is answered
as Kafka's manager does: no coordinator known, COORDINATOR_NOT_AVAILABLE; a node that
cannot be reached or times out, NETWORK_EXCEPTION; a top-level error, that error for
every partition. ``verification.produce_refusal`` turns these into NOT_ENOUGH_REPLICAS,
retriable for the producer.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from strom.broker.transaction.transaction_log import TRANSACTION_STATE_TOPIC
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.client.connection import BrokerConnection

logger = logging.getLogger(__name__)

VERIFY_ONLY_VERSIONS = range(4, 6)  # v5 differs from v4 only in what a client may be told (KIP-890 part 2)

Answers = dict[TopicPartition, ErrorCode]


@dataclass(slots=True)
class _Question:
    """One verification waiting for its coordinator's answer."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    answer: asyncio.Future[Answers] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class AddPartitionsToTxnManager:
    """Sends a broker's VerifyOnly questions to the coordinators that own their ids."""

    def __init__(self, node_id: int, coordinator_node: Callable[[str], int],
                 endpoint: Callable[[int], tuple[str, int] | None], request_timeout_ms: int = 30_000) -> None:
        self.node_id = node_id
        self.coordinator_node = coordinator_node  # a transactional id's coordinator node; -1: none known
        self.endpoint = endpoint  # a node's inter-broker (host, port); None: not live there
        self.request_timeout_ms = request_timeout_ms
        self.requests_sent = 0  # AddPartitionsToTxn v4 requests sent (a batch counts once)
        self._pending: dict[int, list[_Question]] = {}  # by coordinator node
        self._senders: dict[int, asyncio.Task[None]] = {}
        self._connections: dict[int, tuple[tuple[str, int], BrokerConnection]] = {}

    @classmethod
    def for_broker(cls, broker: Broker) -> AddPartitionsToTxnManager:
        """The coordinator of an id is the leader of its ``__transaction_state`` partition,
        reached on the inter-broker listener, both read from the broker's metadata."""
        def coordinator_node(transactional_id: str) -> int:
            partition = broker.transaction_coordinator.state_manager.partition_for(transactional_id)
            state = broker.metadata.partition_state(TRANSACTION_STATE_TOPIC, partition)
            return state.leader if state is not None else -1

        def endpoint(node: int) -> tuple[str, int] | None:
            live = broker.metadata.live_broker(node)
            found = None if live is None else live.endpoint(broker.inter_broker_listener)
            return None if found is None else (found.host, found.port)

        return cls(broker.node_id, coordinator_node, endpoint)

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: Sequence[TopicPartition]) -> Answers:
        """The coordinator's answer for each of ``partitions``."""
        node = self.coordinator_node(transactional_id)
        if node < 0 or node == self.node_id:  # no leader, or metadata behind this broker's own state
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        question = _Question(transactional_id, producer_id, producer_epoch, tuple(partitions))
        self._pending.setdefault(node, []).append(question)
        if node not in self._senders:
            self._senders[node] = asyncio.get_running_loop().create_task(
                self._drain(node), name=f"AddPartitionsToTxn v4 to broker {node}")
        return await question.answer

    async def _drain(self, node: int) -> None:
        """Send the node's waiting questions, a batch at a time, until none is left."""
        batch: dict[str, _Question] = {}
        try:
            while questions := self._pending.pop(node, None):
                batch = {}
                for question in questions:
                    if question.transactional_id in batch:
                        self._pending.setdefault(node, []).append(question)  # the next batch
                    else:
                        batch[question.transactional_id] = question
                answers = await self._send(node, list(batch.values()))
                for question in batch.values():
                    if not question.answer.done():
                        question.answer.set_result(answers.get(question.transactional_id) or dict.fromkeys(
                            question.partitions, ErrorCode.NETWORK_EXCEPTION))
        finally:
            del self._senders[node]
            for question in [*batch.values(), *self._pending.pop(node, [])]:  # only if cancelled mid-way
                if not question.answer.done():
                    question.answer.set_result(dict.fromkeys(question.partitions, ErrorCode.NETWORK_EXCEPTION))

    async def _send(self, node: int, batch: list[_Question]) -> dict[str, Answers]:
        # Imported here: a single node never sends one.
        from strom.client.errors import KafkaError
        from strom.protocol.messages.add_partitions_to_txn_request import (
            AddPartitionsToTxnRequest,
            AddPartitionsToTxnTopic,
            AddPartitionsToTxnTransaction,
        )
        from strom.protocol.messages.add_partitions_to_txn_response import (
            AddPartitionsToTxnResponse,
        )

        transactions = []
        for question in batch:
            by_topic: dict[str, list[int]] = {}
            for topic, index in question.partitions:
                by_topic.setdefault(topic, []).append(index)
            transactions.append(AddPartitionsToTxnTransaction(
                transactional_id=question.transactional_id, producer_id=question.producer_id,
                producer_epoch=question.producer_epoch, verify_only=True,
                topics=tuple(AddPartitionsToTxnTopic(topic, tuple(indexes)) for topic, indexes in by_topic.items())))
        request = AddPartitionsToTxnRequest(transactions=tuple(transactions))
        try:
            connection = await self._connection(node)
            version = connection.version_for(AddPartitionsToTxnRequest.API_KEY or 24, VERIFY_ONLY_VERSIONS)
            self.requests_sent += 1
            response = await connection.send(request, version=version, timeout_ms=self.request_timeout_ms)
        except (KafkaError, OSError) as exc:  # TimeoutError is an OSError
            logger.info("AddPartitionsToTxn (VerifyOnly) to broker %d failed: %s", node, exc)
            self._drop(node)
            return {}
        assert isinstance(response, AddPartitionsToTxnResponse)
        if response.error_code:
            top = ErrorCode.from_code(response.error_code)
            return {question.transactional_id: dict.fromkeys(question.partitions, top) for question in batch}
        answers: dict[str, Answers] = {}
        for result in response.results_by_transaction:
            answers[result.transactional_id] = {
                (topic.name, partition.partition_index): ErrorCode.from_code(partition.partition_error_code)
                for topic in result.topic_results for partition in topic.results_by_partition}
        for question in batch:  # a partition the coordinator left out was not verified
            found = answers.setdefault(question.transactional_id, {})
            for tp in question.partitions:
                found.setdefault(tp, ErrorCode.NETWORK_EXCEPTION)
        return answers

    async def _connection(self, node: int) -> BrokerConnection:
        from strom.client.connection import BrokerConnection
        from strom.client.errors import KafkaError

        where = self.endpoint(node)
        if where is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"broker {node} has no inter-broker endpoint")
        known = self._connections.get(node)
        if known is not None and known[0] == where and not known[1].closed:
            return known[1]
        self._drop(node)  # one sender per node: no other attempt runs meanwhile
        connection = await BrokerConnection.open(
            *where, node_id=node, client_id=f"broker-{self.node_id}-txn-verification",
            request_timeout_ms=self.request_timeout_ms)
        self._connections[node] = (where, connection)
        return connection

    def _drop(self, node: int) -> None:
        known = self._connections.pop(node, None)
        if known is not None:
            known[1].close()

    async def shutdown(self) -> None:
        """Stop the senders (their questions answer NETWORK_EXCEPTION) and close the connections."""
        for task in list(self._senders.values()):
            task.cancel()
        for node in list(self._connections):
            self._drop(node)
