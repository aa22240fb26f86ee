"""``ParallelConsumer``: one group consumer, many workers, commits only what is done.

The shape is the one "Concurrency and At Least Once Semantics with the New Kafka
Consumer" describes, on Strom's asyncio consumer:

* The **poll loop** fetches and never processes: records go into per-partition buffers
  (``partition_buffers``) and the loop polls again. Because it never waits for a
  handler, ``max.poll.interval.ms`` cannot run out however slow records are, and the
  group membership stays alive (heartbeats run in the coordinator's own task). When a
  buffer is full the loop **pauses** that partition and keeps polling; it **resumes** it
  once the buffer has drained to half. Global limits (records in flight, buffered bytes)
  pause every partition the same way: memory stays bounded.
* **Workers** (``worker_pool``) take records round-robin across partitions, within what
  the ordering mode allows.
* An **offset tracker** per partition (``offset_tracker``) tells the newest offset below
  which everything is done; a periodic commit stores exactly that, with the finished
  offsets past it as an offset map in the commit metadata (``metadata_codec``).
* On **revocation** a partition's unstarted records are dropped, its committable offset
  is committed before the partition is released, and results of its records still in
  progress are ignored (their tracker is marked revoked): the next owner redoes them.
* A failing record is **retried** with exponential backoff; after ``max.attempts`` it goes
  to the **dead-letter topic**, or, without one, the consumer stops (never skips it).

Everything but the handler itself runs on one event loop, so no state is locked.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any, Self

from strom.alo.config import ParallelConsumerConfig
from strom.alo.dead_letter import DeadLetterPublisher
from strom.alo.metrics import PartitionCounters, PartitionMetrics, ProcessorMetrics, RateMeter
from strom.alo.offset_tracker import OffsetTracker
from strom.alo.partition_buffers import PartitionBuffers, WorkItem
from strom.alo.worker_pool import WorkerPool, make_pool
from strom.client.config import ConsumerConfig
from strom.client.consumer import AsyncConsumer
from strom.client.errors import ConfigError, KafkaError
from strom.client.fetcher import ConsumerRecord
from strom.protocol.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# Told after each successful commit: partition -> (offset, metadata) as stored.
CommitCallback = Callable[[Mapping[TopicPartition, tuple[int, str]]], None]
_PAUSED_POLL_MS = 10  # with partitions paused, poll often so they resume promptly


class ProcessingFailedError(Exception):
    """A record failed ``max.attempts`` times and no dead-letter topic is configured."""

    def __init__(self, record: ConsumerRecord, attempts: int, cause: BaseException | None) -> None:
        super().__init__(f"{record.topic}-{record.partition}@{record.offset} failed {attempts} times: {cause!r}")
        self.record = record
        self.attempts = attempts
        self.__cause__ = cause


class _RebalanceListener:
    """The consumer's listener: the processor's bookkeeping first, then the application's."""

    def __init__(self, processor: ParallelConsumer, application: Any) -> None:
        self._processor = processor
        self._application = application

    async def on_partitions_revoked(self, partitions: frozenset[TopicPartition]) -> None:
        await self._processor._revoked(partitions)
        await self._forward("on_partitions_revoked", partitions)

    async def on_partitions_lost(self, partitions: frozenset[TopicPartition]) -> None:
        self._processor._lost(partitions)
        await self._forward("on_partitions_lost", partitions)

    async def on_partitions_assigned(self, partitions: frozenset[TopicPartition]) -> None:
        await self._processor._assigned(partitions)
        await self._forward("on_partitions_assigned", partitions)

    async def _forward(self, name: str, partitions: frozenset[TopicPartition]) -> None:
        method = getattr(self._application, name, None)
        if method is not None:
            result = method(partitions)
            if asyncio.iscoroutine(result):
                await result


