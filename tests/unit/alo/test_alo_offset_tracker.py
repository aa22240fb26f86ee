"""OffsetTracker: the contiguous prefix, out-of-order completion, gaps, revocation, and the
offset map it commits and restores."""

from __future__ import annotations

import random

from strom.alo.metadata_codec import decode_offset_map
from strom.alo.offset_tracker import OffsetTracker

TP = ("t", 0)


def test_the_article_example_commits_only_the_contiguous_prefix() -> None:
    p0, p1 = OffsetTracker(("t", 0)), OffsetTracker(("t", 1))
    assert p0.add(0) and p1.add(0) and p1.add(1)
    assert p0.committable() == 0 and p1.committable() == 0
    p0.complete(0)
    assert p0.committable() == 1  # Kafka's commit is the next offset to read
    p1.complete(1)
    assert p1.committable() == 0  # (P1, 0) still in flight: nothing new is safe
    p1.complete(0)
    assert p1.committable() == 2


def test_random_completion_order_never_commits_past_an_unfinished_record() -> None:
    rng = random.Random(7)
    tracker = OffsetTracker(TP, committed=100)
    offsets = list(range(100, 1100))
    for offset in offsets:
        assert tracker.add(offset)
    rng.shuffle(offsets)
    finished: set[int] = set()
    for offset in offsets:
        tracker.complete(offset)
        finished.add(offset)
        expected = next((o for o in range(100, 1100) if o not in finished), 1100)
        assert tracker.committable() == expected
    assert tracker.incomplete == 0 and tracker.uncommitted_span == 0


def test_gaps_in_offsets_compaction_or_markers_do_not_hold_the_commit_back() -> None:
    tracker = OffsetTracker(TP, committed=0)
    for offset in (2, 3, 7, 10):  # 0, 1, 4-6, 8, 9 are no records (compacted, markers)
        tracker.add(offset)
    assert tracker.committable() == 2
    tracker.complete(3)
    tracker.complete(7)
    assert tracker.committable() == 2
    tracker.complete(2)
    assert tracker.committable() == 10
    tracker.complete(10)
    assert tracker.committable() == 11


def test_commit_point_carries_the_finished_offsets_and_says_nothing_twice() -> None:
    tracker = OffsetTracker(TP, committed=0)
    for offset in range(10):
        tracker.add(offset)
    for offset in (2, 5, 6, 9):
        tracker.complete(offset)
    point = tracker.commit_point()
    assert point is not None
    offset, metadata = point
    assert offset == 0
    assert decode_offset_map(0, metadata) == {2, 5, 6, 9}
    tracker.mark_committed(offset, metadata)
    assert tracker.commit_point() is None  # nothing new
    assert tracker.take_changed()
    assert not tracker.take_changed()
    tracker.complete(0)
    tracker.complete(1)
    assert tracker.commit_point() == (3, decode_is(3, {5, 6, 9}, tracker))


def decode_is(base: int, expected: set[int], tracker: OffsetTracker) -> str:
    point = tracker.commit_point()
    assert point is not None and decode_offset_map(base, point[1]) == expected
    return point[1]


def test_without_encoding_the_metadata_is_empty() -> None:
    tracker = OffsetTracker(TP)
    for offset in range(5):
        tracker.add(offset)
    tracker.complete(3)
    assert tracker.commit_point(encode=False) == (0, "")


def test_a_restored_offset_map_skips_finished_records_and_survives_the_next_commit() -> None:
    before = OffsetTracker(TP, committed=50)
    for offset in range(50, 60):
        before.add(offset)
    for offset in (51, 52, 58):
        before.complete(offset)
    point = before.commit_point()
    assert point is not None
    # A new owner (a restart, a rebalance) starts from the commit.
    after = OffsetTracker(TP, committed=point[0], metadata=point[1])
    assert after.restored() == {51, 52, 58}
    assert after.add(50)
    assert not after.add(51) and not after.add(52)  # done before: not processed again
    # Not fetched again yet: 58 must stay in the next commit's map.
    after.complete(50)
    assert after.committable() == 53
    point = after.commit_point()
    assert point is not None and decode_offset_map(53, point[1]) == {58}
    after.mark_committed(*point)
    for offset in range(53, 60):
        if after.add(offset):
            after.complete(offset)
    assert after.committable() == 60 and not after.restored()


def test_an_offset_map_for_another_offset_is_ignored() -> None:
    tracker = OffsetTracker(TP, committed=10)
    for offset in range(10, 20):
        tracker.add(offset)
    tracker.complete(15)
    point = tracker.commit_point()
    assert point is not None
    # An operator reset the group to 5 and kept the metadata: the map is not for 5.
    reset = OffsetTracker(TP, committed=5, metadata=point[1])
    assert reset.restored() == frozenset()
    assert all(reset.add(offset) for offset in range(5, 20))


def test_repeated_or_old_offsets_are_not_processed() -> None:
    tracker = OffsetTracker(TP, committed=10)
    assert not tracker.add(9)
    assert tracker.add(10)
    assert not tracker.add(10)


def test_revocation_marks_the_tracker_and_its_commit_point_stays_below_in_flight_records() -> None:
    tracker = OffsetTracker(TP, committed=0)
    for offset in range(6):
        tracker.add(offset)
    tracker.complete(0)
    tracker.complete(1)
    tracker.complete(4)  # 2, 3, 5 still in flight when the partition is revoked
    tracker.revoked = True
    point = tracker.commit_point()
    assert point is not None and point[0] == 2 and decode_offset_map(2, point[1]) == {4}
    assert tracker.incomplete == 3


def test_uncommitted_span_grows_behind_a_stuck_record() -> None:
    tracker = OffsetTracker(TP, committed=0)
    for offset in range(1000):
        tracker.add(offset)
        if offset:
            tracker.complete(offset)
    assert tracker.committable() == 0
    assert tracker.uncommitted_span == 1000 and tracker.incomplete == 1
