"""``ExactlyOnceParallelConsumer``: read-process-write into Kafka topics, exactly once.

Kafka's exactly-once (KIP-98, KIP-447) needs the outputs of a set of records and the
offsets past those records in *one* transaction: if it commits, both are visible; if not,
neither is, and the records are read again. A parallel consumer finishes records out of
order, so the set of finished records is not always a prefix of each partition — and a
committed offset can only name a prefix. Outputs of a record past the committed offset
must therefore never be in a committed transaction, or a restart repeats them.

The mode keeps that invariant the simplest way: per commit interval one transaction.

* Handlers return their output records (``OutputRecord``s, or None); the consumer sends
  them through its one transactional producer before the record counts as finished.
* At the interval's end fetching stops and each partition gets a **cut**: the offset
  after its newest started record. Nothing at or past the cut starts; the workers finish
  what runs and the unstarted records below the cut (gaps left by out-of-order lanes),
  so the finished records are exactly the prefix below the cut. The cuts go in with
  ``send_offsets_to_transaction`` and the transaction commits; the next one begins and
  fetching resumes. The cost: while the last records before the cut run, workers that
  finish get nothing new, so parallelism falls at each commit, and a slow record holds
  the commit (and every partition) until it finishes.
* A handler that raises, or a commit that fails with an abortable error, **aborts** the
  transaction and rewinds every partition to its last committed offset; fetching resumes
  after ``retry.backoff.ms`` (doubling per failure of the same record). After
  ``max.attempts`` failures of one record the consumer stops with ``ProcessingFailedError``.
  A fenced producer (another instance took the ``transactional.id``) stops it at once.
* On **revocation** the transaction is drained and committed first (as KIP-447's
  consumers do), then the partitions go; on **loss** (out of the group) it is aborted.

Offsets travel only through the transaction (TxnOffsetCommit), never the group commit, so
the offset map of the at-least-once mode is not written: after a drain there is nothing
finished past the committed offset. The consumer reads with ``isolation.level =
read_committed``. Give each instance a stable ``transactional.id``: a restarted instance
then aborts what its predecessor left open at ``init_transactions``, instead of waiting
out ``transaction.timeout.ms``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from strom.alo.config import ParallelConsumerConfig
from strom.alo.offset_tracker import OffsetTracker
from strom.alo.partition_buffers import WorkItem
from strom.alo.processor import ParallelConsumer, ProcessingFailedError
from strom.alo.worker_pool import is_async_handler
from strom.client.config import ConsumerConfig
from strom.client.consumer import AsyncConsumer
from strom.client.errors import (
    ClientClosedError,
    ConfigError,
    IllegalStateError,
    KafkaError,
    ProducerFencedError,
)
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_FATAL = (ProducerFencedError, IllegalStateError, ClientClosedError)


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A record the handler wants written, in the same transaction as its input's offset."""

    topic: str
    value: bytes | None = None
    key: bytes | None = None
    partition: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()


Outputs = Iterable[OutputRecord] | None


