"""READ_COMMITTED in the consumer's fetcher: aborted transactions' records are left out.

Neither peer broker here writes transaction markers and reports aborted transactions
(Strom does not serve transactions yet; Tansu 0.6 lists none, so confluent-kafka sees
aborted records there too), so the fetcher is fed a Fetch answer built from real
record batches: a unit test of the client's filtering, not of a broker.
"""

from __future__ import annotations

import asyncio

from strom.client.cluster import Cluster
from strom.client.config import ConsumerConfig
from strom.client.fetcher import Fetcher
from strom.protocol.messages.fetch_response import AbortedTransaction, PartitionData
from strom.protocol.records import ControlRecordType, build_control_batch, build_record_batch

TP = ("t", 0)


def _fetch_answer() -> tuple[bytes, tuple[AbortedTransaction, ...]]:
    def txn(producer_id: int, base: int, values: list[bytes]) -> bytearray:
        return build_record_batch(((None, v, (), 1) for v in values), base_offset=base,
                                  producer_id=producer_id, producer_epoch=0, base_sequence=base,
                                  is_transactional=True)

    def marker(kind: ControlRecordType, producer_id: int, offset: int) -> bytearray:
        return build_control_batch(kind, producer_id=producer_id, producer_epoch=0,
                                   coordinator_epoch=0, timestamp=1, base_offset=offset)

    data = b"".join([
        txn(7, 0, [b"a0", b"a1"]),           # producer 7, aborted below
        txn(8, 2, [b"c0"]),                  # producer 8, committed
        marker(ControlRecordType.ABORT, 7, 3),
        marker(ControlRecordType.COMMIT, 8, 4),
        txn(7, 5, [b"c1"]),                  # producer 7 again, a later transaction that commits
        marker(ControlRecordType.COMMIT, 7, 6),
        build_record_batch([(None, b"plain", (), 1)], base_offset=7),
    ])
    return data, (AbortedTransaction(producer_id=7, first_offset=0),)


def _consume(isolation: str, arrow: bool = False) -> list[bytes | None]:
    data, aborted = _fetch_answer()

    async def main() -> list[bytes | None]:
        config = ConsumerConfig(isolation_level=isolation)
        fetcher = Fetcher(Cluster(config), config)
        fetcher.assign([TP])
        fetcher.seek(TP, 0)
        state = fetcher.states[TP]
        fetcher._completed(TP, PartitionData(partition_index=0, high_watermark=8, last_stable_offset=8,
                                             aborted_transactions=aborted, records=data),
                           0, state.seek_epoch)
        if arrow:
            from strom.client.arrow import records_to_arrow
            ((_, completed, position),) = fetcher.take_raw()
            batch = records_to_arrow("t", 0, completed.data, start_offset=position,
                                     aborted=completed.aborted if completed.abort_filter else None)
            return list(batch.column("value").to_pylist())
        return [r.value for r in fetcher.take(100)[TP]]

    return asyncio.run(main())


def test_read_committed_leaves_out_aborted_records() -> None:
    assert _consume("read_committed") == [b"c0", b"c1", b"plain"]
    assert _consume("read_committed", arrow=True) == [b"c0", b"c1", b"plain"]


def test_read_uncommitted_returns_everything_but_markers() -> None:
    assert _consume("read_uncommitted") == [b"a0", b"a1", b"c0", b"c1", b"plain"]
