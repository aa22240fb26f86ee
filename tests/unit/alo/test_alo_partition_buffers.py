"""Per-partition buffers: round-robin across partitions, what each ordering mode lets
run at once, retries holding only their own lane, and dropping on revocation."""

from __future__ import annotations

from strom.alo.config import Ordering
from strom.alo.offset_tracker import OffsetTracker
from strom.alo.partition_buffers import PartitionBuffers, WorkItem
from strom.client.fetcher import ConsumerRecord


def record(partition: int, offset: int, key: bytes | None) -> ConsumerRecord:
    return ConsumerRecord("t", partition, offset, 0, 0, key, b"v" * 10, (), -1)


def fill(ordering: Ordering, partitions: dict[int, list[bytes | None]]) -> PartitionBuffers:
    buffers = PartitionBuffers(ordering)
    for partition, keys in partitions.items():
        tracker = OffsetTracker(("t", partition), committed=0)
        buffer = buffers.open(tracker)
        for offset, key in enumerate(keys):
            tracker.add(offset)
            rec = record(partition, offset, key)
            buffers.add(buffer, WorkItem(rec, tracker, buffer.lane_of(rec)))
    return buffers


def take_all(buffers: PartitionBuffers) -> list[WorkItem]:
    taken = []
    while (item := buffers.take()) is not None:
        taken.append(item)
    return taken


def where(items: list[WorkItem]) -> list[tuple[int, int]]:
    return [(i.record.partition, i.record.offset) for i in items]


def test_unordered_takes_partitions_in_turn_so_a_backlog_does_not_starve_others() -> None:
    buffers = fill("unordered", {0: [b"a"] * 5, 1: [b"a"] * 2, 2: [b"a"]})
    assert where(take_all(buffers)) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (0, 2), (0, 3), (0, 4)]
    assert buffers.buffered == 0 and buffers.buffered_bytes == 0


def test_partition_mode_runs_one_record_per_partition_at_a_time() -> None:
    buffers = fill("partition", {0: [b"a", b"b", b"c"], 1: [b"a", b"b"]})
    first = take_all(buffers)
    assert where(first) == [(0, 0), (1, 0)]
    buffers.release(first[0])
    assert where(take_all(buffers)) == [(0, 1)]


def test_key_mode_runs_keys_in_parallel_and_each_key_in_order() -> None:
    buffers = fill("key", {0: [b"a", b"b", b"a", b"c", b"b", None, None]})
    first = take_all(buffers)
    # a@0, b@1, c@3 and the key-less 5 and 6 may all run; a@2 and b@4 wait for their key.
    assert sorted(where(first)) == [(0, 0), (0, 1), (0, 3), (0, 5), (0, 6)]
    a0 = next(i for i in first if i.record.offset == 0)
    buffers.release(a0)
    assert where(take_all(buffers)) == [(0, 2)]


def test_a_record_waiting_to_retry_blocks_only_its_own_key() -> None:
    buffers = fill("key", {0: [b"bad", b"good", b"bad", b"good"]})
    first = take_all(buffers)
    bad = next(i for i in first if i.record.key == b"bad")
    good = next(i for i in first if i.record.key == b"good")
    buffers.release(good)  # "good" finished; "bad" failed and waits for its retry
    assert where(take_all(buffers)) == [(0, 3)]  # the other key goes on
    assert buffers.put_back(bad)  # the retry is due: it goes first in its lane
    assert where(take_all(buffers)) == [(0, 0)]
    buffers.release(bad)
    assert where(take_all(buffers)) == [(0, 2)]


def test_revocation_drops_unstarted_records_and_a_late_retry_is_refused() -> None:
    buffers = fill("unordered", {0: [b"a"] * 4, 1: [b"a"] * 2})
    running = buffers.take()
    assert running is not None
    assert buffers.close(("t", 0)) == (3, 33)  # key + value bytes
    assert buffers.buffered == 2
    assert where(take_all(buffers)) == [(1, 0), (1, 1)]
    assert not buffers.put_back(running)
