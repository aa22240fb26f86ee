"""The metrics the request path updates: per-API requests, errors and time, per-topic traffic.

Names are the JMX exporter's for Kafka's MBeans (``kafka.network:type=RequestMetrics`` →
``kafka_network_requestmetrics_*``, ``kafka.server:type=BrokerTopicMetrics`` →
``kafka_server_brokertopicmetrics_*``). Every labelled child is looked up once and kept in a
dict keyed by what the request already carries (API key and version, topic name): a cached
child's ``inc`` costs about a fifth of a ``labels(...).inc``.

Time (``kafka_network_requestmetrics_totaltimems``, a Prometheus histogram in milliseconds):
from the decoded request to the handler's response, i.e. Kafka's local time plus its remote
time (an acks=-1 Produce waiting for followers, a Fetch long-polling). Strom has no request
queue (a connection's task handles a frame as soon as it is read) and this layer does not
see the encoding and the socket write, so there is no queue-time or send-time series.
"""

from __future__ import annotations

import re
import struct
import sys
import time
from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Histogram

from strom.protocol.error_codes import ErrorCode
from strom.protocol.message import Message

if TYPE_CHECKING:
    from prometheus_client.metrics import Counter as CounterType
    from prometheus_client.metrics import Histogram as HistogramType

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


class _RequestChildren(NamedTuple):
    name: str
    requests: CounterType
    total_time: HistogramType


class _TopicChildren(NamedTuple):
    bytes_in: CounterType
    bytes_out: CounterType
    messages_in: CounterType
    produce_requests: CounterType
    fetch_requests: CounterType
    failed_produce: CounterType
    failed_fetch: CounterType


class BrokerMetrics:
    """One broker's counters and histograms in its own registry (one per broker: several
    brokers in one process, as the tests run them, each report their own)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        reg = self.registry
        self._requests_total = Counter("kafka_network_requestmetrics_requests", "Requests answered (RequestsPerSec)",
                                       ["request", "version"], registry=reg)
        self._errors_total = Counter("kafka_network_requestmetrics_errors",
                                     "Error codes in responses, NONE included (ErrorsPerSec)",
                                     ["request", "error"], registry=reg)
        self._total_time = Histogram("kafka_network_requestmetrics_totaltimems",
                                     "Milliseconds from the decoded request to the handler's response",
                                     ["request"], buckets=TIME_BUCKETS_MS, registry=reg)
        topic_counters = []
        for name, what in (("bytesin", "Bytes of records appended by clients (BytesInPerSec)"),
                           ("bytesout", "Bytes of records fetched by consumers (BytesOutPerSec)"),
                           ("messagesin", "Records appended by clients (MessagesInPerSec)"),
                           ("totalproducerequests", "Partitions produced to (TotalProduceRequestsPerSec)"),
                           ("totalfetchrequests", "Partitions fetched from (TotalFetchRequestsPerSec)"),
                           ("failedproducerequests", "Partitions whose produce failed (FailedProduceRequestsPerSec)"),
                           ("failedfetchrequests", "Partitions whose fetch failed (FailedFetchRequestsPerSec)")):
            topic_counters.append(Counter(f"kafka_server_brokertopicmetrics_{name}", what, ["topic"], registry=reg))
        self._topic_counters = tuple(topic_counters)
        self._request_children: dict[tuple[int, int, bool], _RequestChildren] = {}
        self._error_children: dict[tuple[str, int], CounterType] = {}
        self._topic_children: dict[str, _TopicChildren] = {}
        self.collector: BrokerCollector | None = None  # the scrape-time gauges (strom.metrics.collectors)

    # -- per request ---------------------------------------------------------------------
    async def observe(self, answer: Coroutine[Any, Any, Message | None], request: Request) -> Message | None:
        """Await a handler's answer, counting the request, its error codes and its time."""
        started = time.perf_counter()
        response = await answer
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        key = (request.api_key, request.api_version, request.api_key == FETCH_API_KEY and _from_follower(request))
        children = self._request_children.get(key)
        if children is None:
            children = self._new_request_children(request, key[2])
        children.requests.inc()
        children.total_time.observe(elapsed_ms)
        if response is not None:
            codes: list[int] = []
            _error_codes(response, codes)
            errors = self._error_children
            for code in codes:
                counter = errors.get((children.name, code))
                if counter is None:
                    counter = errors[(children.name, code)] = self._errors_total.labels(children.name, _error_name(code))
                counter.inc()
        return response

    def _new_request_children(self, request: Request, follower: bool) -> _RequestChildren:
        # Kafka splits Fetch into FetchConsumer and FetchFollower (RequestMetrics.java).
        name = request.api.name if request.api_key != FETCH_API_KEY else (
            "FetchFollower" if follower else "FetchConsumer")
        children = _RequestChildren(name, self._requests_total.labels(name, str(request.api_version)),
                                    self._total_time.labels(name))
        self._request_children[(request.api_key, request.api_version, follower)] = children
        return children

    # -- per topic -----------------------------------------------------------------------
    def topic(self, name: str) -> _TopicChildren:
        children = self._topic_children.get(name)
        if children is None:
            children = self._topic_children[name] = _TopicChildren(*(c.labels(name) for c in self._topic_counters))
        return children

    def produced(self, topic_data: Iterable[TopicProduceData], responses: Sequence[TopicProduceResponse]) -> None:
        """A Produce's partitions: each one a produce request of its topic, failed or appended
        (then its records and bytes in). A retried duplicate batch is counted again."""
        failed: set[tuple[str, int]] = set()
        for answer in responses:
            children = self.topic(answer.name)
            for partition in answer.partition_responses:
                children.produce_requests.inc()
                if partition.error_code:
                    children.failed_produce.inc()
                    failed.add((answer.name, partition.index))
        for topic in topic_data:
            children = self.topic(topic.name)
            for data in topic.partition_data:
                records = data.records
                if records is not None and not isinstance(records, str) and (
                        not failed or (topic.name, data.index) not in failed):
                    children.bytes_in.inc(len(records))
                    children.messages_in.inc(count_records(records))

    def fetched(self, targets: Sequence[FetchTarget], reads: Sequence[PartitionRead], follower: bool) -> None:
        """A Fetch's partitions; bytes out only for consumers (a follower's are replication)."""
        for target, read in zip(targets, reads, strict=True):
            if target.topic is None:
                continue
            children = self.topic(target.topic)
            children.fetch_requests.inc()
            if read.error_code:
                children.failed_fetch.inc()
            elif not follower and (size := read.size):
                children.bytes_out.inc(size)


def count_records(records: Any) -> int:
    """The records in a record set: each v2 batch's count from its header; a v0/v1 entry is one."""
    view = memoryview(records).cast("B")
    size, position, count = len(view), 0, 0
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
