"""The throttles of Produce, Fetch and the request quota on an in-process broker: the throttle
formula in a Produce answer, a throttled Fetch answered empty (followers exempt), the request
quota's cap of one window (a Fetch it empties un-recorded from the byte rate), request time
that leaves out the handler's waits, no sensor at all while no quota is configured, and
quotas a full disk cannot store left unapplied."""

from __future__ import annotations

import asyncio
import time

from strom.broker.quota import FileQuotaStore
from strom.broker.quota.client_quotas import _Timed
from strom.protocol.error_codes import ErrorCode
from strom.protocol.messages.metadata_request import MetadataRequest
from tests.support.broker_harness import (
    CLIENT_ID,
    BrokerHarness,
    BrokerRunner,
    batch,
    produce_request,
    records_of,
)
from tests.support.fetch_requests import fetch
from tests.support.quota_requests import alter_request
from tests.support.storage import FaultyFileSystem


def test_a_produce_over_its_quota_carries_kafkas_throttle_time(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.request(alter_request([([("client-id", CLIENT_ID)], {"producer_byte_rate": 1000.0})]), version=1)
        h.broker.quotas.produce.clock = lambda: 1_000_000  # a still clock: the formula exactly
        records = batch([b"x" * 20_000])
        response = await h.request(produce_request("t", 0, records), version=9)
        assert response.responses[0].partition_responses[0].error_code == 0  # appended all the same
        # len(records) bytes over the 10 s of 11 samples, against 1000 B/s
        expected = round((len(records) / 10 - 1000) / 1000 * 10_000)
        assert response.throttle_time_ms == expected
        other = await h.request(produce_request("t", 0, batch([b"y"])), version=9, client_id="other")
        assert other.throttle_time_ms == 0

    broker.run(scenario)


def test_a_fetch_over_its_quota_is_answered_empty(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        for _ in range(10):
            await h.produce("t", 0, [b"v" * 2000])
        await h.request(alter_request([([("user", None)], {"consumer_byte_rate": 1000.0})]), version=1)
        h.broker.quotas.fetch.clock = lambda: 1_000_000
        first = await h.request(fetch([("t", 0, 0)]), version=12)
        (topic,) = first.responses
        fetched = records_of(topic.partitions[0].records)
        assert first.throttle_time_ms == 0 and fetched  # capped at 1000 B/s x 10 s: within the quota
        assert sum(len(r.value or b"") for r in fetched) <= 10_000
        second = await h.request(fetch([("t", 0, len(fetched))]), version=12)
        assert second.throttle_time_ms > 0
        assert second.responses == ()  # no partitions, no records
        replica = await h.request(fetch([("t", 0, 0)], replica_id=7), version=12)  # followers are exempt
        assert replica.throttle_time_ms == 0

    broker.run(scenario)


def test_the_request_quota_throttles_at_most_one_window(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.request(alter_request([([("user", "ANONYMOUS")], {"request_percentage": 0.01})]), version=1)
        throttles = []
        for _ in range(2000):
            response = await h.request(MetadataRequest(topics=None), version=12)
            throttles.append(response.throttle_time_ms)
            if response.throttle_time_ms:
                break
        assert throttles[-1] > 0, "0.01 % of a core is 1 us per 10 s: 2000 Metadata requests exceed it"
        assert max(throttles) <= 1000  # the request quota's cap: one window

    broker.run(scenario)


def test_request_time_counts_the_handlers_steps_not_its_waits() -> None:
    async def handler() -> None:
        await asyncio.sleep(1.0)
        deadline = time.perf_counter() + 0.05
        while time.perf_counter() < deadline:  # 50 ms of work after the wait
            pass

    async def main() -> int:
        timed = _Timed(handler())
        await timed
        return timed.ns

    ns = asyncio.run(main())
    assert 50_000_000 <= ns < 500_000_000


def test_no_quota_configured_costs_no_sensor(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        quotas = h.broker.quotas
        assert not (quotas.produce.enabled or quotas.fetch.enabled or quotas.request.enabled)
        await h.create_topic("t")
        await h.produce("t", 0, [b"v"])
        assert quotas.produce._groups == {} and quotas.produce._rates == {}

    broker.run(scenario)


def test_a_fetch_throttled_for_its_request_time_takes_its_bytes_out_of_the_byte_rate(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        await h.create_topic("t")
        await h.produce("t", 0, [b"v" * 1000])
        await h.request(alter_request([([("user", None)], {"consumer_byte_rate": 1e9, "request_percentage": 1e-6})]),
                        version=1)
        fetches = h.broker.quotas.fetch
        fetches.clock = lambda: 1_000_000
        response = await h.request(fetch([("t", 0, 0)]), version=12)
        assert response.throttle_time_ms > 0 and response.responses == ()  # over its request quota: no records
        group = fetches.group("ANONYMOUS", CLIENT_ID)
        assert group.rate is not None and group.rate.measure(1_000_000) == 0.0  # the bytes read are not counted

    broker.run(scenario)


def test_quotas_that_cannot_be_stored_are_not_applied(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        full_disk = FaultyFileSystem()
        full_disk.fail_writes_after = 0  # ENOSPC at the first byte
        h.broker.quotas.store = FileQuotaStore(h.broker.config.data_dir, full_disk)
        response = await h.request(alter_request([([("user", "a")], {"producer_byte_rate": 1.0}),
                                                  ([("user", "b")], {"bad_key": 1.0})]), version=1)
        assert [(e.error_code, e.error_message) for e in response.entries] == [
            (ErrorCode.UNKNOWN_SERVER_ERROR, "the quotas could not be stored: [Errno 28] No space left on device"),
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key bad_key")]
        assert h.broker.quotas.quotas == {} and not h.broker.quotas.produce.enabled

    broker.run(scenario)
