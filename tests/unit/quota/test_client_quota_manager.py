"""ClientQuotaManager: Kafka's eight-level precedence, who shares a rate (the quota group),
and the request quota's cap; as Kafka's ClientQuotaManagerTest does it."""

from __future__ import annotations

from pathlib import Path

import pytest

from strom.broker.config import BrokerConfig, ConfigError
from strom.broker.quota import (
    DEFAULT,
    ClientQuotaManager,
    ClientQuotas,
    FileQuotaStore,
    QuotaEntity,
)

LEVELS = [  # most specific first, each with its own bound
    (QuotaEntity("alice", "app"), 1.0),
    (QuotaEntity("alice", DEFAULT), 2.0),
    (QuotaEntity("alice", None), 3.0),
    (QuotaEntity(DEFAULT, "app"), 4.0),
    (QuotaEntity(DEFAULT, DEFAULT), 5.0),
    (QuotaEntity(DEFAULT, None), 6.0),
    (QuotaEntity(None, "app"), 7.0),
    (QuotaEntity(None, DEFAULT), 8.0),
]


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def manager(clock: Clock | None = None, max_throttle_ms: int | None = None) -> ClientQuotaManager:
    return ClientQuotaManager("producer_byte_rate", 11, 1000, max_throttle_ms=max_throttle_ms, clock=clock or Clock())


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_the_most_specific_configured_entity_wins(level: int) -> None:
    quotas = manager()
    quotas.update_quotas(dict(LEVELS[level:]))
    assert quotas.bound("alice", "app") == LEVELS[level][1]


def test_precedence_of_unrelated_users_and_clients() -> None:
    quotas = manager()
    quotas.update_quotas(dict(LEVELS))
    assert quotas.bound("bob", "app") == 4.0  # <default> user with client app
    assert quotas.bound("bob", "other") == 5.0
    assert quotas.bound("alice", "other") == 2.0
    quotas.update_quotas({QuotaEntity(None, "app"): 7.0})
    assert quotas.bound("bob", "app") == 7.0
    assert quotas.bound("bob", "other") is None
    quotas.update_quotas({})
    assert not quotas.enabled
    assert quotas.bound("alice", "app") is None


def test_a_user_quota_is_shared_by_the_users_client_ids() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quotas({QuotaEntity("alice", None): 1000.0})
    assert quotas.record("alice", "one", 10_000) == 0  # 1000 B/s over 10 s: at the bound
    assert quotas.record("alice", "two", 10_000) == 10_000  # the same rate: 2000 B/s
    assert quotas.record("bob", "one", 10_000) == 0  # no quota for bob


def test_a_client_id_quota_is_shared_across_users_and_a_default_one_is_per_client() -> None:
    quotas = manager()
    quotas.update_quotas({QuotaEntity(None, DEFAULT): 1000.0})
    assert quotas.record("alice", "one", 10_000) == 0
    assert quotas.record("bob", "one", 10_000) == 10_000  # client "one" across users
    assert quotas.record("bob", "two", 10_000) == 0  # client "two" has a rate of its own


def test_a_user_and_client_quota_gives_each_pair_its_rate() -> None:
    quotas = manager()
    quotas.update_quotas({QuotaEntity(DEFAULT, DEFAULT): 1000.0})
    assert quotas.record("alice", "one", 10_000) == 0
    assert quotas.record("alice", "two", 10_000) == 0
    assert quotas.record("bob", "one", 10_000) == 0
    assert quotas.record("alice", "one", 1000) == 1000  # 1100 B/s: 10 % over for 10 s


def test_changing_a_quota_keeps_the_measured_rate() -> None:
    quotas = manager()
    quotas.update_quotas({QuotaEntity("alice", None): 10_000.0})
    assert quotas.record("alice", "c", 20_000) == 0
    quotas.update_quotas({QuotaEntity("alice", None): 1000.0})
    assert quotas.record("alice", "c", 0) == 10_000


def test_unrecord_and_the_fetch_size_cap() -> None:
    quotas = manager()
    quotas.update_quotas({QuotaEntity(None, "c"): 1000.0})
    assert quotas.max_value_in_window("u", "c") == 10_000  # 1000 B/s x (11 - 1) s
    assert quotas.max_value_in_window("u", "other") is None
    throttle = quotas.record("u", "c", 30_000)
    assert throttle == 20_000
    quotas.unrecord("u", "c", 30_000)
    assert quotas.record("u", "c", 0) == 0


def test_the_request_quota_throttle_is_capped_at_one_window() -> None:
    quotas = manager(max_throttle_ms=1000)
    quotas.update_quotas({QuotaEntity("alice", None): 1.0})
    assert quotas.record("alice", "c", 100.0) == 1000  # uncapped: 99 x 10 s


def test_the_rate_moves_with_the_clock() -> None:
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quotas({QuotaEntity("alice", None): 1000.0})
    assert quotas.record("alice", "c", 15_000) == 5000
    clock.now = 11_000  # the samples of the burst have expired
    assert quotas.record("alice", "c", 1000) == 0


@pytest.mark.parametrize(("name", "value"), [("quota.window.num", "0"), ("quota.window.size.seconds", "-1")])
def test_a_window_below_one_is_one_config_error(tmp_path: Path, name: str, value: str) -> None:
    config = BrokerConfig.from_properties({"log.dirs": str(tmp_path), name: value})
    with pytest.raises(ConfigError, match=f"invalid value {value} for {name}: must be at least 1"):
        ClientQuotas(config, FileQuotaStore(str(tmp_path)))


def test_rates_of_clients_idle_for_an_hour_are_forgotten_when_there_are_many(monkeypatch: pytest.MonkeyPatch) -> None:
    import strom.broker.quota.manager as manager_module

    monkeypatch.setattr(manager_module, "RATES_BEFORE_EXPIRY", 3)
    clock = Clock()
    quotas = manager(clock)
    quotas.update_quotas({QuotaEntity(None, DEFAULT): 1000.0})
    for client in ("a", "b", "c"):
        quotas.record("u", client, 5000)
    clock.now = 3_600_000
    quotas.record("u", "c", 1)  # c is active again
    quotas.record("u", "d", 1)  # a fourth rate: a and b (idle an hour) go
    assert sorted(quotas._rates) == [("", "c"), ("", "d")]
    assert quotas.record("u", "a", 10_000) == 0  # a new rate for a
