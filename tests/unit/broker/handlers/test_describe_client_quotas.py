"""DescribeClientQuotas (48) on an in-process broker: exact, default and any-name matches,
strict, and a bad filter answered with Kafka's error for the whole request (null entries)."""

from __future__ import annotations

import pytest

from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.quota_requests import alter_request, describe_request, described

ENTITIES: list[list[tuple[str, str | None]]] = [
    [("user", "alice")],
    [("user", "alice"), ("client-id", "app")],
    [("user", None), ("client-id", None)],
    [("client-id", "app")],
]


@pytest.mark.parametrize("version", [0, 1])
def test_filters(broker: BrokerRunner, version: int) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(alter_request([(entity, {"consumer_byte_rate": float(1000 + i)})
                                                  for i, entity in enumerate(ENTITIES)]), version=version)
        assert [e.error_code for e in response.entries] == [0] * len(ENTITIES)

        async def names(components: list[tuple[str, int, str | None]], strict: bool = False) -> list[object]:
            return sorted(described(await h.request(describe_request(components, strict), version=version)),
                          key=repr)

        assert len(await names([])) == 4
        assert await names([("user", 0, "alice")]) == sorted(
            [(("user", "alice"),), (("user", "alice"), ("client-id", "app"))], key=repr)
        assert await names([("user", 0, "alice")], strict=True) == [(("user", "alice"),)]
        assert await names([("user", 1, None)]) == [(("user", None), ("client-id", None))]
        assert await names([("client-id", 2, None)], strict=True) == [(("client-id", "app"),)]
        assert await names([("client-id", 0, "app"), ("user", 2, None)]) == [
            (("user", "alice"), ("client-id", "app"))]
        answer = await h.request(describe_request([("client-id", 0, "app")], strict=True), version=version)
        assert [[(v.key, v.value) for v in entry.values] for entry in answer.entries] == [
            [("consumer_byte_rate", 1003.0)]]

    broker.run(scenario)


def test_a_bad_filter_fails_the_request(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        bad = await h.request(describe_request([("user", 0, None)]), version=1)
        assert (bad.error_code, bad.error_message, bad.entries) == (
            ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)
        unknown = await h.request(describe_request([("topic", 2, None)]), version=1)
        assert (unknown.error_code, unknown.error_message) == (
            ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type topic")

    broker.run(scenario)
