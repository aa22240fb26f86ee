"""The metrics the request path updates: per-API requests, errors and time, per-topic traffic.

Names are the JMX exporter's for Kafka's MBeans (``kafka.network:type=RequestMetrics`` →
``kafka_network_requestmetrics_*``, ``kafka.server:type=BrokerTopicMetrics`` →
``kafka_server_brokertopicmetrics_*``). Every labelled series is looked up once and kept in a
dict keyed by what the request already carries (API key and version, topic name).

Time (``kafka_network_requestmetrics_totaltimems``, a Prometheus histogram in milliseconds):
from the decoded request to the handler's response, i.e. Kafka's local time plus its remote
time (an acks=-1 Produce waiting for followers, a Fetch long-polling). Strom has no request
queue (a connection's task handles a frame as soon as it is read) and this layer does not
see the encoding and the socket write, so there is no queue-time or send-time series.
"""

from __future__ import annotations

import itertools
import re
import struct
import sys
import time
from bisect import bisect_left
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from strom.metrics.exposition import Family, HistogramFamily, render
from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message

if TYPE_CHECKING:
    from strom.broker.fetch_session import FetchTarget
    from strom.broker.replica_manager import PartitionRead
    from strom.metrics.collectors import BrokerCollector
    from strom.protocol.headers import Request
    from strom.protocol.messages.produce_request import TopicProduceData
    from strom.protocol.messages.produce_response import TopicProduceResponse

FETCH_API_KEY = 1
# Milliseconds: a local answer takes well under one; a long poll up to fetch.max.wait.ms (500 ms)
# and an acks=-1 Produce up to request.timeout.ms (30 s).
TIME_BUCKETS_MS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0,
                   2500.0, 5000.0, 10000.0, 30000.0)
_INT32 = struct.Struct(">i")
_BATCH_LENGTH_AT = 8  # a record batch: base offset (8), batch length (4), ... magic at 16
_MAGIC_AT = 16
_RECORDS_COUNT_AT = 57  # v2: the last field of the 61-byte batch header
_LOG_OVERHEAD = 12


class _RequestStats:
    """One (API, version)'s request count and its API's time histogram (shared by versions)."""

    __slots__ = ("count", "name", "time", "version")

    def __init__(self, name: str, version: int, time_stats: _TimeStats) -> None:
        self.name, self.version, self.count, self.time = name, str(version), 0, time_stats


class _TimeStats:
    __slots__ = ("buckets", "total")

    def __init__(self) -> None:
        self.buckets = [0] * (len(TIME_BUCKETS_MS) + 1)  # each bucket's own count; the last is +Inf
        self.total = 0.0


class _TopicStats:
    __slots__ = ("bytes_in", "bytes_out", "failed_fetch", "failed_produce", "fetch_requests", "messages_in",
                 "produce_requests")

    def __init__(self) -> None:
        self.bytes_in = self.bytes_out = self.messages_in = self.produce_requests = self.fetch_requests = 0
        self.failed_produce = self.failed_fetch = 0


_TOPIC_COUNTERS = (
    ("bytesin", "bytes_in", "Bytes of records appended by clients (BytesInPerSec)"),
    ("bytesout", "bytes_out", "Bytes of records fetched by consumers (BytesOutPerSec)"),
    ("messagesin", "messages_in", "Records appended by clients (MessagesInPerSec)"),
    ("totalproducerequests", "produce_requests", "Partitions produced to (TotalProduceRequestsPerSec)"),
    ("totalfetchrequests", "fetch_requests", "Partitions fetched from (TotalFetchRequestsPerSec)"),
    ("failedproducerequests", "failed_produce", "Partitions whose produce failed (FailedProduceRequestsPerSec)"),
    ("failedfetchrequests", "failed_fetch", "Partitions whose fetch failed (FailedFetchRequestsPerSec)"),
)