class ExactlyOnceParallelConsumer(ParallelConsumer):
    """A ``ParallelConsumer`` whose outputs and offsets commit together, per interval.

    ``handler(record)`` (plain or coroutine function) returns the ``OutputRecord``s to
    write; raising aborts the current transaction and replays from the last commit.
    """

    def __init__(self, consumer_config: ConsumerConfig | Mapping[str, object],
                 handler: Callable[[ConsumerRecord], Any],
                 config: ParallelConsumerConfig | Mapping[str, object] | None = None, *,
                 transactional_id: str, producer_config: Mapping[str, object] | None = None,
                 **kwargs: Any) -> None:
        self._user_handler = handler
        wrapped = self._async_handler if is_async_handler(handler) else self._thread_handler
        super().__init__(consumer_config, wrapped, config, **kwargs)
        if self.config.dead_letter_topic is not None:
            raise ConfigError("dead.letter.topic is not supported in exactly-once mode")
        self.consumer = AsyncConsumer(self.consumer.config.with_overrides(None, isolation_level="read_committed"))
        settings = self.consumer.config
        self.producer = AsyncProducer({"bootstrap.servers": settings.bootstrap_servers,
                                       "client.id": f"{settings.client_id}-eos",
                                       **dict(producer_config or {}),
                                       "transactional.id": transactional_id})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._rewind_to: dict[TopicPartition, int] = {}  # the offset a rewind fetches from
        self._failed_item: tuple[WorkItem, BaseException] | None = None
        self._failures: dict[tuple[TopicPartition, int], int] = {}
        self._hold_dispatch = False
        # The drain: per partition the offset after the newest record started when it
        # began; records from there on wait for the next transaction.
        self._cut: dict[TopicPartition, int] | None = None
        self._started: dict[TopicPartition, int] = {}
        self._deferred: list[WorkItem] = []
        self._wake = asyncio.Event()
        self.aborts = 0  # transactions aborted (failures, refused commits, lost partitions)

    # -- the handler's outputs -------------------------------------------------------------
    async def _async_handler(self, record: ConsumerRecord) -> None:
        await self._emit(await self._user_handler(record))

    def _thread_handler(self, record: ConsumerRecord) -> None:
        outputs = self._user_handler(record)
        if outputs is not None:
            assert self._loop is not None
            asyncio.run_coroutine_threadsafe(self._emit(outputs), self._loop).result()

    async def _emit(self, outputs: Outputs) -> None:
        """Into the open transaction: sent before the record counts as finished, so the
        drain at commit time covers them; ``commit_transaction`` flushes them."""
        for output in outputs or ():
            await self.producer.send(output.topic, output.value, output.key, partition=output.partition,
                                     headers=output.headers)

    # -- lifetime ------------------------------------------------------------------------
    async def start(self) -> ExactlyOnceParallelConsumer:
        if self._poll_task is None and not self._closed:
            self._loop = asyncio.get_running_loop()
            await self.producer.init_transactions()
            self.producer.begin_transaction()
        await super().start()
        return self

    async def close(self) -> None:
        """Drain and commit what was fetched, then close as the at-least-once consumer does."""
        if self._closed:
            return
        if self._failure is None and self._poll_task is not None:
            self._poll_task.cancel()  # no fetch may land after the final drain
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll_task
            await self._end_transaction("close", reopen=False)
        try:
            await super().close()
        finally:
            await self.producer.close()  # aborts a transaction still open

    # -- work ----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        """The base dispatch, except that while a transaction drains (``_cut`` set) a record
        at or past its partition's cut is set aside, and after a failure nothing starts."""
        pool = self._pool
        if pool is None or self._closing or self._hold_dispatch:
            return
        cut, started = self._cut, self._started
        free = pool.workers - self._running
        take, submit = self._buffers.take, pool.submit
        while free > 0:
            item = take()
            if item is None:
                break
            tp, offset = item.tracker.topic_partition, item.record.offset
            if cut is not None and offset >= cut.get(tp, -1):
                self._deferred.append(item)  # its lane stays busy: nothing after it is taken
                continue
            if offset > started.get(tp, -1):
                started[tp] = offset
            item.attempts += 1
            self._running += 1
            free -= 1
            submit(item)

    def _put_back_deferred(self) -> None:
        """The records set aside during the drain go back first in their lanes, in order."""
        deferred, self._deferred = self._deferred, []
        for item in reversed(deferred):
            if not self._buffers.put_back(item):
                self._forget(item)

    def _on_results(self, results: list[tuple[WorkItem, BaseException | None]]) -> None:
        super()._on_results(results)
        self._wake.set()

    def _failed(self, item: WorkItem, error: BaseException) -> None:
        """No retry inside a transaction: abort it, and replay from the last commit."""
        if self._failed_item is None:
            self._failed_item = (item, error)
            self._hold_dispatch = True
        else:
            self._forget(item)
        self._wake.set()
        if not self._commit_lock.locked():
            self._spawn(self._end_transaction("failure"))

    def _accept(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        if records and tp not in self._rewind_to and tp in self._trackers:
            self._rewind_to[tp] = records[0].offset  # nothing committed: replay from the first fetched
        super()._accept(tp, records)

    # -- transactions ----------------------------------------------------------------------
    async def _commit_loop(self) -> None:
        interval = self.config.commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            await self._end_transaction("interval")

    async def _commit(self, partitions: Iterable[TopicPartition], *, reason: str) -> bool:
        return await self._end_transaction(reason)

    async def _end_transaction(self, reason: str, *, reopen: bool = True) -> bool:
        """Drain what was fetched, then commit it with its offsets (or abort on a failure).
        True when nothing was refused."""
        async with self._commit_lock:
            if self._failure is not None:
                return False
            self._fetch_gate.clear()
            self._cut = {tp: offset + 1 for tp, offset in self._started.items()}
            try:
                await self._settle()
                self._put_back_deferred()
                if self._failed_item is not None:
                    await self._abort(reason)
                    return False
                return await self._commit_drained(reason)
            except KafkaError as exc:  # fatal, or the abort itself failed: stop rather than guess
                self._fail(exc)
                return False
            finally:
                self._put_back_deferred()
                self._cut = None
                # Not when closing or revoking: a record started now would put its outputs
                # in the next transaction, which a revoked partition's (or a closing
                # consumer's) offsets would never join.
                if reopen and not self._closing:
                    self._fetch_gate.set()
                    self._dispatch()

    async def _settle(self) -> None:
        """Until every record below the cut is finished — those started, and unstarted ones
        in the gaps between them (out-of-order lanes) — so the finished records are a
        prefix of each partition; or, after a failure, until the records still running
        have returned (their outputs belong to the transaction about to be aborted)."""
        self._dispatch()
        while self._running:
            self._wake.clear()
            await self._wake.wait()

    async def _commit_drained(self, reason: str) -> bool:
        points: dict[TopicPartition, int] = {}
        for tp, tracker in self._trackers.items():
            offset = tracker.committable()
            if offset is not None and offset != tracker.committed:
                points[tp] = offset
        if not points:
            return True
        try:
            await self.producer.send_offsets_to_transaction(points, self.consumer.group_metadata())
            await self.producer.commit_transaction()
        except _FATAL:
            raise
        except KafkaError as exc:
            logger.info("transaction commit (%s) refused: %s; aborting and replaying", reason, exc)
            self._commit_failures += 1
            await self._abort(reason)
            return False
        for tp, offset in points.items():
            self._trackers[tp].mark_committed(offset, "")
            self._rewind_to[tp] = offset
        self._commits += 1
        if self._on_commit is not None:
            self._on_commit({tp: (offset, "") for tp, offset in points.items()})
        self.producer.begin_transaction()
        return True

    async def _abort(self, reason: str) -> None:
        """Abort, rewind every partition to its last commit, back off, begin again."""
        failed, self._failed_item = self._failed_item, None
        await self.producer.abort_transaction()
        self.aborts += 1
        for tp in list(self._trackers):
            self._replay(tp)
        if failed is not None:
            item, error = failed
            self._forget(item)
            key = (item.tracker.topic_partition, item.record.offset)
            attempts = self._failures[key] = self._failures.get(key, 0) + 1
            if self.config.max_attempts and attempts >= self.config.max_attempts:
                self._fail(ProcessingFailedError(item.record, attempts, error))
                return
            logger.info("%s-%d@%d failed (attempt %d: %r): transaction aborted (%s), replaying",
                        item.record.topic, item.record.partition, item.record.offset, attempts, error, reason)
            await asyncio.sleep(self.config.retry_delay(attempts))
        self._hold_dispatch = False
        self.producer.begin_transaction()

    def _replay(self, tp: TopicPartition) -> None:
        """Forget the partition's uncommitted records and fetch them again."""
        self._started.pop(tp, None)
        old = self._trackers[tp]
        old.revoked = True
        self._drop_buffered(tp)
        tracker = OffsetTracker(tp, old.committed)
        self._trackers[tp] = tracker
        self._buffers.open(tracker)
        start = self._rewind_to.get(tp, old.committed)
        if start is not None:
            with contextlib.suppress(KafkaError):
                self.consumer.seek(tp, start)

    # -- rebalances ----------------------------------------------------------------------
    async def _assigned(self, partitions: frozenset[TopicPartition]) -> None:
        await super()._assigned(partitions)
        for tp in partitions:
            committed = self._trackers[tp].committed
            if committed is not None:
                self._rewind_to[tp] = committed
            else:
                self._rewind_to.pop(tp, None)

    async def _revoked(self, partitions: frozenset[TopicPartition]) -> None:
        """Commit (or abort) the transaction before the partitions go, as KIP-447 asks."""
        mine = [tp for tp in partitions if tp in self._trackers]
        if mine and not await self._end_transaction("revocation", reopen=False):
            self._revocation_commit_failures += 1
        for tp in mine:
            if tp in self._trackers:
                self._trackers[tp].revoked = True
                self._drop_buffered(tp)
                self._release(tp)
                self._rewind_to.pop(tp, None)
                self._started.pop(tp, None)
        if not self._closing:
            self._fetch_gate.set()

    def _lost(self, partitions: frozenset[TopicPartition]) -> None:
        """The group moved on: this transaction may hold their outputs, so it is aborted."""
        super()._lost(partitions)
        for tp in partitions:
            self._rewind_to.pop(tp, None)
            self._started.pop(tp, None)
        self._hold_dispatch = True
        self._spawn(self._abort_lost())

    async def _abort_lost(self) -> None:
        async with self._commit_lock:
            self._fetch_gate.clear()
            try:
                while self._running:
                    self._wake.clear()
                    await self._wake.wait()
                await self._abort("lost partitions")
            except KafkaError as exc:
                self._fail(exc)
            finally:
                if not self._closing:
                    self._fetch_gate.set()


__all__ = ["ExactlyOnceParallelConsumer", "OutputRecord", "Outputs"]
