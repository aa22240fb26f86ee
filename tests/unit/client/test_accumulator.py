"""RecordAccumulator: batching by size and linger, buffer.memory back-pressure, codecs,
idempotence stamping, per-record delivery (futures and callbacks), retries, flush, close.

The built bytes are checked with the protocol package's own decoder; time is a
hand-moved clock, so linger and backoff are exact without sleeping.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from strom.client.accumulator import NO_ROOM, RecordAccumulator
from strom.client.buffer_pool import BufferExhaustedError, RecordTooLargeError
from strom.client.config import ProducerConfig
from strom.client.errors import ClientClosedError, KafkaError, KafkaTimeoutError
from strom.client.producer_batch import ClosedBatch, FutureRecordMetadata, RecordMetadata
from strom.protocol.compression import CompressionType
from strom.protocol.error_codes import ErrorCode
from strom.protocol.records import decode_batch, decode_records, read_batch_header, validate_crc

T = TypeVar("T")
TP = ("t", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def run(scenario: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await scenario()

    return asyncio.run(main())


def drain_all(accumulator: RecordAccumulator) -> list[ClosedBatch]:
    """Everything queued, as the sender would take it during a flush."""
    accumulator.begin_flush()
    batches: list[ClosedBatch] = []
    try:
        while accumulator.has_undrained():
            ready, _ = accumulator.ready()
            batches += accumulator.drain(sorted(ready), 1 << 30).values()
    finally:
        accumulator._flushes_in_progress -= 1  # the matching await_flush_completion
    return batches


# --- batching ---------------------------------------------------------------------------


def test_batches_close_before_the_next_record_would_exceed_batch_size() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=10_000)
        for i in range(100):
            await accumulator.append("t", 0, b"k%03d" % i, b"v" * 96, want_future=False)
        batches = drain_all(accumulator)
        assert [len(b.buffer) <= 1024 for b in batches] == [True] * len(batches)
        assert sum(b.record_count for b in batches) == 100
        assert len(batches) == 100 // batches[0].record_count + (100 % batches[0].record_count > 0)
        # Full means another record of this size would not have fitted.
        assert len(batches[0].buffer) + 96 + 4 > 1024 - 36
        values = [r.key for b in batches for r in decode_batch(b.buffer).records]
        assert [bytes(key) for key in values if key is not None] == [b"k%03d" % i for i in range(100)]

    run(scenario)


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=10_000)
        await accumulator.append("t", 0, None, b"a" * 10)
        await accumulator.append("t", 0, None, b"b" * 5000)
        await accumulator.append("t", 0, None, b"c" * 10)
        ready, _ = accumulator.ready()
        assert ready == {TP}  # more than one batch queued: the first is sendable
        batches = drain_all(accumulator)
        assert [b.record_count for b in batches] == [1, 1, 1]
        assert len(decode_batch(batches[1].buffer).records[0].value or b"") == 5000

    run(scenario)


def test_a_batch_is_ready_after_linger_or_when_full() -> None:
    async def scenario() -> None:
        clock = Clock()
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=5, clock_ms=clock)
        assert accumulator.ready() == (set(), None)
        await accumulator.append("t", 0, None, b"x" * 100)
        clock.now += 2
        await accumulator.append("t", 1, None, b"x" * 100)
        assert accumulator.ready() == (set(), 3)
        clock.now += 3
        assert accumulator.ready() == ({("t", 0)}, 2)
        clock.now += 2
        assert accumulator.ready() == ({("t", 0), ("t", 1)}, None)
        for _ in range(9):  # ~9 x 104 bytes fill a 1024-byte batch
            await accumulator.append("t", 2, None, b"x" * 100)
        assert ("t", 2) in accumulator.ready()[0]

    run(scenario)


def test_a_batch_a_record_did_not_fit_in_is_closed_and_sendable_before_linger() -> None:
    """The exact size decides (no upper-bound guess), and a batch that refused a record
    goes out at once rather than after linger.ms, as the Java client's
    ``closeForRecordAppends`` makes it."""
    async def scenario() -> None:
        clock = Clock()
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=10_000, clock_ms=clock)
        await accumulator.append("t", 0, None, b"x" * 100)
        appended = 1
        while accumulator.append_nowait("t", 0, None, b"x" * 100, (), clock.now, None, False) is not NO_ROOM:
            appended += 1
        assert appended == (1024 - 61) // (100 + 8)  # 8 bytes of framing each, none wasted
        assert accumulator.ready() == ({TP}, None)
        assert accumulator.open_batch("t", 0) is None
        await accumulator.append("t", 0, None, b"y")  # so a new batch takes the record
        batches = drain_all(accumulator)
        assert [b.record_count for b in batches] == [appended, 1]
        assert len(batches[0].buffer) <= 1024

    run(scenario)


def test_flush_makes_lingering_batches_ready_and_waits_for_their_completion() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(linger_ms=60_000)
        future = await accumulator.append("t", 0, None, b"x")
        assert accumulator.ready()[0] == set()
        flush = asyncio.create_task(accumulator.flush())
        await asyncio.sleep(0)
        assert accumulator.flush_in_progress
        ready, _ = accumulator.ready()
        assert ready == {TP}
        batch = accumulator.drain(ready, 1 << 20)[TP]
        for _ in range(5):
            await asyncio.sleep(0)
        assert not flush.done()  # drained is not done: the broker has not answered
        batch.complete(41)
        await flush
        assert not accumulator.flush_in_progress
        assert future is not None and future.done()

    run(scenario)


def test_drain_takes_one_batch_per_partition_up_to_max_request_size() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, linger_ms=0)
        for partition in range(4):
            for _ in range(20):
                await accumulator.append("t", partition, None, b"x" * 100)
        ready, _ = accumulator.ready()
        partitions = sorted(ready)
        assert partitions == [("t", p) for p in range(4)]
        first = accumulator.drain(partitions, 1500)
        assert len(first) == 1  # a second ~1 KiB batch would exceed 1500 bytes
        everything = accumulator.drain(partitions, 1 << 20)
        assert len(everything) == 4  # one each, not all of a partition's batches
        assert set(first) != set(accumulator.drain(partitions, 1500))  # the start rotates
        huge = accumulator.drain(partitions, 10)
        assert len(huge) == 1  # at least one batch, even if it alone is too big
        accumulator.mute(("t", 1))
        assert ("t", 1) not in accumulator.ready()[0]
        assert ("t", 1) not in accumulator.drain(partitions, 1 << 20)
        accumulator.unmute(("t", 1))
        assert ("t", 1) in accumulator.drain(partitions, 1 << 20)

    run(scenario)


# --- memory -----------------------------------------------------------------------------


def test_append_waits_for_memory_until_a_batch_completes() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, buffer_memory=2048, linger_ms=0)
        await accumulator.append("t", 0, None, b"x" * 100)
        await accumulator.append("t", 1, None, b"x" * 100)
        assert accumulator.pool.available == 0
        await accumulator.append("t", 0, None, b"y" * 100)  # fits the open batch: no memory
        blocked = asyncio.create_task(accumulator.append("t", 2, None, b"z" * 100))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not blocked.done()
        assert accumulator.ready()[0] == {("t", 0), ("t", 1)}
        batch = accumulator.drain([("t", 0)], 1 << 20)[("t", 0)]
        assert not blocked.done()  # drained batches still hold their memory
        batch.complete(0)
        future = await blocked
        assert future is not None and not future.done()
        assert accumulator.pool.available == 0
        assert batch.record_count == 2

    run(scenario)


def test_append_times_out_with_buffer_exhausted_when_nothing_is_released() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, buffer_memory=1024, max_block_ms=50)
        await accumulator.append("t", 0, None, b"x" * 100)
        with pytest.raises(BufferExhaustedError, match=r"max\.block\.ms \(50 ms\)") as caught:
            await accumulator.append("t", 1, None, b"x" * 100)
        assert isinstance(caught.value, KafkaTimeoutError)
        assert caught.value.error_code is ErrorCode.REQUEST_TIMED_OUT
        assert accumulator.pool.queued == 0
        drain_all(accumulator)[0].complete(0)
        await accumulator.append("t", 1, None, b"x" * 100)  # the memory came back
        with pytest.raises(RecordTooLargeError):
            await accumulator.append("t", 3, None, b"x" * 2000)

    run(scenario)


def test_appends_that_waited_for_the_same_partition_share_one_new_batch() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, buffer_memory=2048, linger_ms=0)
        await accumulator.append("t", 0, None, b"x")
        await accumulator.append("t", 1, None, b"x")
        waiting = [asyncio.create_task(accumulator.append("t", 2, None, b"%d" % i)) for i in range(2)]
        await asyncio.sleep(0)
        for batch in accumulator.drain([("t", 0), ("t", 1)], 1 << 20).values():
            batch.complete(0)
        await asyncio.gather(*waiting)
        (batch,) = accumulator.drain([("t", 2)], 1 << 20).values()
        assert [bytes(r.value or b"") for r in decode_records(batch.buffer)] == [b"0", b"1"]
        assert accumulator.pool.available == 1024  # the second waiter gave its memory back

    run(scenario)


def test_from_config_takes_the_producer_settings() -> None:
    config = ProducerConfig.from_properties(
        {"batch.size": "1000", "linger.ms": "7", "compression.type": "zstd", "buffer.memory": "5000"}
    )
    accumulator = RecordAccumulator.from_config(config)
    assert (accumulator.batch_size, accumulator.linger_ms, accumulator.compression) == (
        1000, 7, CompressionType.ZSTD,
    )
    assert accumulator.pool.total_memory == 5000 and accumulator.max_block_ms == 60_000


def test_memory_waiters_are_served_in_order() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, buffer_memory=1024, linger_ms=0)
        await accumulator.append("t", 0, None, b"x")
        order: list[int] = []

        async def append(partition: int) -> None:
            await accumulator.append("t", partition, None, b"x")
            order.append(partition)

        waiters = [asyncio.create_task(append(p)) for p in (1, 2, 3)]
        for _ in range(3):
            await asyncio.sleep(0)
            for batch in drain_all(accumulator):
                batch.complete(0)
            for _ in range(3):
                await asyncio.sleep(0)
        await asyncio.gather(*waiters)
        assert order == [1, 2, 3]

    run(scenario)


def test_close_fails_memory_waiters_and_refuses_appends() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024, buffer_memory=1024)
        future = await accumulator.append("t", 0, None, b"x")
        blocked = asyncio.create_task(accumulator.append("t", 1, None, b"x"))
        await asyncio.sleep(0)
        accumulator.close()
        with pytest.raises(ClientClosedError):
            await blocked
        with pytest.raises(ClientClosedError):
            await accumulator.append("t", 2, None, b"x")
        assert accumulator.ready()[0] == {TP}  # closing: send what is queued now
        assert accumulator.abort_batches(KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR, "aborted")) == 1
        assert future is not None
        with pytest.raises(KafkaError, match="aborted"):
            await future
        assert not accumulator.has_undrained() and not accumulator.has_incomplete()
        assert accumulator.pool.available == 1024

    run(scenario)


# --- codecs and idempotence -------------------------------------------------------------


@pytest.mark.parametrize("codec", list(CompressionType))
def test_batches_are_built_with_every_codec(codec: CompressionType) -> None:
    async def scenario() -> list[ClosedBatch]:
        accumulator = RecordAccumulator(compression=codec, batch_size=4096)
        sent = []
        batches: list[ClosedBatch] = []
        for i in range(600):
            key = None if i % 7 == 0 else b"key-%d" % i
            value = None if i % 11 == 0 else b"value %d " % i * (i % 5 + 1)
            headers = [("h", b"%d" % i), ("none", None)] if i % 3 == 0 else []
            timestamp = 1_700_000_000_000 + i
            await accumulator.append("t", 0, key, value, headers, timestamp, want_future=False)
            sent.append((key, value, headers, timestamp))
            if i % 200 == 199:  # the sender drains now and then; the ratio is learnt
                batches += drain_all(accumulator)
        received = []
        for batch in batches:
            header = validate_crc(batch.buffer)
            assert header.compression == codec
            assert header.records_count == batch.record_count
            for record in decode_batch(batch.buffer).records:
                received.append((
                    None if record.key is None else bytes(record.key),
                    None if record.value is None else bytes(record.value),
                    [(k, None if v is None else bytes(v)) for k, v in record.headers],
                    record.timestamp,
                ))
        assert received == sent
        return batches

    batches = run(scenario)
    if codec == CompressionType.NONE:
        assert max(batch.record_count for batch in batches) < 100
    else:  # batches after the first hold ~batch.size compressed, far more raw
        assert max(batch.record_count for batch in batches[1:]) > 100
        assert max(batch.size_in_bytes for batch in batches) <= 4096 * 1.1


def test_producer_state_is_stamped_with_a_valid_crc() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(compression=CompressionType.LZ4)
        for i in range(10):
            await accumulator.append("t", 0, b"k", b"v%d" % i, want_future=False)
        (batch,) = drain_all(accumulator)
        before = read_batch_header(batch.buffer)
        assert (before.producer_id, before.producer_epoch, before.base_sequence) == (-1, -1, -1)
        batch.set_producer_state(123456789012, 7, 2_147_483_640)
        header = validate_crc(batch.buffer)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
            123456789012, 7, 2_147_483_640,
        )
        assert not header.is_transactional
        assert batch.has_sequence and batch.last_sequence == 1  # wrapped past 2**31 - 1
        batch.set_producer_state(5, 1, 0, is_transactional=True)
        header = validate_crc(batch.buffer)
        assert header.is_transactional and header.compression == CompressionType.LZ4
        assert [bytes(r.value or b"") for r in decode_records(batch.buffer)] == [
            b"v%d" % i for i in range(10)
        ]

    run(scenario)


# --- delivery ---------------------------------------------------------------------------


def test_futures_resolve_with_each_records_offset_and_timestamp() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024)
        futures: list[FutureRecordMetadata] = []
        for i in range(30):
            future = await accumulator.append("t", 3, None, b"x" * 100, timestamp=5_000 + i)
            assert future is not None
            futures.append(future)
        batches = drain_all(accumulator)
        assert len(batches) > 1
        base = 1000
        for batch in batches:
            batch.complete(base)
            base += batch.record_count
        results = await asyncio.gather(*futures)
        assert results == [RecordMetadata("t", 3, 1000 + i, 5_000 + i) for i in range(30)]
        assert futures[4].result() == results[4] and futures[4].exception() is None
        real = futures[5].as_future()
        done, _ = await asyncio.wait([real])
        assert done == {real} and real.result() == results[5]

    run(scenario)


def test_log_append_time_and_acks_zero_show_in_the_metadata() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator()
        first = await accumulator.append("t", 0, None, b"a", timestamp=10)
        await accumulator.append("t", 1, None, b"b", timestamp=10)
        second = await accumulator.append("t", 1, None, b"c", timestamp=11)
        batches = {b.topic_partition: b for b in drain_all(accumulator)}
        batches[("t", 0)].complete(7, log_append_time=99)
        batches[("t", 1)].complete(-1)  # acks=0: no offset known
        assert first is not None and second is not None
        assert await first == RecordMetadata("t", 0, 7, 99)
        assert await second == RecordMetadata("t", 1, -1, 11)

    run(scenario)


def test_callbacks_fire_in_append_order_and_survive_a_failing_one() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator(batch_size=1024)
        calls: list[tuple[RecordMetadata | None, BaseException | None]] = []

        def callback(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            calls.append((metadata, error))
            if metadata is not None and metadata.offset == 102:
                raise RuntimeError("a user's bug")

        for i in range(20):
            result = await accumulator.append(
                "t", 0, None, b"x" * 100, timestamp=i, callback=callback, want_future=False
            )
            assert result is None
        batches = drain_all(accumulator)
        base = 100
        for batch in batches:
            batch.complete(base)
            base += batch.record_count
        assert calls == [(RecordMetadata("t", 0, 100 + i, i), None) for i in range(20)]

    run(scenario)


def test_failing_a_batch_fails_all_its_futures_and_callbacks() -> None:
    async def scenario() -> None:
        accumulator = RecordAccumulator()
        errors: list[BaseException | None] = []
        futures = []
        for i in range(5):
            future = await accumulator.append(
                "t", 0, None, b"%d" % i, callback=lambda _, error: errors.append(error)
            )
            assert future is not None
            futures.append(future)
        (batch,) = drain_all(accumulator)
        failure = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        assert batch.fail(failure)
        assert not batch.complete(0)  # already failed: a late answer changes nothing
        assert errors == [failure] * 5
        for future in futures:
            with pytest.raises(KafkaError) as caught:
                await future
            assert caught.value is failure
            assert future.exception() is failure
        assert accumulator.pool.available == accumulator.pool.total_memory

    run(scenario)


# --- retries and expiry -----------------------------------------------------------------


def test_a_reenqueued_batch_waits_out_its_backoff_and_goes_first() -> None:
    async def scenario() -> None:
        clock = Clock()
        accumulator = RecordAccumulator(
            linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=1000, clock_ms=clock
        )
        await accumulator.append("t", 0, None, b"first")
        (first,) = accumulator.drain([TP], 1 << 20).values()
        first.set_producer_state(1, 0, 0)
        await accumulator.append("t", 0, None, b"second")
        accumulator.reenqueue(first)
        assert first.attempts == 1
        assert accumulator.ready() == (set(), 100)  # the retry holds the partition back
        clock.now += 100
        assert accumulator.ready()[0] == {TP}
        assert accumulator.drain([TP], 1 << 20)[TP] is first
        accumulator.reenqueue(first)
        assert accumulator.ready() == (set(), 200)  # exponential backoff
        clock.now += 200
        assert accumulator.drain([TP], 1 << 20)[TP] is first
        (second,) = accumulator.drain([TP], 1 << 20).values()
        assert [bytes(r.value or b"") for r in decode_records(second.buffer)] == [b"second"]

    run(scenario)


def test_retries_are_kept_in_sequence_order() -> None:
    async def scenario() -> None:
        clock = Clock()
        accumulator = RecordAccumulator(linger_ms=0, retry_backoff_ms=0, clock_ms=clock)
        batches = []
        for sequence in range(3):
            await accumulator.append("t", 0, None, b"%d" % sequence)
            (batch,) = accumulator.drain([TP], 1 << 20).values()
            batch.set_producer_state(1, 0, sequence)
            batches.append(batch)
        for batch in (batches[2], batches[0], batches[1]):
            accumulator.reenqueue(batch)
        resent = [accumulator.drain([TP], 1 << 20)[TP].base_sequence for _ in range(3)]
        assert resent == [0, 1, 2]

    run(scenario)


def test_batches_older_than_delivery_timeout_expire() -> None:
    async def scenario() -> None:
        clock = Clock()
        accumulator = RecordAccumulator(linger_ms=10_000, delivery_timeout_ms=1000, clock_ms=clock)
        old = await accumulator.append("t", 0, None, b"old")
        clock.now += 600
        young = await accumulator.append("t", 1, None, b"young")
        clock.now += 400
        assert accumulator.expire_batches() == 1
        assert old is not None and young is not None
        with pytest.raises(KafkaTimeoutError, match="1000 ms has passed since batch creation"):
            await old
        assert not young.done()

    run(scenario)