class BrokerMetrics(Collector):
    """One broker's request and topic counters: plain integers in slotted objects, cached per
    (API, version) and per topic. The broker's event loop is their one writer and the scrape
    (in the same loop) their one reader, so they need none of prometheus_client's per-value
    locks, which cost a Produce about 1 µs for each of its eight updates. A Collector, so a
    ``CollectorRegistry`` can hold it; the HTTP server writes ``families()`` itself."""

    def __init__(self) -> None:
        self._requests: dict[tuple[int, int, bool], _RequestStats] = {}
        self._times: dict[str, _TimeStats] = {}
        self._errors: dict[tuple[str, int], int] = {}
        self._topics: dict[str, _TopicStats] = {}
        self.collector: BrokerCollector | None = None  # the scrape-time gauges (strom.metrics.collectors)

    # -- per request ---------------------------------------------------------------------
    async def observe(self, answer: Coroutine[Any, Any, Message | None], request: Request) -> Message | None:
        """Await a handler's answer, counting the request, its error codes and its time."""
        started = time.perf_counter()
        response = await answer
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        header = request.header
        api_key = header.request_api_key
        key = (api_key, header.request_api_version, api_key == FETCH_API_KEY and _from_follower(request))
        stats = self._requests.get(key)
        if stats is None:
            stats = self._new_request_stats(request, key)
        stats.count += 1
        time_stats = stats.time
        time_stats.buckets[bisect_left(TIME_BUCKETS_MS, elapsed_ms)] += 1
        time_stats.total += elapsed_ms
        if response is not None:
            codes: list[int] = []
            _error_codes(response, codes)
            errors, name = self._errors, stats.name
            for code in codes:
                errors[(name, code)] = errors.get((name, code), 0) + 1
        return response

    def _new_request_stats(self, request: Request, key: tuple[int, int, bool]) -> _RequestStats:
        # Kafka splits Fetch into FetchConsumer and FetchFollower (RequestMetrics.java).
        name = request.api.name if request.api_key != FETCH_API_KEY else (
            "FetchFollower" if key[2] else "FetchConsumer")
        time_stats = self._times.get(name)
        if time_stats is None:
            time_stats = self._times[name] = _TimeStats()
        stats = self._requests[key] = _RequestStats(name, request.api_version, time_stats)
        return stats

    # -- per topic -----------------------------------------------------------------------
    def topic(self, name: str) -> _TopicStats:
        stats = self._topics.get(name)
        if stats is None:
            stats = self._topics[name] = _TopicStats()
        return stats

    def produced(self, topic_data: Iterable[TopicProduceData], responses: Sequence[TopicProduceResponse]) -> None:
        """A Produce's partitions: each one a produce request of its topic, failed or appended
        (then its records and bytes in). A retried duplicate batch is counted again."""
        failed: set[tuple[str, int]] | None = None
        for answer in responses:
            stats = self.topic(answer.name)
            for partition in answer.partition_responses:
                stats.produce_requests += 1
                if partition.error_code:
                    stats.failed_produce += 1
                    if failed is None:
                        failed = set()
                    failed.add((answer.name, partition.index))
        for topic in topic_data:
            stats = self.topic(topic.name)
            for data in topic.partition_data:
                records = data.records
                if records is not None and not isinstance(records, str) and (
                        failed is None or (topic.name, data.index) not in failed):
                    stats.bytes_in += len(records)
                    stats.messages_in += count_records(records)

    def fetched(self, targets: Sequence[FetchTarget], reads: Sequence[PartitionRead], follower: bool) -> None:
        """A Fetch's partitions; bytes out only for consumers (a follower's are replication)."""
        for target, read in zip(targets, reads, strict=True):
            if target.topic is None:
                continue
            stats = self.topic(target.topic)
            stats.fetch_requests += 1
            if read.error_code:
                stats.failed_fetch += 1
            elif not follower:
                stats.bytes_out += read.size

    # -- scrape --------------------------------------------------------------------------
    def families(self) -> Iterator[Family | HistogramFamily]:
        requests = Family("kafka_network_requestmetrics_requests", "Requests answered (RequestsPerSec)",
                          ["request", "version"], kind="counter")
        for stats in self._requests.values():
            requests.add_metric([stats.name, stats.version], stats.count)
        yield requests
        errors = Family("kafka_network_requestmetrics_errors", "Error codes in responses, NONE included (ErrorsPerSec)",
                        ["request", "error"], kind="counter")
        for (name, code), count in self._errors.items():
            errors.add_metric([name, _error_name(code)], count)
        yield errors
        times = HistogramFamily("kafka_network_requestmetrics_totaltimems",
                                "Milliseconds from the decoded request to the handler's response", ["request"],
                                TIME_BUCKETS_MS)
        for name, time_stats in self._times.items():
            times.add_metric([name], list(time_stats.buckets), time_stats.total)
        yield times
        topics = list(self._topics.items())
        for metric, attribute, documentation in _TOPIC_COUNTERS:
            family = Family(f"kafka_server_brokertopicmetrics_{metric}", documentation, ["topic"], kind="counter")
            for topic, topic_stats in topics:
                family.add_metric([topic], getattr(topic_stats, attribute))
            yield family

    def collect(self) -> Iterator[Metric]:
        return (family.metric() for family in self.families())

    def exposition(self) -> bytes:
        """Everything, the scrape-time gauges included, in the Prometheus text format."""
        families: Iterable[Family | HistogramFamily] = self.families()
        if self.collector is not None:
            families = itertools.chain(families, self.collector.families())
        return render(families)


