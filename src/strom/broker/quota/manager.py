"""ClientQuotaManager: one quota type's rates, per quota group, and the throttle they call for.

Kafka has one manager per quota type (``producer_byte_rate``, ``consumer_byte_rate``,
``request_percentage``), each with its own table of configured quota entities, so
precedence is judged per type: a user with only a consumer quota falls through to
client-id quotas for producing.

Which quota applies, and which clients share it, is Kafka's ``DefaultQuotaCallback``:
the most specific configured entity of the eight (``QuotaEntity.precedence``) decides the
*quota group* (the metric tags): a ``(user, client-id)`` entity, default or not, gives
each (user, client id) pair its own rate; a user entity, one rate per user across its
client ids; a client-id entity, one per client id across users. Every connection of a
group adds to one ``SampledRate``, so a client cannot beat its quota by opening more
connections. The bound is then looked up for the group's tags (Kafka's ``quotaLimit``).

The hot path is ``record``: a dict lookup of the (user, client id) pair's group, then a
sensor update only where a quota applies; with no quota of this type configured at all
the caller tests ``enabled`` and pays nothing more.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

from strom.broker.quota.entity import DEFAULT, Name, QuotaEntity
from strom.broker.quota.rate import SampledRate

MAX_CACHED_GROUPS: Final = 100_000  # distinct (user, client id) pairs remembered; then forgotten at once
# Kafka drops a client's sensors after an hour without a request (InactiveSensorExpirationTimeSeconds);
# here the rates of such clients go when there are many rates, checked as a new one is made.
INACTIVE_RATE_EXPIRY_MS: Final = 3_600_000
RATES_BEFORE_EXPIRY: Final = 10_000


def monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(slots=True)
class QuotaGroup:
    """The clients that share one rate: Kafka's metric tags ("" for a tag not used)."""

    user: str
    client_id: str
    bound: float | None  # None: no quota applies (nothing is recorded)
    rate: SampledRate | None


class ClientQuotaManager:
    """The rates of one quota type (``key``), Kafka's ClientQuotaManager."""

    def __init__(self, key: str, samples: int, window_ms: int, *, max_throttle_ms: int | None = None,
                 clock: Callable[[], int] = monotonic_ms) -> None:
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms  # the request quota caps its throttle at one window
        self.clock = clock
        self.enabled = False  # any quota of this type configured: the one test on the hot path
        self._quotas: dict[QuotaEntity, float] = {}
        self._groups: dict[tuple[str, str], QuotaGroup] = {}  # (user, client id) -> its group
        self._rates: dict[tuple[str, str], SampledRate] = {}  # metric tags -> the shared rate

    def update_quotas(self, quotas: Mapping[QuotaEntity, float]) -> None:
        """Replace this type's configured quotas; rates already measured are kept (a client
        whose quota changes is judged on what it did before, as Kafka's sensors are)."""
        self._quotas = dict(quotas)
        self._groups = {}
        self.enabled = bool(self._quotas)

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record ``value`` for the client; the throttle time in ms it has earned (0 if none)."""
        group = self._groups.get((user, client_id))
        if group is None:
            group = self.group(user, client_id)
        if group.rate is None or group.bound is None:
            return 0
        throttle_ms = group.rate.record_and_check(value, group.bound, self.clock())
        if self.max_throttle_ms is not None and throttle_ms > self.max_throttle_ms:
            return self.max_throttle_ms
        return throttle_ms

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back what ``record`` added (a throttled Fetch sends no records: Kafka's
        ``unrecordQuotaSensor``)."""
        group = self._groups.get((user, client_id))
        if group is not None and group.rate is not None:
            group.rate.record(-value, self.clock())

    def bound(self, user: str, client_id: str) -> float | None:
        """The quota that applies to the client, None if none does."""
        return self.group(user, client_id).bound

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may carry without being throttled whatever came before:
        the bound over ``samples - 1`` windows (Kafka's ``getMaxValueInQuotaWindow``, which
        caps a consumer's fetch size); None without a quota."""
        bound = self.group(user, client_id).bound if self.enabled else None
        return None if bound is None else bound * (self.samples - 1) * self.window_ms / 1000

    def group(self, user: str, client_id: str) -> QuotaGroup:
        """The client's quota group, made (and its rate) on first use."""
        group = self._groups.get((user, client_id))
        if group is not None:
            return group
        tags = self._metric_tags(user, client_id)
        bound = self._quota_limit(*tags)
        rate: SampledRate | None = None
        if bound is not None:
            rate = self._rates.get(tags)
            if rate is None:
                now_ms = self.clock()
                if len(self._rates) >= RATES_BEFORE_EXPIRY:
                    self._expire(now_ms)
                rate = self._rates[tags] = SampledRate(self.samples, self.window_ms, now_ms)
        group = QuotaGroup(tags[0], tags[1], bound, rate)
        if len(self._groups) >= MAX_CACHED_GROUPS:
            self._groups = {}
        self._groups[(user, client_id)] = group
        return group

    def _expire(self, now_ms: int) -> None:
        """Forget the rates of quota groups idle for an hour (and every cached group, which
        may point at one): a client that comes back starts a new rate, as with Kafka."""
        idle = [tags for tags, rate in self._rates.items()
                if now_ms - rate.last_window_start_ms() >= INACTIVE_RATE_EXPIRY_MS]
        for tags in idle:
            del self._rates[tags]
        if idle:
            self._groups = {}

    def _metric_tags(self, user: str, client_id: str) -> tuple[str, str]:
        """Kafka's ``quotaMetricTags``: the tags of the most specific configured entity."""
        quotas = self._quotas
        for entity in QuotaEntity.precedence(user, client_id):
            if entity in quotas:
                return (user if entity.user is not None else "", client_id if entity.client_id is not None else "")
        return "", client_id

    def _quota_limit(self, user: str, client_id: str) -> float | None:
        """Kafka's ``quotaLimit``: the bound for a group's tags, most specific first."""
        candidates: tuple[tuple[Name, Name], ...]
        if user and client_id:
            candidates = ((user, client_id), (user, DEFAULT), (DEFAULT, client_id), (DEFAULT, DEFAULT))
        elif user:
            candidates = ((user, None), (DEFAULT, None))
        elif client_id:
            candidates = ((None, client_id), (None, DEFAULT))
        else:
            return None
        for entity_user, entity_client in candidates:
            bound = self._quotas.get(QuotaEntity(entity_user, entity_client))
            if bound is not None:
                return bound
        return None
