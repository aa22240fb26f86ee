"""ParallelConsumer against a running Strom broker: ordering modes with thread and async
workers, the offset map across a restart, retries and the dead-letter topic, stopping on
a poison record without a dead-letter topic, and bounded memory through pause/resume."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from strom.alo import ParallelConsumer, ProcessingFailedError
from strom.client.admin import AsyncAdmin
from strom.client.admin_types import NewTopic
from strom.client.consumer import AsyncConsumer
from strom.client.fetcher import ConsumerRecord
from strom.client.producer import AsyncProducer
from tests.support.broker_process import BrokerProcess

_names = iter(range(1_000_000))


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory: Path = tmp_path_factory.mktemp("alo")
    broker = BrokerProcess(directory / "data", {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def consumer_config(bootstrap: str, group: str, **extra: object) -> dict[str, object]:
    return {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "heartbeat.interval.ms": 300, **extra}


async def make_topic(bootstrap: str, partitions: int, records: int, keys: int = 20) -> tuple[str, dict[int, int]]:
    topic = f"alo-{next(_names)}"
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        await admin.create_topics([NewTopic(topic, partitions, 1)])
    async with AsyncProducer({"bootstrap.servers": bootstrap}) as producer:
        for i in range(records):
            await producer.produce(topic, f"v{i}".encode(), f"k{i % keys}".encode())
        await producer.flush()
    async with AsyncConsumer({"bootstrap.servers": bootstrap}) as consumer:
        ends = await consumer.end_offsets([(topic, p) for p in range(partitions)])
    return topic, {tp[1]: end for tp, end in ends.items()}


async def committed(bootstrap: str, group: str) -> dict[int, int]:
    async with AsyncAdmin({"bootstrap.servers": bootstrap}) as admin:
        return {tp[1]: c.offset for tp, c in (await admin.list_consumer_group_offsets(group)).items()}


async def until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


class Recorder:
    """Starts and ends of records, and the most ever running at once per lane."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.done: list[tuple[int, int, bytes]] = []
        self.running: dict[Any, int] = defaultdict(int)
        self.most: dict[Any, int] = defaultdict(int)

    def begin(self, *lanes: Any) -> None:
        with self.lock:
            for lane in lanes:
                self.running[lane] += 1
                self.most[lane] = max(self.most[lane], self.running[lane])

    def end(self, record: ConsumerRecord, *lanes: Any) -> None:
        with self.lock:
            for lane in lanes:
                self.running[lane] -= 1
            self.done.append((record.partition, record.offset, record.key or b""))


@pytest.mark.parametrize("ordering", ["partition", "key", "unordered"])
@pytest.mark.parametrize("kind", ["threads", "async"])
def test_ordering_modes_with_thread_and_async_workers(bootstrap: str, ordering: str, kind: str) -> None:
    async def main() -> None:
        # Four keys over three partitions: some partition holds two keys (so ``key`` mode
        # can run a partition in parallel), and eight workers cannot all run distinct keys
        # (so ``unordered`` must run some key in parallel).
        topic, ends = await make_topic(bootstrap, 3, 600, keys=4)
        group = f"g-{topic}"
        recorder = Recorder()

        def lanes(record: ConsumerRecord) -> tuple[Any, ...]:
            return (("partition", record.partition), ("key", record.key))

        def blocking(record: ConsumerRecord) -> None:
            recorder.begin(*lanes(record))
            time.sleep(0.002)
            recorder.end(record, *lanes(record))

        async def coroutine(record: ConsumerRecord) -> None:
            recorder.begin(*lanes(record))
            await asyncio.sleep(0.002)
            recorder.end(record, *lanes(record))

        handler: Callable[[ConsumerRecord], Any] = blocking if kind == "threads" else coroutine
        async with ParallelConsumer(consumer_config(bootstrap, group), handler, ordering=ordering,
                                    max_concurrency=8, commit_interval_ms=100) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            await until(lambda: len(recorder.done) >= 600)
        assert sorted((p, o) for p, o, _ in recorder.done) == [(p, o) for p in range(3) for o in range(ends[p])]
        assert await committed(bootstrap, group) == ends
        per_partition = max(v for lane, v in recorder.most.items() if lane[0] == "partition")
        per_key = max(v for lane, v in recorder.most.items() if lane[0] == "key")
        if ordering == "partition":
            assert per_partition == 1
        elif ordering == "key":
            assert per_key == 1 and per_partition > 1
        else:
            assert per_key > 1 and per_partition > 1
        if ordering != "unordered":  # order kept within the lane: offsets ascend per key
            last: dict[bytes, int] = {}
            for _, offset, key in recorder.done:
                assert offset > last.get(key, -1)
                last[key] = offset

    asyncio.run(main())


