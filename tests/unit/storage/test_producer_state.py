"""ProducerStateManager through Log.append: sequence rules, duplicates, transactions, snapshots."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import ControlRecordType, build_control_batch
from strom.storage import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    Log,
    LogManager,
    OutOfOrderSequenceError,
    ProducerStateManagerConfig,
    TransactionCoordinatorFencedError,
)
from strom.storage.producer_state import (
    INT32_MAX,
    BatchMetadata,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    in_sequence,
    increment_sequence,
)
from tests.support.storage import Clock, batch, open_log, read_all

PID = 4242


def produce(log: Log, sequence: int, count: int = 1, *, epoch: int = 0, pid: int = PID,
            transactional: bool = False, timestamp: int = 1000) -> tuple[int, int, bool]:
    result = log.append(batch(count, producer_id=pid, producer_epoch=epoch,
                              base_sequence=sequence, is_transactional=transactional,
                              timestamp=timestamp))
    return result.base_offset, result.last_offset, result.duplicate


def marker(log: Log, kind: ControlRecordType, *, pid: int = PID, epoch: int = 0,
           coordinator_epoch: int = 0) -> None:
    log.append(build_control_batch(kind, producer_id=pid, producer_epoch=epoch,
                                   coordinator_epoch=coordinator_epoch, timestamp=2000))


def kill(log: Log) -> None:
    """Stop as SIGKILL would: no flush, no snapshot, no trimmed indexes."""
    for segment in log.segments:
        segment.close()


def test_sequence_helpers_wrap_at_int32_max() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert in_sequence(INT32_MAX, 0) and in_sequence(-1, 0) and in_sequence(4, 5)
    assert not in_sequence(4, 6) and not in_sequence(INT32_MAX, 1)


def test_duplicate_returns_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))  # a non-idempotent batch first, so offsets differ from sequences
    assert produce(log, 0, 3) == (2, 4, False)
    assert produce(log, 3, 2) == (5, 6, False)
    size = log.segments.active.size
    assert produce(log, 0, 3) == (2, 4, True)
    assert produce(log, 3, 2) == (5, 6, True)
    assert log.log_end_offset == 7 and log.segments.active.size == size
    assert produce(log, 5, 1) == (7, 7, False)


def test_duplicates_of_the_last_five_only(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    for sequence in range(6):
        produce(log, sequence)
    for sequence in range(1, 6):
        assert produce(log, sequence) == (sequence, sequence, True)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)  # older than the five kept: neither a known retry nor in order


def test_gap_is_out_of_order_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0)
    size = log.segments.active.size
    with pytest.raises(OutOfOrderSequenceError) as error:
        produce(log, 2)
    assert error.value.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER == 45
    assert log.log_end_offset == 1 and log.segments.active.size == size
    # two batches in one append: the second's gap rejects both
    with pytest.raises(OutOfOrderSequenceError):
        log.append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=1)
                   + batch(1, producer_id=PID, producer_epoch=0, base_sequence=3))
    assert log.log_end_offset == 1
    log.append(batch(1, producer_id=PID, producer_epoch=0, base_sequence=1)
               + batch(1, producer_id=PID, producer_epoch=0, base_sequence=2))
    assert produce(log, 3) == (3, 3, False)


def test_older_epoch_is_invalid_producer_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, epoch=3)
    with pytest.raises(InvalidProducerEpochError) as error:
        produce(log, 1, epoch=2)
    assert error.value.error_code == ErrorCode.INVALID_PRODUCER_EPOCH == 47
    assert log.log_end_offset == 1


def test_epoch_bump_restarts_sequences_at_zero(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, epoch=0)
    produce(log, 1, epoch=0)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 2, epoch=1)
    assert produce(log, 0, epoch=1) == (2, 2, False)
    with pytest.raises(InvalidProducerEpochError):
        produce(log, 1, epoch=0)  # the old epoch's batch is fenced, not a duplicate
    assert produce(log, 0, epoch=1) == (2, 2, True)
    assert produce(log, 1, epoch=1) == (3, 3, False)


def test_unknown_producer_may_start_at_any_sequence(tmp_path: Path) -> None:
    """KIP-360 (Kafka 2.5+): state lost to retention or expiry must not wedge a producer."""
    log = open_log(tmp_path)
    assert produce(log, 42, 2) == (0, 1, False)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 45)
    assert produce(log, 44) == (2, 2, False)


def test_sequence_wraparound(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, INT32_MAX - 1, 3)  # sequences MAX-1, MAX, 0
    assert log.producer_state.producers[PID].last_sequence == 0
    assert produce(log, INT32_MAX - 1, 3) == (0, 2, True)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 0)
    assert produce(log, 1) == (3, 3, False)


def test_transactions_set_the_last_stable_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    log.append(batch(2))
    produce(log, 0, 2, pid=7, transactional=True)  # offsets 2-3
    produce(log, 0, 1, pid=8, transactional=True)  # offset 4
    produce(log, 2, 1, pid=7, transactional=True)  # offset 5: same transaction
    assert log.last_stable_offset == 2 and log.high_watermark == 6
    marker(log, ControlRecordType.COMMIT, pid=7)
    assert log.last_stable_offset == 4
    marker(log, ControlRecordType.ABORT, pid=8)
    assert log.last_stable_offset == log.high_watermark == 8


def test_transaction_rules(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, pid=7, epoch=1, transactional=True)
    with pytest.raises(InvalidTxnStateError) as txn_error:
        produce(log, 1, pid=7, epoch=1)  # non-transactional inside an open transaction
    assert txn_error.value.error_code == ErrorCode.INVALID_TXN_STATE
    marker(log, ControlRecordType.COMMIT, pid=7, epoch=1, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(log, ControlRecordType.ABORT, pid=7, epoch=1, coordinator_epoch=4)
    with pytest.raises(InvalidProducerEpochError):
        marker(log, ControlRecordType.ABORT, pid=7, epoch=0, coordinator_epoch=5)
    assert log.log_end_offset == 2 and log.last_stable_offset == 2
    # the coordinator bumps the epoch with an abort marker (KIP-360); data restarts at 0
    marker(log, ControlRecordType.ABORT, pid=7, epoch=2, coordinator_epoch=5)
    with pytest.raises(OutOfOrderSequenceError):
        produce(log, 1, pid=7, epoch=2)
    assert produce(log, 0, pid=7, epoch=2) == (3, 3, False)


def test_snapshot_format_round_trip_and_corruption() -> None:
    entry = ProducerStateEntry(9, producer_epoch=3, coordinator_epoch=2,
                               current_txn_first_offset=17, last_timestamp=1234)
    for number in range(7):  # only the last five are kept
        entry.add_batch(3, BatchMetadata(number, number, 10 + number, 10 + number, 99))
    empty = ProducerStateEntry(10)
    data = encode_snapshot([entry, empty])
    assert decode_snapshot(data) == [entry, empty]
    assert len(entry.batches) == 5 and entry.last_timestamp == 99
    damaged = bytearray(data)
    damaged[20] ^= 1
    for bad in (bytes(damaged), data[:-1], b"\x00\x02" + data[2:]):
        with pytest.raises(ValueError):
            decode_snapshot(bad)


def snapshot_names(directory: Path) -> list[str]:
    return sorted(name for name in os.listdir(directory) if name.endswith(".snapshot"))


def test_snapshots_on_roll_and_clean_close_reload(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=400)
    for sequence in range(6):
        produce(log, sequence, pid=1)
    produce(log, 0, pid=2, transactional=True)
    rolls = [segment.base_offset for segment in log.segments][1:]
    assert rolls and snapshot_names(tmp_path) == [f"{n:020d}.snapshot" for n in rolls]
    state = dict(log.producer_state.producers)
    assert log.close()
    assert snapshot_names(tmp_path)[-1] == f"{log.log_end_offset:020d}.snapshot"
    reopened = open_log(tmp_path, segment_bytes=400)
    assert reopened.producer_state.producers == state
    assert produce(reopened, 1, pid=1) == (1, 1, True)
    assert reopened.last_stable_offset == 6


@pytest.mark.parametrize("snapshots", ["kept", "deleted", "corrupt"])
def test_rebuild_after_unclean_shutdown(tmp_path: Path, snapshots: str) -> None:
    log = open_log(tmp_path, segment_bytes=300)
    for sequence in range(8):
        produce(log, sequence, pid=1)
    produce(log, 0, 2, pid=2, transactional=True)
    assert len(log.segments) > 2
    state = dict(log.producer_state.producers)
    written = read_all(log)
    kill(log)
    for name in snapshot_names(tmp_path):
        if snapshots == "deleted":
            os.unlink(tmp_path / name)
        elif snapshots == "corrupt":
            (tmp_path / name).write_bytes(b"\x00\x01garbage")
    reopened = open_log(tmp_path, clean=False, segment_bytes=300)
    assert read_all(reopened) == written
    assert reopened.producer_state.producers == state
    for sequence in range(3, 8):
        assert produce(reopened, sequence, pid=1) == (sequence, sequence, True)
    assert reopened.last_stable_offset == 8
    assert produce(reopened, 8, pid=1) == (10, 10, False)
    for name in snapshot_names(tmp_path):  # corrupt ones were deleted, not trusted
        decode_snapshot((tmp_path / name).read_bytes())


def test_snapshot_above_the_log_end_is_discarded(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    produce(log, 0, pid=1)
    log.producer_state.producers[77] = ProducerStateEntry(77, producer_epoch=1)
    log.producer_state.take_snapshot(50)  # as if the log had been truncated below it
    kill(log)
    reopened = open_log(tmp_path, clean=False)
    assert 77 not in reopened.producer_state.producers
    assert 1 in reopened.producer_state.producers
    assert snapshot_names(tmp_path) == []


def test_producer_expiration(tmp_path: Path) -> None:
    expiration = ProducerStateManagerConfig().producer_id_expiration_ms
    assert expiration == 86400000
    log = open_log(tmp_path)
    produce(log, 0, pid=1, timestamp=10_000)
    produce(log, 0, pid=2, timestamp=10_000, transactional=True)
    assert log.remove_expired_producers(10_000 + expiration - 1) == 0
    assert log.remove_expired_producers(10_000 + expiration) == 1  # not the open transaction
    assert set(log.producer_state.producers) == {2}
    assert produce(log, 7, pid=1) == (2, 2, False)  # forgotten: any sequence again


def test_log_manager_passes_config_and_expires(tmp_path: Path) -> None:
    clock = Clock(5_000)
    manager = LogManager(str(tmp_path), clock=clock,
                         producer_state_config=ProducerStateManagerConfig(1000))
    manager.startup()
    log = manager.create_log("orders", 0)
    log.append(batch(1, producer_id=3, producer_epoch=0, base_sequence=0, timestamp=4_500))
    assert manager.remove_expired_producers(5_400) == 0
    assert manager.remove_expired_producers() == 0
    clock.now = 5_500
    assert manager.remove_expired_producers() == 1
    manager.close()


def test_retention_deletes_snapshots_below_the_first_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=300, retention_ms=1000)
    for sequence in range(12):
        produce(log, sequence, pid=1, timestamp=1000)
    assert len(snapshot_names(tmp_path)) >= 2
    log.delete_old_segments(10**9)
    first = log.segments.first.base_offset
    assert snapshot_names(tmp_path) == [f"{first:020d}.snapshot"]  # the roll retention made
    assert produce(log, 11, pid=1) == (11, 11, True)
    kill(log)  # the batches are gone: only the snapshot remembers the producer
    reopened = open_log(tmp_path, clean=False, segment_bytes=300)
    assert produce(reopened, 11, pid=1) == (11, 11, True)
