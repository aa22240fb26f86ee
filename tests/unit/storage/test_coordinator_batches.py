"""Batches a coordinator writes without a sequence (TxnOffsetCommit's offsets on
``__consumer_offsets``): Kafka checks sequences and retries of client appends only, so
every such batch is written, in or out of a transaction, and the markers close them."""

from __future__ import annotations

from pathlib import Path

from strom.protocol.records import ControlRecordType, build_control_batch
from strom.storage.producer_state import NO_SEQUENCE
from tests.support.storage import batch, open_log


def test_batches_without_a_sequence_are_neither_retries_nor_out_of_order(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    offsets = []
    for _ in range(3):  # the same producer and epoch, each batch with the same (no) sequence
        result = log.append(batch(1, producer_id=9, producer_epoch=2, base_sequence=NO_SEQUENCE,
                                  is_transactional=True))
        assert not result.duplicate
        offsets.append(result.base_offset)
    assert offsets == [0, 1, 2] and log.last_stable_offset == 0
    log.append(build_control_batch(ControlRecordType.COMMIT, producer_id=9, producer_epoch=2,
                                   coordinator_epoch=0, timestamp=2000))
    assert log.last_stable_offset == log.log_end_offset == 4
    # the next transaction of the same epoch writes without a sequence again
    assert log.append(batch(1, producer_id=9, producer_epoch=2, base_sequence=NO_SEQUENCE,
                            is_transactional=True)).base_offset == 4
    assert log.last_stable_offset == 4
