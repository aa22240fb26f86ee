"""KIP-890 part 1's VerificationGuard on a partition (KAFKA-14884): a transactional batch
verified with the coordinator is appended only while its guard stands or its transaction
is open, so an abort marker landing between the coordinator's answer and the append
voids it. On one node nothing is awaited there; a cluster's remote verification
(AddPartitionsToTxn v4 to the coordinator's broker) awaits, and this is the rule that keeps
it safe."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.partition import Partition
from strom.broker.transaction.verification import Verification
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records.v2 import build_end_txn_marker
from strom.protocol.records.v2_builder import build_record_batch
from strom.storage.errors import StorageError
from tests.support.storage import open_log

PRODUCER = 7


def _leader(tmp_path: Path) -> Partition:
    partition = Partition("topic", 0, open_log(tmp_path / "topic-0"), 1)
    partition.make_leader(0, (1,), frozenset({1}), record_epoch_start=False)
    return partition


def _batch(epoch: int = 0, sequence: int = 0) -> bytearray:
    return build_record_batch([(None, b"v", (), None)], producer_id=PRODUCER, producer_epoch=epoch,
                              base_sequence=sequence, is_transactional=True)


def _refused(partition: Partition, records: bytearray, verification: Verification) -> ErrorCode:
    with pytest.raises(StorageError) as refused:
        partition.append_as_leader(records, -1, verification=verification)
    return refused.value.error_code


def test_an_abort_marker_after_the_verification_voids_the_append(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    guard = partition.verification_guards.start(PRODUCER, 0)
    assert guard is not None
    partition.append_as_leader(build_end_txn_marker(PRODUCER, 0, False, 0, 0), -1, from_client=False)
    assert _refused(partition, _batch(), Verification(PRODUCER, 0, guard)) == ErrorCode.INVALID_TXN_STATE
    log = partition.log
    assert log.log_end_offset == 1  # the marker alone
    assert log.last_stable_offset == log.high_watermark == 1  # no transaction left open


def test_the_first_append_opens_the_transaction_and_later_ones_need_no_guard(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    guards = partition.verification_guards
    guard = guards.start(PRODUCER, 0)
    assert guard is not None and guards.start(PRODUCER, 0) is guard  # concurrent requests share it
    partition.append_as_leader(_batch(), -1, verification=Verification(PRODUCER, 0, guard))
    assert guards.guards == {}  # the append ended it
    assert guards.has_ongoing_transaction(PRODUCER, 0) and guards.start(PRODUCER, 0) is None
    # a request verified alongside the first (its guard now gone) goes in: the transaction is open
    partition.append_as_leader(_batch(sequence=1), -1, verification=Verification(PRODUCER, 0, guard))
    assert partition.log.log_end_offset == 2 and partition.log.last_stable_offset == 0


def test_a_failed_verification_drops_its_guard_and_a_newer_epoch_starts_another(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    guards = partition.verification_guards
    first = guards.start(PRODUCER, 0)
    second = guards.start(PRODUCER, 1)
    assert first is not None and second is not None and second is not first
    guards.end(PRODUCER, first)  # an older verification failing leaves the newer one
    assert guards.guards == {PRODUCER: second}
    assert _refused(partition, _batch(1), Verification(PRODUCER, 1, first)) == ErrorCode.INVALID_TXN_STATE
    guards.end(PRODUCER, second)
    assert guards.guards == {}
    # no guard at all (the transaction was open when asked, closed since): refused too
    assert _refused(partition, _batch(1), Verification(PRODUCER, 1, None)) == ErrorCode.INVALID_TXN_STATE
    assert partition.log.log_end_offset == 0


def test_a_new_leader_starts_without_guards(tmp_path: Path) -> None:
    partition = _leader(tmp_path)
    guard = partition.verification_guards.start(PRODUCER, 0)
    assert guard is not None
    partition.make_follower(2, 1, (1, 2), frozenset({1, 2}))
    assert partition.verification_guards.guards == {}
