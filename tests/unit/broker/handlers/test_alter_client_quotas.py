"""AlterClientQuotas (49) with DescribeClientQuotas (48) on an in-process broker: Kafka's
errors per entry (the valid entries still apply), validate_only, removal of the last key
removing the entity, the quota managers updated at once, the data dir's copy reloaded."""

from __future__ import annotations

from strom.broker.quota import DEFAULT, ClientQuotas, FileQuotaStore, QuotaEntity
from strom.protocol.error_codes import ErrorCode
from tests.support.broker_harness import BrokerHarness, BrokerRunner
from tests.support.quota_requests import alter_request, describe_request, described


def test_alter_then_describe_with_errors_per_entry_and_validate_only(broker: BrokerRunner) -> None:
    async def scenario(h: BrokerHarness) -> None:
        response = await h.request(alter_request([
            ([("user", "alice")], {"producer_byte_rate": 1024.0, "request_percentage": 50.0}),
            ([("user", "alice"), ("client-id", None)], {"consumer_byte_rate": 2048.0}),
            ([("client-id", "app")], {"producer_byte_rate": 1.5}),  # not a whole number
            ([("user", "bob")], {"no_such_quota": 1.0}),
            ([], {"producer_byte_rate": 1.0}),
        ]), version=1)
        assert [(e.error_code, e.error_message) for e in response.entries] == [
            (0, None), (0, None),
            (ErrorCode.INVALID_REQUEST, "Configuration producer_byte_rate must be a Long value"),
            (ErrorCode.INVALID_REQUEST, "Invalid configuration key no_such_quota"),
            (ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity"),
        ]
        assert [(e.entity_type, e.entity_name) for e in response.entries[1].entity] == [
            ("user", "alice"), ("client-id", None)]
        validated = await h.request(alter_request([([("user", "carol")], {"producer_byte_rate": 5.0})],
                                                  validate_only=True), version=0)
        assert validated.entries[0].error_code == 0
        everything = described(await h.request(describe_request([]), version=1))
        assert everything == {
            (("user", "alice"),): {"producer_byte_rate": 1024.0, "request_percentage": 50.0},
            (("user", "alice"), ("client-id", None)): {"consumer_byte_rate": 2048.0},
        }
        strict = described(await h.request(describe_request([("user", 0, "alice")], strict=True), version=0))
        assert list(strict) == [(("user", "alice"),)]
        bad = await h.request(describe_request([("user", 1, "x")]), version=1)
        assert (bad.error_code, bad.entries) == (ErrorCode.INVALID_REQUEST, None)
        # removing the last key removes the entity
        await h.request(alter_request([([("user", "alice")], {"producer_byte_rate": None,
                                                             "request_percentage": None})]), version=1)
        assert list(described(await h.request(describe_request([]), version=1))) == [
            (("user", "alice"), ("client-id", None))]
        assert h.broker.quotas.fetch.bound("alice", "any") == 2048.0
        assert not h.broker.quotas.produce.enabled
        reloaded = ClientQuotas(h.broker.config, FileQuotaStore(h.broker.config.data_dir))
        reloaded.load()
        assert reloaded.quotas == {QuotaEntity("alice", DEFAULT): {"consumer_byte_rate": 2048.0}}

    broker.run(scenario)
