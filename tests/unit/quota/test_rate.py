"""SampledRate and the throttle formula, on Kafka's own numbers (ClientQuotaManagerTest,
SampledStat/Rate): samples advance and expire, the window is at least samples - 1 whole
windows, and the throttle is (rate - bound) / bound x window."""

from __future__ import annotations

from strom.broker.quota.rate import SampledRate, throttle_time_ms


def test_kafka_quota_violation_case() -> None:
    # Kafka's ClientQuotaManagerTest.testQuotaViolation: 500 B/s, 11 samples of 1 s.
    rate = SampledRate(11, 1000, 0)
    now = 0
    for _ in range(10):  # at the quota rate for 10 s: never throttled
        assert rate.record_and_check(400, 500, now) == 0
        now += 1000
    now += 500
    # 400 x 10 + 2300 = 6300 bytes over 10.5 s = 600 B/s: (600 - 500) / 500 x 10.5 s
    assert rate.record_and_check(2300, 500, now) == 2100
    assert rate.measure(now) == 600.0


def test_a_new_client_is_measured_over_samples_minus_one_windows() -> None:
    rate = SampledRate(11, 1000, 5_000)
    rate.record(10_000, 5_000)
    assert rate.window_size_ms(5_000) == 10_000
    assert rate.measure(5_000) == 1000.0
    # 2.5 s later: still 10 whole windows assumed, plus the part of the current one
    assert rate.window_size_ms(7_500) == 10_500


def test_samples_older_than_the_whole_window_are_forgotten() -> None:
    rate = SampledRate(3, 1000, 0)
    rate.record(3000, 0)
    rate.record(300, 1000)
    assert rate.measure(1000) == 3300 / 2  # two whole windows at least
    # at 3 s the first sample (begun at 0) is obsolete: only the 300 is left
    assert rate.measure(3000) == 300 / 2
    assert rate.measure(10_000) == 0.0


def test_slots_are_reused_in_a_ring() -> None:
    rate = SampledRate(2, 1000, 0)
    rate.record(1, 0)
    rate.record(2, 1000)  # second slot
    rate.record(4, 2000)  # back to the first: the 1 is gone
    assert rate.measure(2000) == (2 + 4) / 1.0  # over 1 s: since the live oldest sample began


def test_unrecording_takes_back_a_value() -> None:
    rate = SampledRate(11, 1000, 0)
    throttle = rate.record_and_check(20_000, 1000, 0)
    assert throttle == 10_000  # (2000 - 1000) / 1000 x 10 s
    rate.record(-20_000, 0)
    assert rate.measure(0) == 0.0


def test_throttle_formula_rounds_as_java() -> None:
    assert throttle_time_ms(600, 500, 10_500) == 2100
    assert throttle_time_ms(1000.5, 1000, 1) == 0  # 0.0005 ms
    assert throttle_time_ms(1500, 1000, 1001) == 501  # 500.5 rounds up, as Math.round
    assert throttle_time_ms(1e30, 1, 10_000) == 2**31 - 1  # an int on the wire