def count_records(records: Any) -> int:
    """The records in a record set: each v2 batch's count from its header; a v0/v1 entry is one."""
    size = len(records)
    if size > _RECORDS_COUNT_AT + 4 and records[_MAGIC_AT] == 2 \
            and _LOG_OVERHEAD + _INT32.unpack_from(records, _BATCH_LENGTH_AT)[0] == size:
        return int(_INT32.unpack_from(records, _RECORDS_COUNT_AT)[0])  # one v2 batch: a Produce v3+
    view = memoryview(records).cast("B")
    position, count = 0, 0
    while position + _LOG_OVERHEAD <= size:
        length = _INT32.unpack_from(view, position + _BATCH_LENGTH_AT)[0]
        if position + _MAGIC_AT < size and view[position + _MAGIC_AT] == 2 \
                and position + _RECORDS_COUNT_AT + 4 <= size:
            count += _INT32.unpack_from(view, position + _RECORDS_COUNT_AT)[0]
        else:
            count += 1
        position += _LOG_OVERHEAD + max(length, 0)
    return count


# Per generated message class: whether it has an ``error_code``, and the fields (name, is a
# tuple) that lead to one, read once from the generated annotations; fields that cannot hold an
# error code (a Produce answer's record_errors, current_leader) are never walked.
_ErrorShape = tuple[bool, tuple[tuple[str, bool], ...]]
_ERROR_SHAPES: dict[type, _ErrorShape] = {}
_NESTED = re.compile(r"^(tuple\[)?(\w+)(, \.\.\.\])?( \| None)?$")


def _error_shape(cls: type) -> _ErrorShape:
    shape = _ERROR_SHAPES.get(cls)
    if shape is not None:
        return shape
    _ERROR_SHAPES[cls] = (False, ())  # a recursive schema sees none below itself
    module = sys.modules[cls.__module__]
    has_error, walk = False, []
    for name, annotation in getattr(cls, "__annotations__", {}).items():
        if name == "error_code":
            has_error = True
            continue
        match = _NESTED.match(str(annotation))
        nested = getattr(module, match.group(2), None) if match else None
        if match and isinstance(nested, type) and _is_struct_class(nested):
            nested_error, nested_walk = _error_shape(nested)
            if nested_error or nested_walk:
                walk.append((name, match.group(1) is not None))
    shape = _ERROR_SHAPES[cls] = (has_error, tuple(walk))
    return shape


def _error_codes(message: object, codes: list[int]) -> None:
    """Every ``error_code`` in a response, nested ones included (Kafka's ``errorCounts``)."""
    has_error, walk = _ERROR_SHAPES.get(type(message)) or _error_shape(type(message))
    if has_error:
        codes.append(message.error_code)  # type: ignore[attr-defined]
    for name, is_tuple in walk:
        value = getattr(message, name)
        if is_tuple:
            for item in value:
                _error_codes(item, codes)
        elif value is not None:
            _error_codes(value, codes)


def _is_struct_class(cls: type) -> bool:
    """A generated message or one of its nested structs (each has ``unknown_tagged_fields``)."""
    return "unknown_tagged_fields" in getattr(cls, "__slots__", ())


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_{code}"


def _from_follower(request: Request) -> bool:
    body = request.body
    state = getattr(body, "replica_state", None)
    replica_id = state.replica_id if state is not None and request.api_version >= 15 else getattr(body, "replica_id", -1)
    return bool(replica_id >= 0)
