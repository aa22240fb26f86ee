"""Replaying ``__consumer_offsets`` with transactions in it (group_loader): transactional
offsets pending per producer until a COMMIT or ABORT marker later in the log, a commit not
undoing a newer plain one, other control batches ignored, leftovers still pending."""

from __future__ import annotations

from pathlib import Path

from strom.broker.group.group_loader import LoadState, groups_of, read_partition
from strom.broker.group.group_metadata import GroupMetadata
from strom.broker.group.offsets_topic import (
    OffsetCommitValue,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from strom.protocol.records import ControlRecordType, build_end_txn_marker
from strom.protocol.records.v2_builder import RecordBatchBuilder, build_record_batch
from strom.storage.log import Log
from tests.support.storage import open_log

T0, T1 = ("t", 0), ("t", 1)


def commits(log: Log, offsets: dict[tuple[str, int], int], producer: int | None = None) -> None:
    records = [(encode_offset_commit_key("g", topic, index), encode_offset_commit_value(OffsetCommitValue(o, "", 1)),
                (), 1) for (topic, index), o in offsets.items()]
    if producer is None:
        log.append(build_record_batch(records))
    else:
        log.append(build_record_batch(records, producer_id=producer, producer_epoch=0, base_sequence=-1,
                                      is_transactional=True))


def marker(log: Log, producer: int, commit: bool) -> None:
    log.append(build_end_txn_marker(producer, 0, commit, 0, 2))


def leader_change(log: Log) -> None:
    """A KRaft control batch (type 2) Kafka's loader skips too."""
    builder = RecordBatchBuilder(is_control=True)
    builder.append(bytes([0, 0, 0, ControlRecordType.LEADER_CHANGE]), b"\x00\x00", (), 3)
    log.append(builder.build())


def load(log: Log) -> GroupMetadata:
    state = LoadState()
    read_partition(log, state)
    return groups_of(state)["g"]


def committed(group: GroupMetadata) -> dict[tuple[str, int], int]:
    return {tp: o.offset for tp, o in group.offsets.items()}


def pending(group: GroupMetadata) -> dict[int, dict[tuple[str, int], int]]:
    return {pid: {tp: a.offset.offset for tp, a in offsets.items()} for pid, offsets in group.pending_txn_offsets.items()}


def test_markers_resolve_what_came_before_them(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    commits(log, {T0: 5})
    commits(log, {T0: 9}, producer=7)
    commits(log, {T0: 11, T1: 2}, producer=8)
    leader_change(log)
    marker(log, 8, commit=False)
    marker(log, 99, commit=True)  # a producer with nothing pending here
    commits(log, {T1: 4}, producer=7)  # the same transaction of producer 7, still open
    group = load(log)
    assert (committed(group), pending(group)) == ({T0: 5}, {7: {T0: 9, T1: 4}})

    commits(log, {T0: 20})  # a plain commit after producer 7's batches...
    marker(log, 7, commit=True)  # ...is newer than its T0, which the commit must not bring back
    group = load(log)
    assert (committed(group), pending(group)) == ({T0: 20, T1: 4}, {})


def test_a_group_with_only_pending_offsets_is_loaded(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    commits(log, {T0: 3}, producer=5)
    group = load(log)
    assert (committed(group), pending(group)) == ({}, {5: {T0: 3}})
