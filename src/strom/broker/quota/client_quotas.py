"""ClientQuotas: the broker's three quota managers, the configured quotas, and the request quota.

Kafka's ``QuotaFactory.QuotaManagers`` for clients: ``produce`` (``producer_byte_rate``:
the bytes of each Produce), ``fetch`` (``consumer_byte_rate``: the bytes of each Fetch
answer) and ``request`` (``request_percentage``: the time spent handling the client's
requests, as a share of one core). The first two are recorded by the Produce and Fetch
handlers; the request quota by ``Broker.handle`` through ``handle_timed`` for every API
but those Kafka exempts (``REQUEST_QUOTA_EXEMPT``). All answer at once with
``throttle_time_ms`` and set ``request_context.throttle_ms``, and the connection then reads
nothing from the client for that long (KIP-219).

Request time is the time the handler *runs*: its coroutine is driven step by step and
only the steps are timed, so a long-polling Fetch, a JoinGroup waiting for its group or
an acks=-1 Produce waiting for followers costs its client only the work done for it,
as Kafka counts request-thread time and not purgatory time; the response's encoding is
counted too. That costs a generator step per await, paid only once some
``request_percentage`` is configured.

Quotas change at run time (AlterClientQuotas, or in a cluster another broker's through
ZooKeeper's change notifications): the managers' tables are replaced and apply to the next
request; the rates measured so far are kept.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Coroutine, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from strom.broker import request_context
from strom.broker.quota.entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    QuotaEntity,
    QuotaError,
    QuotaFilter,
    validate_quota,
)
from strom.broker.quota.manager import ClientQuotaManager, monotonic_ms
from strom.broker.quota.store import QuotaStore
from strom.protocol.error_codes import ErrorCode
from strom.protocol.headers import encode_response

if TYPE_CHECKING:
    from strom.broker.broker import Broker
    from strom.broker.config import BrokerConfig
    from strom.protocol.headers import Request
    from strom.protocol.message import Message
    from strom.protocol.primitives import Records

logger = logging.getLogger(__name__)

# Kafka's cluster actions (the controller's and inter-broker requests) and the SASL
# requests, which its network layer answers: never held back by the request quota.
REQUEST_QUOTA_EXEMPT: Final = frozenset({
    4,  # LeaderAndIsr
    5,  # StopReplica
    6,  # UpdateMetadata
    7,  # ControlledShutdown
    17,  # SaslHandshake
    27,  # WriteTxnMarkers
    36,  # SaslAuthenticate
    56,  # AlterPartition
    58,  # Envelope
})
FETCH_API_KEY: Final = 1
NANOS_TO_PERCENT_SECONDS: Final = 100.0 / 1e9  # 1 s of handling = 100 % of a core for a second


class QuotaChange:
    """One AlterClientQuotas entry: an entity and its ops (key -> value, None = remove)."""

    __slots__ = ("entity", "ops")

    def __init__(self, entity: QuotaEntity, ops: Mapping[str, float | None]) -> None:
        self.entity = entity
        self.ops = ops


class ClientQuotas:
    def __init__(self, config: BrokerConfig, store: QuotaStore, *, clock: Any = monotonic_ms) -> None:
        samples, window_s = config.quota_window_num, config.quota_window_size_seconds
        if samples < 1 or window_s < 1:
            from strom.broker.config import ConfigError

            name = "quota.window.num" if samples < 1 else "quota.window.size.seconds"
            raise ConfigError(f"invalid value {samples if samples < 1 else window_s} for {name}: must be at least 1")
        window_ms = window_s * 1000
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, samples, window_ms, clock=clock)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, samples, window_ms, clock=clock)
        # The request quota's throttle is at most one window (Kafka's ClientRequestQuotaManager).
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, samples, window_ms, max_throttle_ms=window_ms,
                                          clock=clock)
        self.store = store
        self.quotas: dict[QuotaEntity, dict[str, float]] = {}
        self._altering = asyncio.Lock()
        self._cluster_mode = config.cluster_mode

    # -- configuration -------------------------------------------------------------------
    def load(self) -> None:
        """A single node's quotas from its data dir (a cluster's come from ZooKeeper: ``start``)."""
        if self._cluster_mode:
            return
        self.quotas = self.store.read()
        self._apply()
        if self.quotas:
            logger.info("client quotas: %d entities configured", len(self.quotas))

    def describe(self, quota_filter: QuotaFilter) -> list[tuple[QuotaEntity, dict[str, float]]]:
        return [(entity, dict(values)) for entity, values in self.quotas.items() if quota_filter.matches(entity)]

    async def alter(self, changes: Sequence[QuotaChange], validate_only: bool) -> list[QuotaError | None]:
        """Validate every change, then (unless ``validate_only``) apply the valid ones and
        persist them (off the event loop; one alteration at a time); one result per change,
        None where it is (or would be) applied."""
        results: list[QuotaError | None] = []
        for change in changes:
            try:
                for key, value in change.ops.items():
                    validate_quota(key, 1.0 if value is None else value)  # a removal names a known key too
            except QuotaError as exc:
                results.append(exc)
                continue
            results.append(None)
        if validate_only or all(result is not None for result in results):
            return results
        async with self._altering:
            altered = {entity: dict(values) for entity, values in self.quotas.items()}
            changed: list[QuotaEntity] = []
            for change, result in zip(changes, results, strict=True):
                if result is not None:
                    continue
                values = altered.setdefault(change.entity, {})
                for key, value in change.ops.items():
                    if value is None:
                        values.pop(key, None)
                    else:
                        values[key] = value
                if not values:
                    del altered[change.entity]
                changed.append(change.entity)
            try:
                await asyncio.to_thread(self.store.write, altered, changed)
            except Exception as exc:  # the disk or ZooKeeper failed: nothing applied, each entry told
                logger.warning("client quotas not altered: %s", exc)
                failed = QuotaError(f"the quotas could not be stored: {exc}", ErrorCode.UNKNOWN_SERVER_ERROR)
                return [failed if result is None else result for result in results]
            self.quotas = altered
            self._apply()
        for entity in changed:
            logger.info("client quotas of %s altered: %s", entity.describe(), self.quotas.get(entity, {}))
        return results

    def start(self, broker: Broker) -> None:
        """A cluster's broker keeps quotas in ZooKeeper (``zk_store``): read them all once its
        cluster side is connected, then follow ``/config/changes``. A single node's were read
        from its data dir by ``load``."""
        if broker.cluster is None:
            return
        from strom.broker.quota.zk_store import ZkQuotaStore, parse_entity_path
        from strom.cluster.config_changes import ConfigChangeFollower

        zk = broker.cluster.zk
        if not zk.connected:  # a cluster broker started without its cluster side (handler tests)
            logger.warning("client quotas not read: not connected to ZooKeeper")
            return
        store = ZkQuotaStore(zk)

        async def changed(path: str) -> None:
            entity = parse_entity_path(path)
            if entity is None:
                return
            values = await asyncio.to_thread(store.read_entity, entity)
            if values:
                self.quotas[entity] = values
            else:
                self.quotas.pop(entity, None)
            self._apply()

        ConfigChangeFollower(zk, changed, "client quota").start(from_now=True)
        self.store = store
        self.quotas = store.read()
        self._apply()

    def _apply(self) -> None:
        for manager in (self.produce, self.fetch, self.request):
            manager.update_quotas({entity: values[manager.key] for entity, values in self.quotas.items()
                                   if manager.key in values})

    # -- byte rates (the Produce and Fetch handlers) --------------------------------------
    def record_produce(self, request: Request, size: int) -> int:
        """Record a Produce's bytes (every one, appended or not, as Kafka) against the
        client's ``producer_byte_rate``; the throttle, also set for the connection's mute."""
        user = request_context.principal.get().partition(":")[2]
        throttle_ms = self.produce.record(user, request.header.client_id or "", size)
        if throttle_ms:
            request_context.throttle_ms.set(throttle_ms)
        return throttle_ms

    def record_fetch(self, request: Request, size: int) -> int:
        """Record a consumer Fetch answer's bytes against its ``consumer_byte_rate``; if
        that calls for a throttle the answer goes without its records, so they are taken
        back out of the rate (Kafka's ``unrecordQuotaSensor``)."""
        user = request_context.principal.get().partition(":")[2]
        client_id = request.header.client_id or ""
        throttle_ms = self.fetch.record(user, client_id, size)
        if throttle_ms:
            self.fetch.unrecord(user, client_id, size)
            request_context.throttle_ms.set(throttle_ms)
        return throttle_ms

    def fetch_max_bytes(self, request: Request, max_bytes: int) -> int:
        """A consumer's Fetch reads at most what its quota allows over the window's
        complete samples, so one answer can never need a throttle on its own (Kafka's
        ``getMaxValueInQuotaWindow`` cap of ``fetch.max.bytes``)."""
        user = request_context.principal.get().partition(":")[2]
        cap = self.fetch.max_value_in_window(user, request.header.client_id or "")
        return max_bytes if cap is None else min(max_bytes, int(cap))

    # -- the request quota ---------------------------------------------------------------
    async def handle_timed(self, handling: Coroutine[Any, Any, Message | None], request: Request
                           ) -> list[Records] | None:
        """Run a handler counting its running time (not its waits) and the encoding against
        the client's ``request_percentage``; the answer carries the larger of that throttle
        and the one the handler set (a byte rate's), as Kafka's."""
        if request.api_key == FETCH_API_KEY and _from_follower(request):  # replication: exempt, as Kafka
            response = await handling
            return None if response is None else encode_response(response, request.api_version,
                                                                   request.correlation_id)
        timed = _Timed(handling)
        response = await timed
        if response is None:  # acks=0: Kafka does not enforce the request quota
            return None
        start = time.perf_counter_ns()
        encoded = encode_response(response, request.api_version, request.correlation_id)
        elapsed_ns = timed.ns + time.perf_counter_ns() - start
        user = request_context.principal.get().partition(":")[2]
        client_id = request.header.client_id or ""
        throttle_ms = self.request.record(user, client_id, elapsed_ns * NANOS_TO_PERCENT_SECONDS)
        bandwidth_throttle_ms = request_context.throttle_ms.get()
        if throttle_ms <= bandwidth_throttle_ms:
            return encoded
        request_context.throttle_ms.set(throttle_ms)
        if request.api_key == FETCH_API_KEY and self.fetch.enabled and not bandwidth_throttle_ms:
            # the records go unsent: out of the byte rate too (a byte-rate throttle took them out already)
            self.fetch.unrecord(user, client_id, _fetched_bytes(response))
        throttled = _with_throttle(response, throttle_ms, request.api_key)
        if throttled is None:  # an answer with no throttle field (old versions): muted all the same
            return encoded
        return encode_response(throttled, request.api_version, request.correlation_id)


def _fetched_bytes(response: Message) -> int:
    """The record bytes of a Fetch answer: what its ``consumer_byte_rate`` recorded."""
    body: Any = response
    return sum(len(p.records) if isinstance(p.records, bytes | bytearray | memoryview) else p.records.length
               for topic in body.responses for p in topic.partitions if p.records is not None)


def _from_follower(request: Request) -> bool:
    body: Any = request.body
    replica_id: int = body.replica_state.replica_id if request.api_version >= 15 else body.replica_id
    return replica_id >= 0


def _with_throttle(response: Message, throttle_ms: int, api_key: int) -> Message | None:
    """The response carrying ``throttle_time_ms``; a Fetch also without its records, as a
    throttled Fetch is answered empty (Kafka's ``getThrottledResponse``)."""
    if not hasattr(response, "throttle_time_ms"):
        return None
    if api_key == FETCH_API_KEY:
        return dataclasses.replace(response, throttle_time_ms=throttle_ms, responses=())  # type: ignore[type-var]
    return dataclasses.replace(response, throttle_time_ms=throttle_ms)  # type: ignore[type-var]


class _Timed(Awaitable["Message | None"]):
    """Await a coroutine as ``await`` would, adding up the time of each of its steps."""

    __slots__ = ("_coroutine", "ns")

    def __init__(self, coroutine: Coroutine[Any, Any, Message | None]) -> None:
        self._coroutine = coroutine
        self.ns = 0

    def __await__(self) -> Generator[Any, Any, Message | None]:
        coroutine = self._coroutine
        clock = time.perf_counter_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                self.ns += clock() - start
                result: Message | None = stop.value
                return result
            self.ns += clock() - start
            try:
                value = yield yielded
                error = None
            except BaseException as exc:  # a cancellation (or close) goes into the handler
                value, error = None, exc
