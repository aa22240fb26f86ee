"""Fetch (1) long polls: ``min_bytes`` and ``max_wait_ms``, woken by appends, ended by the timeout.

Times are compared with the poll's own timeout (an answer well before it was woken;
one at or after it was not), never with fine-grained expectations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from typing import Any

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner, records_of
from tests.support.fetch_requests import fetch, partitions_of

LONG_WAIT_MS = 5000  # an answer in under half of it was woken, not timed out
SHORT_WAIT_MS = 300  # a poll expected to run to its timeout


async def _timed(request: Awaitable[Any], *also: Awaitable[Any]) -> tuple[Any, float]:
    """The answer to ``request`` (run beside ``also``) and the seconds it took."""
    start = time.monotonic()
    response, *_ = await asyncio.gather(request, *also)
    return response, time.monotonic() - start


async def _produce_later(h: BrokerHarness, topic: str, partition: int, values: list[bytes]) -> None:
    await asyncio.sleep(0.05)  # the fetch is waiting by now
    await h.produce(topic, partition, values)


def test_an_append_wakes_a_waiting_fetch(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        request = fetch([("t", 0, 0)], min_bytes=1, max_wait_ms=LONG_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12), _produce_later(h, "t", 0, [b"news"]))
        assert elapsed < LONG_WAIT_MS / 1000 / 2, f"woken after {elapsed:.2f} s"
        partition = partitions_of(response)[("t", 0)]
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 1)
        assert [r.value for r in records_of(partition.records)] == [b"news"]

    broker.run(scenario)


def test_without_data_the_fetch_answers_empty_at_its_timeout(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        request = fetch([("t", 0, 0)], min_bytes=1, max_wait_ms=SHORT_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12))
        assert elapsed >= SHORT_WAIT_MS / 1000 * 0.9, f"answered after {elapsed:.2f} s"
        partition = partitions_of(response)[("t", 0)]
        assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 0)
        assert records_of(partition.records) == []

    broker.run(scenario)


def test_an_append_to_another_partition_does_not_end_the_wait(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t", partitions=2)
        request = fetch([("t", 0, 0)], min_bytes=1, max_wait_ms=SHORT_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12), _produce_later(h, "t", 1, [b"elsewhere"]))
        assert elapsed >= SHORT_WAIT_MS / 1000 * 0.9, f"answered after {elapsed:.2f} s"
        assert records_of(partitions_of(response)[("t", 0)].records) == []

    broker.run(scenario)


def test_fewer_bytes_than_min_bytes_wait_for_the_timeout_and_are_then_returned(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        request = fetch([("t", 0, 0)], min_bytes=100_000, max_wait_ms=SHORT_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12), _produce_later(h, "t", 0, [b"small"]))
        assert elapsed >= SHORT_WAIT_MS / 1000 * 0.9, f"answered after {elapsed:.2f} s"
        assert [r.value for r in records_of(partitions_of(response)[("t", 0)].records)] == [b"small"]

    broker.run(scenario)


def test_data_already_there_is_answered_at_once(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"ready"])
        request = fetch([("t", 0, 0)], min_bytes=1, max_wait_ms=LONG_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12))
        assert elapsed < LONG_WAIT_MS / 1000 / 2
        assert [r.value for r in records_of(partitions_of(response)[("t", 0)].records)] == [b"ready"]

    broker.run(scenario)


def test_a_partition_error_is_answered_at_once(broker: BrokerRunner) -> None:
    """Kafka answers a fetch that met an error without waiting (an unknown partition here)."""

    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        request = fetch([("t", 0, 0), ("t", 7, 0)], min_bytes=1, max_wait_ms=LONG_WAIT_MS)
        response, elapsed = await _timed(h.request(request, version=12))
        assert elapsed < LONG_WAIT_MS / 1000 / 2
        assert partitions_of(response)[("t", 7)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    broker.run(scenario)


def test_several_waiting_fetches_are_all_woken_by_one_append(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        polls = [h.request(fetch([("t", 0, 0)], min_bytes=1, max_wait_ms=LONG_WAIT_MS), version=12) for _ in range(3)]
        start = time.monotonic()
        *responses, _ = await asyncio.gather(*polls, _produce_later(h, "t", 0, [b"shared"]))
        assert time.monotonic() - start < LONG_WAIT_MS / 1000 / 2
        for response in responses:
            assert [r.value for r in records_of(partitions_of(response)[("t", 0)].records)] == [b"shared"]

    broker.run(scenario)