class ParallelConsumer:
    """Process a group's records with many workers, at least once.

    ``handler(record)`` is a plain function (run on ``max.concurrency`` threads) or a
    coroutine function (run as that many tasks). Raising means the record failed.
    """

    def __init__(self, consumer_config: ConsumerConfig | Mapping[str, object],
                 handler: Callable[[ConsumerRecord], Any],
                 config: ParallelConsumerConfig | Mapping[str, object] | None = None, *,
                 listener: Any = None, on_commit: CommitCallback | None = None, **overrides: object) -> None:
        if isinstance(consumer_config, ConsumerConfig):
            consumer_settings = consumer_config
        else:
            consumer_settings = ConsumerConfig.from_properties(consumer_config)
        if consumer_settings.group_id is None:
            raise ConfigError("the parallel consumer needs a group.id: it commits to its group")
        explicit = consumer_config if isinstance(consumer_config, Mapping) else {}
        if any(k.replace("_", ".") == "enable.auto.commit" and str(v).lower() == "true" for k, v in explicit.items()):
            raise ConfigError("enable.auto.commit must be false: the parallel consumer commits what is done itself")
        self.consumer = AsyncConsumer(consumer_settings.with_overrides(None, enable_auto_commit=False))
        if isinstance(config, ParallelConsumerConfig):
            self.config = config if not overrides else ParallelConsumerConfig.from_properties(
                {**_as_properties(config), **overrides})
        else:
            self.config = ParallelConsumerConfig.from_properties(dict(config or {}), **overrides)
        self.handler = handler
        self._application_listener = listener
        self._on_commit = on_commit
        self._buffers = PartitionBuffers(self.config.ordering)
        self._trackers: dict[TopicPartition, OffsetTracker] = {}
        self._counters: dict[TopicPartition, PartitionCounters] = {}
        self._paused: set[TopicPartition] = set()
        self._pool: WorkerPool | None = None
        self._dead_letters = (DeadLetterPublisher(self.config.dead_letter_topic, {
            "bootstrap.servers": consumer_settings.bootstrap_servers,
            "client.id": f"{consumer_settings.client_id}-dlt"}) if self.config.dead_letter_topic else None)
        self._running = 0  # with a worker (or being dead-lettered)
        self._in_flight = 0  # fetched and not finished
        self._held_bytes = 0
        self._retry_timers: dict[WorkItem, asyncio.TimerHandle] = {}
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._commit_lock = asyncio.Lock()
        self._rate = RateMeter()
        self._totals = PartitionCounters()
        self._commits = self._commit_failures = self._revocation_commit_failures = 0
        self._topics: list[str] | None = None
        self._pattern: str | re.Pattern[str] | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._commit_task: asyncio.Task[None] | None = None
        self._stopped = asyncio.Event()
        self._idle = asyncio.Event()
        # Cleared while the exactly-once mode (exactly_once.py) drains a transaction: no new fetches.
        self._fetch_gate = asyncio.Event()
        self._fetch_gate.set()
        self._failure: BaseException | None = None
        self._closing = False
        self._closed = False

    # -- lifetime ------------------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None) -> None:
        """The topics to consume (or a pattern); takes effect at ``start``."""
        self._topics = list(topics) if topics is not None else None
        self._pattern = pattern

    async def start(self) -> Self:
        if self._closed:
            raise ConfigError("the parallel consumer is closed")
        if self._poll_task is not None:
            return self
        if self._topics is None and self._pattern is None:
            raise ConfigError("subscribe() to topics or a pattern before start()")
        await self.consumer.start()
        self.consumer.subscribe(self._topics, pattern=self._pattern,
                                listener=_RebalanceListener(self, self._application_listener))
        self._pool = make_pool(self.handler, self.config.max_concurrency, self._on_results)
        self._poll_task = asyncio.create_task(self._poll_loop(), name="alo-poll")
        self._commit_task = asyncio.create_task(self._commit_loop(), name="alo-commit")
        return self

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def run(self) -> None:
        """Start, then wait until ``close()`` — or raise the error that stopped processing."""
        await self.start()
        await self._stopped.wait()
        if self._failure is not None:
            raise self._failure

    async def close(self) -> None:
        """Stop fetching, drop unstarted records, let running ones finish (up to
        ``shutdown.timeout.ms``), commit what is done, and leave the group."""
        if self._closed:
            return
        self._closed = self._closing = True
        for task in (self._poll_task, self._commit_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        for tp in list(self._buffers.buffers):
            self._drop_buffered(tp)
        for item, timer in list(self._retry_timers.items()):
            timer.cancel()
            self._forget(item)
        self._retry_timers.clear()
        if self._running:
            self._idle.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.shutdown_timeout_ms / 1000):
                    await self._idle.wait()
        for task in list(self._side_tasks):
            task.cancel()
        await asyncio.gather(*self._side_tasks, return_exceptions=True)
        try:
            if self._trackers:
                await self._commit(self._trackers.keys(), reason="close")
        finally:
            if self._pool is not None:
                await self._pool.close()
            if self._dead_letters is not None:
                await self._dead_letters.close()
            await self.consumer.close()  # revokes: the listener's final commit finds nothing new
            self._stopped.set()

    def _fail(self, error: BaseException) -> None:
        if self._failure is None:
            logger.error("parallel consumer stopping: %s", error)
            self._failure = error
        self._closing = True
        self._stopped.set()

    # -- the poll loop -------------------------------------------------------------------
    async def _poll_loop(self) -> None:
        consumer, config = self.consumer, self.config
        while not self._closing:
            if not self._fetch_gate.is_set():
                await self._fetch_gate.wait()
                continue
            try:
                batches = await consumer.getmany(
                    timeout_ms=_PAUSED_POLL_MS if self._paused else config.poll_timeout_ms)
            except KafkaError as exc:
                if not exc.retriable:
                    self._fail(exc)
                    return
                logger.info("poll failed, polling again: %s", exc)
                await asyncio.sleep(consumer.config.retry_backoff_ms / 1000)
                continue
            for tp, records in batches.items():
                self._accept(tp, records)
            self._dispatch()
            self._flow_control()
            self._rate.sample(self._totals.completed)

    def _accept(self, tp: TopicPartition, records: list[ConsumerRecord]) -> None:
        buffer = self._buffers.buffers.get(tp)
        if buffer is None:
            return  # revoked between the fetch and now
        tracker, add, lane_of = buffer.tracker, self._buffers.add, buffer.lane_of
        skipped = 0
        for record in records:
            if not tracker.add(record.offset):
                skipped += 1
                continue
            item = WorkItem(record, tracker, lane_of(record))
            add(buffer, item)
            self._held_bytes += item.size
        self._in_flight += len(records) - skipped
        if skipped:
            self._counters[tp].skipped += skipped
            self._totals.skipped += skipped

    def _flow_control(self) -> None:
        """Pause partitions whose buffers are full, resume those drained to half."""
        config = self.config
        over = (self._in_flight >= config.max_records_in_flight
                or self._held_bytes >= config.max_buffered_bytes)
        under = (self._in_flight <= config.max_records_in_flight // 2
                 and self._held_bytes <= config.max_buffered_bytes // 2)
        per_partition = config.max_buffered_records_per_partition
        span = config.max_uncommitted_offsets_per_partition
        pause, resume = [], []
        for tp, buffer in self._buffers.buffers.items():
            if tp in self._paused:
                if (under and buffer.buffered <= per_partition // 2
                        and buffer.tracker.uncommitted_span <= span // 2):
                    resume.append(tp)
            elif over or buffer.buffered >= per_partition or buffer.tracker.uncommitted_span >= span:
                pause.append(tp)
        assigned = self.consumer.assignment()
        pause = [tp for tp in pause if tp in assigned]
        if pause:
            self.consumer.pause(*pause)
            self._paused.update(pause)
        if resume:
            self._paused.difference_update(resume)
            self.consumer.resume(*[tp for tp in resume if tp in assigned])

    # -- work ----------------------------------------------------------------------------
    def _dispatch(self) -> None:
        pool = self._pool
        if pool is None or self._closing:
            return
        free = pool.workers - self._running
        take, submit = self._buffers.take, pool.submit
        while free > 0:
            item = take()
            if item is None:
                break
            item.attempts += 1
            self._running += 1
            free -= 1
            submit(item)

    def _on_results(self, results: list[tuple[WorkItem, BaseException | None]]) -> None:
        """Workers' results, on the loop: finish, retry or dead-letter each, then refill."""
        for item, error in results:
            self._running -= 1
            if item.tracker.revoked:
                self._forget(item)  # the partition is someone else's now: not ours to commit
            elif error is None:
                self._finish(item)
            else:
                self._failed(item, error)
        if self._running == 0:
            self._idle.set()
        self._dispatch()

    def _finish(self, item: WorkItem, *, dead_lettered: bool = False) -> None:
        item.tracker.complete(item.record.offset)
        self._buffers.release(item)
        self._in_flight -= 1
        self._held_bytes -= item.size
        counters = self._counters[item.tracker.topic_partition]
        if dead_lettered:
            counters.dead_lettered += 1
            self._totals.dead_lettered += 1
        else:
            counters.completed += 1
            self._totals.completed += 1

    def _forget(self, item: WorkItem) -> None:
        """A record that will not finish here (revoked, or closing): release its memory."""
        self._in_flight -= 1
        self._held_bytes -= item.size

    def _failed(self, item: WorkItem, error: BaseException) -> None:
        item.last_error = error
        record, config = item.record, self.config
        if config.max_attempts and item.attempts >= config.max_attempts:
            if self._dead_letters is None:
                self._fail(ProcessingFailedError(record, item.attempts, error))
                return
            logger.warning("%s-%d@%d failed %d times (%r): to dead-letter topic %s", record.topic,
                           record.partition, record.offset, item.attempts, error, config.dead_letter_topic)
            self._running += 1
            self._spawn(self._dead_letter(item))
            return
        delay = config.retry_delay(item.attempts)
        logger.info("%s-%d@%d failed (attempt %d: %r); retrying in %.3f s", record.topic, record.partition,
                    record.offset, item.attempts, error, delay)
        self._counters[item.tracker.topic_partition].retries += 1
        self._totals.retries += 1
        self._retry_timers[item] = asyncio.get_running_loop().call_later(delay, self._retry_due, item)

    def _retry_due(self, item: WorkItem) -> None:
        self._retry_timers.pop(item, None)
        if item.tracker.revoked or not self._buffers.put_back(item):
            self._forget(item)
            return
        self._dispatch()

    async def _dead_letter(self, item: WorkItem) -> None:
        assert self._dead_letters is not None
        try:
            while True:
                try:
                    await self._dead_letters.publish(item.record, item.last_error, item.attempts)
                    break
                except KafkaError as exc:  # keep the record (and its lane) until it is stored
                    logger.warning("dead letter for %s-%d@%d not produced: %s", item.record.topic,
                                   item.record.partition, item.record.offset, exc)
                    await asyncio.sleep(self.config.retry_backoff_max_ms / 1000)
                if item.tracker.revoked:
                    break
        finally:
            self._on_dead_lettered(item)

    def _on_dead_lettered(self, item: WorkItem) -> None:
        self._running -= 1
        if item.tracker.revoked or self._closed:
            self._forget(item)
        else:
            self._finish(item, dead_lettered=True)
        if self._running == 0:
            self._idle.set()
        self._dispatch()

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)

    # -- commits -------------------------------------------------------------------------
    async def _commit_loop(self) -> None:
        interval = self.config.commit_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            changed = [tp for tp, tracker in self._trackers.items() if tracker.take_changed()]
            if changed:
                await self._commit(changed, reason="interval")

    async def _commit(self, partitions: Iterable[TopicPartition], *, reason: str) -> bool:
        """Commit each partition's committable offset and offset map; False if refused.

        One commit at a time (a lock): a periodic commit retried inside the client must
        not land after the commit made on revocation and move the offset back."""
        async with self._commit_lock:
            config = self.config
            points: dict[TopicPartition, tuple[int, str]] = {}
            trackers = []
            for tp in partitions:
                tracker = self._trackers.get(tp)
                if tracker is None:
                    continue
                point = tracker.commit_point(encode=config.offset_metadata_encoding,
                                             max_bytes=config.offset_metadata_max_bytes)
                if point is not None:
                    points[tp] = point
                    trackers.append(tracker)
            if not points:
                return True
            try:
                await self.consumer.commit(points)
            except KafkaError as exc:
                logger.info("commit (%s) of %d partitions refused: %s", reason, len(points), exc)
                self._commit_failures += 1
                for tracker in trackers:
                    tracker.touch()
                return False
            for tracker in trackers:
                tracker.mark_committed(*points[tracker.topic_partition])
            self._commits += 1
            if self._on_commit is not None:
                self._on_commit(points)
            return True

    async def commit(self) -> bool:
        """Commit what is done now (the periodic commit does this every ``commit.interval.ms``)."""
        return await self._commit(list(self._trackers), reason="requested")

    # -- rebalances ----------------------------------------------------------------------
    async def _assigned(self, partitions: frozenset[TopicPartition]) -> None:
        """New partitions: a tracker from the group's committed offset and its offset map."""
        committed: dict[TopicPartition, Any] = {}
        if partitions:
            try:
                committed = await self.consumer.committed(partitions)
            except KafkaError as exc:  # without the map, finished records are merely redone
                logger.warning("committed offsets of %s not read (%s): no offset map", sorted(partitions), exc)
        for tp in partitions:
            found = committed.get(tp)
            tracker = OffsetTracker(tp, found.offset if found else None, found.metadata if found else "")
            self._trackers[tp] = tracker
            self._buffers.open(tracker)
            self._counters.setdefault(tp, PartitionCounters())
            if tracker.restored():
                logger.info("%s-%d: %d records after offset %d finished earlier; they will be skipped",
                            tp[0], tp[1], len(tracker.restored()), tracker.committed)

    async def _revoked(self, partitions: frozenset[TopicPartition]) -> None:
        """Drop unstarted records, commit what is done, then let the partitions go."""
        mine = [tp for tp in partitions if tp in self._trackers]
        for tp in mine:
            self._drop_buffered(tp)
            self._rewind(tp)
        if mine and not await self._commit(mine, reason="revocation"):
            # The next owner starts from an older commit and repeats finished work.
            self._revocation_commit_failures += 1
        for tp in mine:
            self._release(tp)

    def _lost(self, partitions: frozenset[TopicPartition]) -> None:
        """Already someone else's: nothing may be committed for them."""
        for tp in partitions:
            if tp in self._trackers:
                self._drop_buffered(tp)
                self._rewind(tp)
                self._release(tp)

    def _rewind(self, tp: TopicPartition) -> None:
        """Stop taking a departing partition's records: results of its records still in
        progress are ignored from here on (the tracker is marked revoked).

        The consumer forgets the partition's fetch position once the listener returns (as
        the Java client does), so if the group hands it back, fetching restarts from the
        committed offset and the buffered records dropped here are fetched again.
        """
        self._trackers[tp].revoked = True

    def _drop_buffered(self, tp: TopicPartition) -> None:
        records, size = self._buffers.close(tp)
        self._in_flight -= records
        self._held_bytes -= size
        if records:
            self._counters[tp].dropped += records
            self._totals.dropped += records

    def _release(self, tp: TopicPartition) -> None:
        self._trackers.pop(tp)
        self._paused.discard(tp)

    # -- metrics -------------------------------------------------------------------------
    def metrics(self) -> ProcessorMetrics:
        totals = self._totals
        partitions = {}
        for tp, tracker in self._trackers.items():
            counters = self._counters[tp]
            committable = tracker.committable()
            try:
                high = self.consumer.highwater(tp)
            except KafkaError:
                high = None
            buffer = self._buffers.buffers.get(tp)
            partitions[tp] = PartitionMetrics(
                lag=(high - committable) if high is not None and committable is not None else None,
                committable=committable, committed=tracker.committed,
                buffered=buffer.buffered if buffer is not None else 0, in_flight=tracker.incomplete,
                completed=counters.completed, completed_per_second=counters.rate.rate(counters.completed),
                retries=counters.retries, dead_lettered=counters.dead_lettered,
                skipped=counters.skipped)
        return ProcessorMetrics(
            partitions=partitions, running=self._running, in_flight=self._in_flight,
            buffered=self._buffers.buffered, buffered_bytes=self._held_bytes, paused=len(self._paused),
            completed=totals.completed, completed_per_second=self._rate.rate(totals.completed),
            window_s=self._rate.window_s, retries=totals.retries, dead_lettered=totals.dead_lettered,
            skipped=totals.skipped, dropped=totals.dropped, commits=self._commits,
            commit_failures=self._commit_failures,
            revocation_commit_failures=self._revocation_commit_failures)


def _as_properties(config: ParallelConsumerConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}
