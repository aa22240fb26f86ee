"""``AsyncConsumer``: the pull-based consumer of Kafka's design, on asyncio.

The application pulls (``poll``, ``getmany``, ``async for``, ``poll_arrow``); a
background task keeps fetches in flight so data is waiting when it asks. Partitions
come either from a consumer group (``subscribe``: the coordinator hands out
assignments and stores committed offsets) or from the application (``assign``).

A partition's starting position is, in order: a ``seek``, the group's committed
offset, then ``auto.offset.reset``. Positions advance only as records are returned,
so what a commit of the current positions says is exactly "everything returned so
far has been processed" — Kafka's at-least-once contract when commits follow
processing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from strom.client.cluster import Cluster
from strom.client.config import ConsumerConfig
from strom.client.errors import ClientClosedError, ConfigError, KafkaError
from strom.client.fetcher import EARLIEST, LATEST, ConsumerRecord, Fetcher
from strom.protocol.error_codes import ErrorCode
from strom.protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

logger = logging.getLogger(__name__)

DEFAULT_POLL_TIMEOUT_MS = 1_000


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """A member's place in its group, for ``AsyncProducer.send_offsets_to_transaction``
    (Java's ``ConsumerGroupMetadata``): the group's coordinator refuses transactional
    offsets from a member no longer in the generation (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class AsyncConsumer:
    """A Kafka consumer; use ``async with AsyncConsumer({...}) as consumer:``."""

    def __init__(self, config: ConsumerConfig | Mapping[str, object] | None = None,
                 **overrides: object) -> None:
        if isinstance(config, ConsumerConfig):
            self.config = config.with_overrides(None, **overrides) if overrides else config
        else:
            self.config = ConsumerConfig.from_properties(config, **overrides)
        self._cluster: Cluster | None = None
        self._fetcher: Fetcher | None = None
        self._coordinator: Any = None
        self._subscription: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        self._listener: Any = None
        self._joining: asyncio.Future[None] | None = None
        self._manual = False
        self._closed = False

    # -- lifetime ------------------------------------------------------------------------
    async def start(self) -> Self:
        """Connect to the cluster (also done by ``async with`` and on first use)."""
        if self._closed:
            raise ClientClosedError()
        if self._cluster is None:
            self._cluster = Cluster(self.config)
            self._fetcher = Fetcher(self._cluster, self.config)
            await self._cluster.refresh()
            self._fetcher.start()
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        """Commit (with auto commit), leave the group, stop fetching, disconnect."""
        if self._closed:
            return
        self._closed = True
        if self._joining is not None:
            self._joining.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._joining
        if self._coordinator is not None:
            await self._coordinator.close()
        if self._fetcher is not None:
            await self._fetcher.close()
        if self._cluster is not None:
            await self._cluster.close()

    def _parts(self) -> tuple[Cluster, Fetcher]:
        if self._closed:
            raise ClientClosedError()
        if self._cluster is None or self._fetcher is None:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "the consumer is not started; use start() or async with")
        return self._cluster, self._fetcher

    # -- what to consume -----------------------------------------------------------------
    def subscribe(self, topics: Iterable[str] | None = None, *, pattern: str | re.Pattern[str] | None = None,
                  listener: Any = None) -> None:
        """Join the group for ``topics`` (or every topic matching ``pattern``)."""
        if self.config.group_id is None:
            raise ConfigError("subscribe needs a group.id; use assign() without a group")
        if (topics is None) == (pattern is None):
            raise ConfigError("subscribe to a list of topics or to a pattern, not both or neither")
        if self._manual:
            raise ConfigError("cannot subscribe after assign(); unsubscribe first")
        self._subscription = set(topics or ())
        self._pattern = re.compile(pattern) if isinstance(pattern, str) else pattern
        self._listener = listener

    def unsubscribe(self) -> None:
        self._subscription = set()
        self._pattern = None
        self._manual = False
        if self._fetcher is not None:
            self._fetcher.assign(())

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions``, with no group membership."""
        if self._subscription or self._pattern is not None:
            raise ConfigError("cannot assign() while subscribed; unsubscribe first")
        _, fetcher = self._parts()
        self._manual = True
        fetcher.assign((tp[0], tp[1]) for tp in partitions)

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.states) if self._fetcher is not None else set()

    # -- positions -----------------------------------------------------------------------
    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._parts()[1].seek((partition[0], partition[1]), offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        fetcher = self._parts()[1]
        for tp in partitions or tuple(fetcher.states):
            fetcher.reset_to((tp[0], tp[1]), EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        fetcher = self._parts()[1]
        for tp in partitions or tuple(fetcher.states):
            fetcher.reset_to((tp[0], tp[1]), LATEST)

    async def position(self, partition: TopicPartition) -> int:
        """The offset of the next record to be returned (resolving resets first)."""
        fetcher = self._parts()[1]
        tp: TopicPartition = (partition[0], partition[1])
        state = fetcher._state(tp)
        if state.position is None:
            await self._initialize_positions()
            if state.reset is not None:
                found = await fetcher.list_offsets({tp: state.reset})
                fetcher.seek(tp, found[tp][0], found[tp][1])
        assert state.position is not None
        return state.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark seen in the last fetch of ``partition``."""
        state = self._parts()[1].states.get((partition[0], partition[1]))
        return None if state is None or state.high_watermark < 0 else state.high_watermark

    def pause(self, *partitions: TopicPartition) -> None:
        fetcher = self._parts()[1]
        for tp in partitions:
            fetcher._state((tp[0], tp[1])).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        fetcher = self._parts()[1]
        for tp in partitions:
            fetcher._state((tp[0], tp[1])).paused = False
        fetcher.wake()

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, s in self._parts()[1].states.items() if s.paused}

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._parts()[1].list_offsets({(tp[0], tp[1]): EARLIEST for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        found = await self._parts()[1].list_offsets({(tp[0], tp[1]): LATEST for tp in partitions})
        return {tp: offset for tp, (offset, _) in found.items()}

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, int | None]:
        """The earliest offset whose timestamp is at or after each time (None: none is)."""
        for ts in timestamps.values():
            if ts < 0:
                raise ValueError("timestamps must be >= 0")
        found = await self._parts()[1].list_offsets({(tp[0], tp[1]): ts for tp, ts in timestamps.items()})
        return {tp: (offset if offset >= 0 else None) for tp, (offset, _) in found.items()}

    # -- commits -------------------------------------------------------------------------
    def _group(self) -> Any:
        if self._coordinator is None:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "this consumer has no group (group.id unset or not subscribed)")
        return self._coordinator

    def group_metadata(self) -> ConsumerGroupMetadata:
        """This member's group, generation and ids now (generation -1 before it joins)."""
        group_id = self.config.group_id
        if group_id is None:
            raise KafkaError(ErrorCode.INVALID_GROUP_ID, "this consumer has no group (group.id unset)")
        coordinator = self._coordinator
        if coordinator is None:
            return ConsumerGroupMetadata(group_id, group_instance_id=self.config.group_instance_id)
        return ConsumerGroupMetadata(group_id, coordinator.generation, coordinator.member_id,
                                     self.config.group_instance_id)

    def positions(self) -> dict[TopicPartition, int]:
        """Current positions of the assigned partitions that have one: what ``commit()`` stores."""
        fetcher = self._fetcher  # also read while closing, for the final auto-commit
        if fetcher is None:
            return {}
        return {tp: s.position for tp, s in fetcher.states.items() if s.position is not None}

    async def commit(self, offsets: Mapping[TopicPartition, int | tuple[int, str]] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions) to the group; waits for it."""
        await self._group().commit(self._offsets_to_commit(offsets))

    def commit_async(self, offsets: Mapping[TopicPartition, int | tuple[int, str]] | None = None,
                     callback: Callable[[Mapping[TopicPartition, Any], BaseException | None], object] | None = None,
                     ) -> asyncio.Task[None]:
        """Commit without waiting (the offsets are taken now); ``callback(offsets, error)`` after.

        A failed asynchronous commit is not retried, as in the Java client: a later
        commit supersedes it, and retrying could move the group's offset backwards.
        """
        chosen = self._offsets_to_commit(offsets)
        group = self._group()

        async def commit() -> None:
            error: BaseException | None = None
            try:
                await group.commit(chosen)
            except Exception as exc:
                error = exc
            if callback is not None:
                callback(chosen, error)
            elif error is not None:
                logger.warning("asynchronous commit of %s failed: %s", chosen, error)

        return asyncio.create_task(commit())

    def _offsets_to_commit(self, offsets: Mapping[TopicPartition, int | tuple[int, str]] | None) -> Any:
        from strom.client.offsets import OffsetAndMetadata
        chosen = self.positions() if offsets is None else offsets
        out = {}
        for tp, value in chosen.items():
            offset, metadata = (value, "") if isinstance(value, int) else value
            out[(tp[0], tp[1])] = OffsetAndMetadata(offset, metadata)
        return out

    async def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Any]:
        """The group's committed ``OffsetAndMetadata`` per partition (None: nothing committed)."""
        result: dict[TopicPartition, Any] = await self._group().fetch_committed(
            [(tp[0], tp[1]) for tp in partitions])
        return result

    # -- polling -------------------------------------------------------------------------
    async def getmany(self, timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
                      max_records: int | None = None) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records per partition; waits up to ``timeout_ms`` for the first ones."""
        await self.start()
        _, fetcher = self._parts()
        limit = max_records or self.config.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            await self._maintain_group(deadline)
            await self._initialize_positions()
            records = fetcher.take(limit)
            if records:
                return records
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}
            try:
                async with asyncio.timeout(min(remaining, self._group_check_interval())):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                pass

    async def poll(self, timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS,
                   max_records: int | None = None) -> list[ConsumerRecord]:
        """Records in one list, partitions in turn (each partition's in offset order)."""
        batches = await self.getmany(timeout_ms, max_records)
        if len(batches) == 1:
            return next(iter(batches.values()))
        return [record for records in batches.values() for record in records]

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        while not self._closed:
            for record in await self.poll():
                yield record

    async def poll_arrow(self, timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS, *,
                         include_headers: bool = False) -> pa.RecordBatch:
        """Every buffered record as one Arrow batch with Spark's Kafka schema.

        Takes whole fetched partitions at once (``max.poll.records`` does not apply):
        the records are decoded straight from the fetched bytes, without a Python
        object per record. An empty batch when nothing arrived within ``timeout_ms``.
        """
        import pyarrow as pa

        from strom.client.arrow import kafka_schema, records_to_arrow
        await self.start()
        _, fetcher = self._parts()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            await self._maintain_group(deadline)
            await self._initialize_positions()
            parts = []
            for tp, completed, position in fetcher.take_raw():
                parts.append(records_to_arrow(
                    tp[0], tp[1], completed.data, start_offset=position,
                    include_headers=include_headers, verify_crc=self.config.check_crcs,
                    aborted=completed.aborted if completed.abort_filter is not None else None))
                fetcher.advance(tp, completed, max(position, completed.end_offset))
            parts = [part for part in parts if part.num_rows]
            if len(parts) == 1:
                return parts[0]
            if parts:
                return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return pa.RecordBatch.from_pylist([], schema=kafka_schema(include_headers))
            try:
                async with asyncio.timeout(min(remaining, self._group_check_interval())):
                    await fetcher.data_ready.wait()
            except TimeoutError:
                pass

    # -- group membership ----------------------------------------------------------------
    def _group_check_interval(self) -> float:
        return self.config.heartbeat_interval_ms / 1000 if self._coordinator is not None else 3600.0

    async def _maintain_group(self, deadline: float) -> None:
        if self._manual or (not self._subscription and self._pattern is None):
            return
        cluster, fetcher = self._parts()
        if self._coordinator is None:
            from strom.client.coordinator import ConsumerCoordinator
            self._coordinator = ConsumerCoordinator(cluster, self.config, self._listener,
                                                    positions=self.positions, released=fetcher.release)
        topics = self._subscription
        if self._pattern is not None:
            topics = await self._matching_topics(cluster)
        self._coordinator.poll_called()
        # The join runs as a task of its own that outlives this poll: a poll returns at
        # its timeout even while the group is still rebalancing (as the Java client's
        # poll(Duration) does), and the next poll waits on the same join, never
        # cancelling one halfway through its requests.
        if self._joining is None:
            self._joining = asyncio.ensure_future(self._coordinator.ensure_active_group(topics))
        await asyncio.wait((self._joining,), timeout=max(deadline - time.monotonic(), 0))
        if not self._joining.done():
            return
        joining, self._joining = self._joining, None
        joining.result()  # the join's error, if any, is this poll's
        assigned = set(self._coordinator.assignment)
        if assigned != set(fetcher.states):
            fetcher.assign(assigned)

    async def _matching_topics(self, cluster: Cluster) -> set[str]:
        assert self._pattern is not None
        if not cluster.metadata.topics or cluster.stale:
            cluster.want_all_topics()
            await cluster.refresh()
        internal = self.config.exclude_internal_topics
        return {name for name, info in cluster.metadata.topics.items()
                if self._pattern.fullmatch(name) and not (internal and info.internal)}

    async def _initialize_positions(self) -> None:
        """Committed offsets for partitions without a position, else auto.offset.reset."""
        _, fetcher = self._parts()
        missing = fetcher.needs_position()
        if not missing:
            return
        committed: dict[TopicPartition, Any] = {}
        if self._coordinator is not None:
            committed = await self._coordinator.fetch_committed(missing)
        reset = fetcher.default_reset
        for tp in missing:
            offset = committed.get(tp)
            if offset is not None and offset.offset >= 0:
                fetcher.seek(tp, offset.offset, getattr(offset, "leader_epoch", -1) or -1)
            elif reset is not None:
                fetcher.reset_to(tp, reset)
            else:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"no committed offset for {tp[0]}-{tp[1]} and auto.offset.reset=none")
