"""The producer's Sender: ready batches to their partition leaders, answers back to the records.

As the Java client's ``Sender``: it drains the ``RecordAccumulator`` by leader into
one Produce request per broker (up to ``max.in.flight.requests.per.connection`` per
broker), stamps idempotent batches with their producer id, epoch and per-partition
sequence, and turns each partition's answer into completed records, a retry (the
very same bytes, so the broker can drop a duplicate) or a failure. It also gets the
producer id (InitProducerId) before the first batch. A transactional producer's
``TransactionManager`` lives beside it, as Java's does: the sender sends a partition's
batches only once the coordinator has the partition in the transaction (``sendable``),
marks them transactional, fails what is not yet sent when the transaction must abort,
and reports each failed batch so the transaction cannot commit.

Everything runs on the application's event loop. An answer is handled in its
future's callback, which sends the answered partitions' next batches at once; the
sender task (``start``) only times what waits: linger, retries' backoff, expiry, a
missing leader, (re)connecting. A partition has at most one batch in flight (it is
muted in the accumulator until answered), so retries never reorder records.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import TYPE_CHECKING, Final

from strom.client.accumulator import RecordAccumulator
from strom.client.cluster import Cluster
from strom.client.config import ProducerConfig
from strom.client.connection import BrokerConnection
from strom.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from strom.client.producer_batch import ClosedBatch
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message
from strom.protocol.messages.init_producer_id_request import InitProducerIdRequest
from strom.protocol.messages.init_producer_id_response import InitProducerIdResponse
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from strom.protocol.messages.produce_response import ProduceResponse
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from strom.client.transaction_manager import TransactionManager

logger = logging.getLogger(__name__)

PRODUCE_VERSIONS: Final = range(3, 12)  # v3+ carries record batch v2 (the only format we build)
REFRESH_ERRORS: Final = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
})


class Sender:
    """Sends one producer's batches and settles their records by the brokers' answers."""

    def __init__(self, config: ProducerConfig, cluster: Cluster, accumulator: RecordAccumulator,
                 transactions: TransactionManager | None = None) -> None:
        self.config = config
        self._transactions = transactions
        self._cluster = cluster
        self._accumulator = accumulator
        self._task: asyncio.Task[None] | None = None
        self._in_flight: dict[int, int] = {}  # node -> requests outstanding
        self._connections: dict[int, BrokerConnection] = {}  # the open ones, for sending at once
        self._deadline: float | None = None  # loop time the sender task's timer fires
        self._sequences: dict[TopicPartition, int] = {}
        self._producer_id = -1
        self._producer_epoch = -1

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="strom-producer-sender")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def will_look_by(self, delay_ms: int) -> bool:
        """Whether the sender task's timer fires within ``delay_ms`` anyway (so a batch
        that may linger that long needs no wakeup of its own)."""
        deadline = self._deadline
        return deadline is not None and deadline <= asyncio.get_running_loop().time() + delay_ms / 1000

    def set_producer_id(self, producer_id: int, producer_epoch: int) -> None:
        """A (new) producer id and epoch, from a transactional producer's InitProducerId:
        every partition's sequence starts again at 0."""
        self._producer_id, self._producer_epoch = producer_id, producer_epoch
        self._sequences.clear()

    async def init_producer_id(self) -> None:
        assert self._cluster is not None
        deadline = time.monotonic() + self.config.max_block_ms / 1000
        while True:
            response = await self._cluster.request(None, InitProducerIdRequest(
                transactional_id=None, transaction_timeout_ms=2_147_483_647))
            assert isinstance(response, InitProducerIdResponse)
            code = ErrorCode.from_code(response.error_code)
            if code == ErrorCode.NONE:
                self._producer_id, self._producer_epoch = response.producer_id, response.producer_epoch
                return
            if not code.retriable or time.monotonic() > deadline:
                raise KafkaError(code, "InitProducerId (enable.idempotence=false avoids it)")
            await asyncio.sleep(self.config.retry_backoff_ms / 1000)

    async def _run(self) -> None:
        """Linger, expiry, retries' backoff and metadata waits; answers send on at once."""
        accumulator = self._accumulator
        assert accumulator is not None
        loop = asyncio.get_running_loop()
        while True:
            accumulator.wakeup.clear()
            expired = accumulator.expire_batches()
            if expired and self._transactions is not None:
                self._transactions.handle_failed_batch(KafkaTimeoutError(
                    f"{expired} batch(es) expired before they were sent (delivery.timeout.ms)"))
            next_delay, unknown_leader = self.send_ready()
            delay = None if next_delay is None else max(next_delay, 1) / 1000
            if unknown_leader:
                delay = min(delay or 1.0, self.config.retry_backoff_ms / 1000)
            self._deadline = None if delay is None else loop.time() + delay
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await accumulator.wakeup.wait()
            self._deadline = None

    def send_ready(self) -> tuple[int | None, bool]:
        """Send every sendable batch, grouped by leader; the ms until the next may be
        sendable, and whether a partition had no known leader."""
        accumulator, cluster = self._accumulator, self._cluster
        assert accumulator is not None and cluster is not None
        max_in_flight = self.config.max_in_flight_requests_per_connection
        ready, next_delay = accumulator.ready()
        transactions = self._transactions
        if transactions is not None:
            ready = self._transaction_sendable(transactions, ready)
        by_node: dict[int, list[TopicPartition]] = {}
        unknown_leader = False
        for tp in ready:
            leader = cluster.metadata.leader(*tp)
            if leader is None:
                unknown_leader = True
            elif self._in_flight.get(leader, 0) < max_in_flight:
                by_node.setdefault(leader, []).append(tp)
        if unknown_leader:
            self._refresh_metadata()
        for node, partitions in by_node.items():
            batches = accumulator.drain(partitions, self.config.max_request_size)
            if batches:
                self._send_batches(node, batches)
        return next_delay, unknown_leader

    def _transaction_sendable(self, transactions: TransactionManager,
                              ready: set[TopicPartition]) -> set[TopicPartition]:
        """Of the ready partitions, those whose batches may go in the transaction; batches
        not yet sent fail first if the transaction is aborting or failed."""
        failing = transactions.undrained_batch_error()
        if failing is not None:
            error, fatal = failing
            accumulator = self._accumulator
            assert accumulator is not None
            if fatal:
                accumulator.abort_batches(error)
            else:
                accumulator.abort_undrained_batches(error)
            ready, _ = accumulator.ready()  # retries of a transaction being aborted still go
        return transactions.sendable(ready)

    def _refresh_metadata(self) -> None:
        assert self._cluster is not None and self._accumulator is not None
        self._cluster.refresh_soon(self._accumulator.wakeup.set)

    def _send_batches(self, node: int, batches: dict[TopicPartition, ClosedBatch]) -> None:
        """Stamp sequences and send: straight onto an open connection, with the answer
        handled in its future's callback (no task, so an answer's partition is sent on
        within the event loop's next step); else in a task that connects first."""
        accumulator = self._accumulator
        assert accumulator is not None
        for tp, batch in batches.items():
            if self._producer_id >= 0 and not batch.has_sequence:
                sequence = self._sequences.get(tp, 0)
                batch.set_producer_state(self._producer_id, self._producer_epoch, sequence,
                                         is_transactional=self._transactions is not None)
                self._sequences[tp] = (sequence + batch.record_count) & 0x7FFFFFFF
            accumulator.mute(tp)  # one batch in flight per partition: retries keep order
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        connection = self._connections.get(node)
        if connection is not None and not connection.closed:
            try:
                answer = connection.send_nowait(
                    self._produce_request(batches), version=connection.version_for(ProduceRequest.API_KEY, PRODUCE_VERSIONS),
                    expect_response=self.config.acks != 0)
            except KafkaError as exc:  # closed meanwhile, or no Produce version in common
                self._request_done(node)
                self._handle_answer(batches, None, exc)
                return
            answer.add_done_callback(functools.partial(self._on_answer, node, batches))
            return
        task = asyncio.ensure_future(self._produce(node, batches))
        task.add_done_callback(lambda _: self._request_done(node))

    def _request_done(self, node: int) -> None:
        self._in_flight[node] -= 1
        if self._accumulator is not None:
            self._accumulator.wakeup.set()

    def _produce_request(self, batches: dict[TopicPartition, ClosedBatch]) -> ProduceRequest:
        topics: dict[str, list[PartitionProduceData]] = {}
        for (topic, partition), batch in batches.items():
            topics.setdefault(topic, []).append(PartitionProduceData(index=partition, records=batch.buffer))
        transactional_id = None if self._transactions is None else self._transactions.transactional_id
        return ProduceRequest(
            transactional_id=transactional_id, acks=self.config.acks, timeout_ms=self.config.request_timeout_ms,
            topic_data=tuple(TopicProduceData(name=t, partition_data=tuple(p)) for t, p in topics.items()))

    async def _produce(self, node: int, batches: dict[TopicPartition, ClosedBatch]) -> None:
        """Connect (or reconnect) to ``node``, then send as ``_send_batches`` does."""
        assert self._cluster is not None
        try:
            connection = await self._cluster.connection(node)
            self._connections[node] = connection
            version = connection.version_for(ProduceRequest.API_KEY, PRODUCE_VERSIONS)
            await connection.wait_writable()
            response = await connection.send(self._produce_request(batches), version=version,
                                             expect_response=self.config.acks != 0)
        except KafkaError as exc:
            self._handle_answer(batches, None, exc)
            return
        self._handle_answer(batches, response, None)

    def _on_answer(self, node: int, batches: dict[TopicPartition, ClosedBatch],
                   answer: asyncio.Future[Message]) -> None:
        self._in_flight[node] -= 1
        if answer.cancelled():
            error: BaseException | None = KafkaConnectionError("the produce request was cancelled")
        else:
            error = answer.exception()
        self._handle_answer(batches, None if error is not None else answer.result(), error)
        if self._accumulator is not None and self._cluster is not None:
            # The answered partitions' next batches go now; the sender task wakes only
            # to time what is left (a lingering batch, a retry's backoff, a leader).
            next_delay, unknown_leader = self.send_ready()
            if unknown_leader or (next_delay is not None and not self.will_look_by(next_delay)):
                self._accumulator.wakeup.set()

    def _handle_answer(self, batches: dict[TopicPartition, ClosedBatch], response: Message | None,
                       error: BaseException | None) -> None:
        """Complete, retry or fail each batch of a request by its partition's answer."""
        config = self.config
        if isinstance(error, (KafkaConnectionError, KafkaTimeoutError)):
            for batch in batches.values():
                self._retry_or_fail(batch, error)
            self._refresh_metadata()
            return
        if error is not None:
            for batch in batches.values():
                self._finish(batch, error)
            return
        if config.acks == 0:
            for batch in batches.values():
                self._finish(batch, None, -1)
            return
        assert isinstance(response, ProduceResponse)
        answered: set[TopicPartition] = set()
        refresh = False
        for topic_response in response.responses:
            for part in topic_response.partition_responses:
                tp = (topic_response.name, part.index)
                sent = batches.get(tp)
                if sent is None:
                    continue
                answered.add(tp)
                code = ErrorCode.from_code(part.error_code)
                if code in (ErrorCode.NONE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER):
                    self._finish(sent, None, part.base_offset, part.log_append_time_ms)
                    continue
                error = KafkaError(code, part.error_message or f"produce to {tp[0]}-{tp[1]}")
                refresh = refresh or code in REFRESH_ERRORS
                if code.retriable:
                    self._retry_or_fail(sent, error)
                else:
                    if sent.has_sequence and self._sequences.get(tp) == (sent.last_sequence + 1) & 0x7FFFFFFF:
                        # The broker refused it, so its sequence numbers are free again.
                        self._sequences[tp] = sent.base_sequence
                    self._finish(sent, error)
        for tp, batch in batches.items():
            if tp not in answered:
                self._retry_or_fail(batch, KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, f"no answer for {tp}"))
        if refresh:
            self._refresh_metadata()

    def _retry_or_fail(self, batch: ClosedBatch, error: KafkaError) -> None:
        accumulator = self._accumulator
        assert accumulator is not None
        age_ms = accumulator.clock_ms() - batch.created_ms
        if batch.attempts < self.config.retries and age_ms < self.config.delivery_timeout_ms:
            logger.info("retrying %d record(s) for %s-%d: %s", batch.record_count, *batch.topic_partition, error)
            accumulator.unmute(batch.topic_partition)
            accumulator.reenqueue(batch)
        else:
            self._finish(batch, error)

    def _finish(self, batch: ClosedBatch, error: BaseException | None, base_offset: int = -1,
                log_append_time: int = -1) -> None:
        assert self._accumulator is not None
        self._accumulator.unmute(batch.topic_partition, wake=False)  # the answer's handler sends on
        if error is None:
            batch.complete(base_offset, log_append_time)
            return
        if isinstance(error, KafkaError) and error.error_code in (
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.INVALID_PRODUCER_EPOCH,
                ErrorCode.UNKNOWN_PRODUCER_ID):
            # The partition's sequence is broken: later batches cannot succeed either.
            logger.error("idempotent producer fenced on %s: %s", batch.topic_partition, error)
        if self._transactions is not None:
            self._transactions.handle_failed_batch(error)
        batch.fail(error)