def test_finished_records_are_not_processed_again_after_a_restart(bootstrap: str) -> None:
    """Offset 0 never finishes in the first life; everything after it does. The commit
    can only say 0, but its offset map says the rest is done: the second life processes
    offset 0 alone."""

    async def main() -> None:
        topic, ends = await make_topic(bootstrap, 1, 300)
        group = f"g-{topic}"
        first: list[int] = []
        release = asyncio.Event()

        async def stuck_at_zero(record: ConsumerRecord) -> None:
            if record.offset == 0:
                await release.wait()  # cancelled at close: never finishes
            first.append(record.offset)

        async with ParallelConsumer(consumer_config(bootstrap, group), stuck_at_zero, ordering="unordered",
                                    max_concurrency=16, commit_interval_ms=50, shutdown_timeout_ms=100) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            await until(lambda: len(first) == 299)
            assert await consumer.commit()
        assert await committed(bootstrap, group) == {0: 0}

        second: list[int] = []

        async def record_it(record: ConsumerRecord) -> None:
            second.append(record.offset)

        async with ParallelConsumer(consumer_config(bootstrap, group), record_it, ordering="unordered",
                                    commit_interval_ms=50) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            await until(lambda: consumer.metrics().skipped == 299 and second == [0])
            await until(lambda: consumer.metrics().commits > 0 and consumer.metrics().in_flight == 0)
            assert await consumer.commit()
        assert await committed(bootstrap, group) == ends
        assert second == [0]

    asyncio.run(main())


def test_failing_records_are_retried_then_dead_lettered_without_blocking_other_keys(bootstrap: str) -> None:
    async def main() -> None:
        topic, ends = await make_topic(bootstrap, 2, 200, keys=10)
        group = f"g-{topic}"
        dead_letters = f"{topic}-dlt"
        attempts: dict[tuple[int, int], int] = defaultdict(int)
        done: list[tuple[int, int]] = []

        async def handle(record: ConsumerRecord) -> None:
            attempts[(record.partition, record.offset)] += 1
            if record.key == b"k3":
                raise ValueError(f"poison {record.offset}")
            if record.key == b"k4" and attempts[(record.partition, record.offset)] == 1:
                raise TimeoutError("flaky once")
            done.append((record.partition, record.offset))

        async with ParallelConsumer(consumer_config(bootstrap, group), handle, ordering="key", max_concurrency=8,
                                    max_attempts=3, retry_backoff_ms=5, dead_letter_topic=dead_letters,
                                    commit_interval_ms=50) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            await until(lambda: consumer.metrics().dead_lettered == 20 and len(done) == 180)
            await until(lambda: consumer.metrics().in_flight == 0)
            metrics = consumer.metrics()
            assert metrics.retries == 20 * 2 + 20  # poison: 2 retries each; flaky: 1 each
            await consumer.commit()
        assert await committed(bootstrap, group) == ends
        assert all(n == 3 for (p, o), n in attempts.items() if (p, o) not in set(done))
        async with AsyncConsumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as reader:
            reader.assign([(dead_letters, 0)])
            letters: list[ConsumerRecord] = []
            deadline = time.monotonic() + 15
            while len(letters) < 20 and time.monotonic() < deadline:
                letters += await reader.poll(timeout_ms=200)
        assert len(letters) == 20 and all(r.key == b"k3" for r in letters)
        headers = dict(letters[0].headers)
        assert headers["kafka_dlt-original-topic"] == topic.encode()
        assert headers["kafka_dlt-exception-fqcn"] == b"builtins.ValueError"
        assert headers["strom_alo-attempts"] == b"3"

    asyncio.run(main())


def test_without_a_dead_letter_topic_a_poison_record_stops_the_consumer_and_is_not_committed(
        bootstrap: str) -> None:
    async def main() -> None:
        topic, _ = await make_topic(bootstrap, 1, 50)
        group = f"g-{topic}"

        def handle(record: ConsumerRecord) -> None:
            if record.offset == 20:
                raise RuntimeError("cannot process")

        consumer = ParallelConsumer(consumer_config(bootstrap, group), handle, ordering="partition",
                                    max_attempts=2, retry_backoff_ms=1)
        async with consumer:
            consumer.subscribe([topic])
            with pytest.raises(ProcessingFailedError) as failure:
                await asyncio.wait_for(consumer.run(), 30)
        assert failure.value.record.offset == 20 and failure.value.attempts == 2
        assert await committed(bootstrap, group) == {0: 20}  # never past the unprocessed record

    asyncio.run(main())


def test_memory_stays_bounded_by_pausing_partitions(bootstrap: str) -> None:
    async def main() -> None:
        topic, _ = await make_topic(bootstrap, 4, 2_000)
        group = f"g-{topic}"
        most_in_flight = most_paused = 0
        count = 0

        async def slow(record: ConsumerRecord) -> None:
            nonlocal count
            await asyncio.sleep(0.001)
            count += 1

        config = consumer_config(bootstrap, group, **{"max.poll.records": 20})
        async with ParallelConsumer(config, slow, ordering="unordered", max_concurrency=4,
                                    max_records_in_flight=100, max_buffered_records_per_partition=30) as consumer:
            consumer.subscribe([topic])
            await consumer.start()
            while count < 2_000:
                metrics = consumer.metrics()
                most_in_flight = max(most_in_flight, metrics.in_flight)
                most_paused = max(most_paused, metrics.paused)
                assert all(p.buffered <= 30 + 20 for p in metrics.partitions.values())
                await asyncio.sleep(0.002)
        # One poll's records can arrive before the pause takes effect.
        assert most_in_flight <= 100 + 20
        assert most_paused > 0

    asyncio.run(main())
