"""Per-partition buffers of fetched records, taken round-robin by the workers.

The article's design: one buffer per partition, so a revoked partition's unstarted
records can be dropped in one step, and workers take from the partitions in turn, so
a partition with a large backlog cannot starve the others.

Inside a partition the ordering mode decides what may run. Records are grouped in
*lanes*: a lane runs one record at a time, in offset order. ``partition`` mode has
one lane per partition, ``key`` mode one per key, ``unordered`` none (every record is
free to run). A lane with a record in progress — or waiting to be retried — is busy;
only its own later records wait, so in ``key`` mode a failing record holds up its own
key and nothing else. Records without a key have no lane in ``key`` mode: there is no
order among them to keep.

Everything here runs on the event loop; nothing is locked.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from strom.alo.config import Ordering
from strom.alo.offset_tracker import OffsetTracker
from strom.client.fetcher import ConsumerRecord
from strom.protocol.topic_partition import TopicPartition

_PARTITION_LANE = 0  # the one lane of a partition in ``partition`` mode


class WorkItem:
    """One record on its way through the consumer: buffered, running, retried, done."""

    __slots__ = ("attempts", "lane", "last_error", "record", "size", "tracker")

    def __init__(self, record: ConsumerRecord, tracker: OffsetTracker, lane: Any) -> None:
        self.record = record
        self.tracker = tracker  # the partition's tracker when it was fetched (revocation check)
        self.lane = lane  # None: not ordered with anything
        self.size = len(record.key or b"") + len(record.value or b"")
        self.attempts = 0
        self.last_error: BaseException | None = None


class PartitionBuffer:
    """One partition's records not yet started, in lanes by the ordering mode."""

    __slots__ = ("_busy", "_free", "_lanes", "_ready", "buffered", "buffered_bytes", "ordering", "scheduled",
                 "topic_partition", "tracker")

    def __init__(self, topic_partition: TopicPartition, tracker: OffsetTracker, ordering: Ordering) -> None:
        self.topic_partition = topic_partition
        self.tracker = tracker
        self.ordering = ordering
        self._free: deque[WorkItem] = deque()  # may start at any time
        self._lanes: dict[Any, deque[WorkItem]] = {}  # lane -> its waiting records, offset order
        self._ready: deque[Any] = deque()  # lanes with a waiting record and nothing running
        self._busy: set[Any] = set()  # lanes with a record running or waiting for a retry
        self.buffered = 0
        self.buffered_bytes = 0
        self.scheduled = False  # in PartitionBuffers' round-robin queue

    def lane_of(self, record: ConsumerRecord) -> Any:
        if self.ordering == "partition":
            return _PARTITION_LANE
        if self.ordering == "key":
            return record.key
        return None

    def add(self, item: WorkItem) -> None:
        self.buffered += 1
        self.buffered_bytes += item.size
        lane = item.lane
        if lane is None:
            self._free.append(item)
            return
        waiting = self._lanes.get(lane)
        if waiting is None:
            self._lanes[lane] = deque((item,))
            if lane not in self._busy:
                self._ready.append(lane)
        else:
            waiting.append(item)

    @property
    def runnable(self) -> bool:
        return bool(self._free or self._ready)

    def take(self) -> WorkItem | None:
        """The next record that may start, oldest first between free and lane records."""
        free, ready = self._free, self._ready
        if ready and (not free or self._lanes[ready[0]][0].record.offset < free[0].record.offset):
            lane = ready.popleft()
            waiting = self._lanes[lane]
            item = waiting.popleft()
            if not waiting:
                del self._lanes[lane]
            self._busy.add(lane)
        elif free:
            item = free.popleft()
        else:
            return None
        self.buffered -= 1
        self.buffered_bytes -= item.size
        return item

    def release(self, item: WorkItem) -> None:
        """``item`` is finished (done or dead-lettered): its lane's next record may run."""
        lane = item.lane
        if lane is None:
            return
        self._busy.discard(lane)
        if lane in self._lanes:
            self._ready.append(lane)

    def put_back(self, item: WorkItem) -> None:
        """A record whose retry is due goes first in its lane (which it kept busy)."""
        self.buffered += 1
        self.buffered_bytes += item.size
        lane = item.lane
        if lane is None:
            self._free.appendleft(item)
            return
        self._busy.discard(lane)
        waiting = self._lanes.get(lane)
        if waiting is None:
            self._lanes[lane] = deque((item,))
        else:
            waiting.appendleft(item)
        self._ready.appendleft(lane)

    def drop(self) -> tuple[int, int]:
        """Revocation: forget every record not started; (records, bytes) dropped."""
        dropped = (self.buffered, self.buffered_bytes)
        self._free.clear()
        self._lanes.clear()
        self._ready.clear()
        self._busy.clear()
        self.buffered = self.buffered_bytes = 0
        return dropped


class PartitionBuffers:
    """Every assigned partition's buffer, and the round-robin over the runnable ones."""

    def __init__(self, ordering: Ordering) -> None:
        self.ordering = ordering
        self.buffers: dict[TopicPartition, PartitionBuffer] = {}
        self._turns: deque[PartitionBuffer] = deque()  # runnable partitions, in turn
        self.buffered = 0
        self.buffered_bytes = 0

    def open(self, tracker: OffsetTracker) -> PartitionBuffer:
        buffer = PartitionBuffer(tracker.topic_partition, tracker, self.ordering)
        self.buffers[tracker.topic_partition] = buffer
        return buffer

    def close(self, topic_partition: TopicPartition) -> tuple[int, int]:
        """Revocation: drop the partition's unstarted records; (records, bytes) dropped."""
        buffer = self.buffers.pop(topic_partition, None)
        if buffer is None:
            return 0, 0
        records, size = buffer.drop()
        self.buffered -= records
        self.buffered_bytes -= size
        if buffer.scheduled:
            self._turns.remove(buffer)
            buffer.scheduled = False
        return records, size

    def add(self, buffer: PartitionBuffer, item: WorkItem) -> None:
        buffer.add(item)
        self.buffered += 1
        self.buffered_bytes += item.size
        self._schedule(buffer)

    def put_back(self, item: WorkItem) -> bool:
        """A retry is due; False when its partition was revoked meanwhile."""
        buffer = self.buffers.get(item.tracker.topic_partition)
        if buffer is None or buffer.tracker is not item.tracker:
            return False
        buffer.put_back(item)
        self.buffered += 1
        self.buffered_bytes += item.size
        self._schedule(buffer)
        return True

    def release(self, item: WorkItem) -> None:
        buffer = self.buffers.get(item.tracker.topic_partition)
        if buffer is not None and buffer.tracker is item.tracker:
            buffer.release(item)
            self._schedule(buffer)

    def _schedule(self, buffer: PartitionBuffer) -> None:
        if not buffer.scheduled and buffer.runnable:
            buffer.scheduled = True
            self._turns.append(buffer)

    def take(self) -> WorkItem | None:
        """One record from the next partition in turn that has one ready to start."""
        turns = self._turns
        while turns:
            buffer = turns.popleft()
            item = buffer.take()
            if item is None:
                buffer.scheduled = False
                continue
            if buffer.runnable:
                turns.append(buffer)
            else:
                buffer.scheduled = False
            self.buffered -= 1
            self.buffered_bytes -= item.size
            return item
        return None
