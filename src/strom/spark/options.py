"""The options of the ``strom`` data source, checked before any Spark job starts.

They are the options of Spark's own Kafka source and sink
(``spark-sql-kafka-0-10``), so a Spark user changes the format name and nothing else:
``kafka.bootstrap.servers`` (``strom.bootstrap.servers`` is accepted too), exactly one of
``subscribe`` / ``subscribePattern`` / ``assign``, ``startingOffsets`` /
``endingOffsets`` / ``startingTimestamp`` / ``startingOffsetsByTimestamp`` / ``endingTimestamp``
/ ``endingOffsetsByTimestamp``, ``maxOffsetsPerTrigger``, ``minPartitions``,
``maxRecordsPerPartition``, ``failOnDataLoss``, ``includeHeaders``, ``groupIdPrefix``, and
``kafka.<property>`` passed to the client (checked against its property names). The sink
adds two options Spark's Kafka sink does not have (named as its options are):
``transactional`` (``true``: each task writes in one Kafka transaction, see
``strom.spark.writing``) and ``transactionalIdPrefix`` (the tasks' ``transactional.id`` is
the prefix, a dash and Spark's partition id). Spark's
rules for what the Kafka source refuses are kept: ``kafka.auto.offset.reset`` and the
(de)serializer properties are errors, ``latest`` cannot start a batch query nor
``earliest`` end one, and a streaming query takes no ending offsets.

Spark hands the options over in a case-insensitive map whose keys are lower case, so
every name is looked up lower-cased here.

Offsets in JSON follow Spark: ``{"topic": {"0": 23, "1": -2}}`` where -2 means earliest
and -1 latest.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from strom.protocol.topic_partition import TopicPartition

EARLIEST: Final = -2
LATEST: Final = -1

# What a start or end is before the broker is asked: a position for every partition,
# per-partition offsets (-2/-1 allowed), or timestamps (one for all, or per partition).
OffsetRequest = (
    tuple[Literal["earliest", "latest"], None]
    | tuple[Literal["offsets"], dict[TopicPartition, int]]
    | tuple[Literal["timestamp"], int]
    | tuple[Literal["timestamps"], dict[TopicPartition, int]]
)

SOURCE_OPTIONS: Final = frozenset({
    "subscribe", "subscribepattern", "assign",
    "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
    "startingoffsetsbytimestamp", "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy",
    "maxoffsetspertrigger", "minpartitions", "maxrecordsperpartition", "failondataloss",
    "includeheaders", "groupidprefix", "kafkaconsumer.polltimeoutms", "fetchoffset.numretries",
    "fetchoffset.retryintervalms", "path",
})
# Spark passes a streaming sink its checkpoint location among the options.
SINK_OPTIONS: Final = frozenset({"topic", "includeheaders", "path", "checkpointlocation",
                                 "transactional", "transactionalidprefix"})
# Spark's Kafka source manages these itself and refuses them; so does Strom.
REFUSED_CLIENT_OPTIONS: Final = {
    "auto.offset.reset": "set startingOffsets instead",
    "key.deserializer": "keys are always binary; cast them in a query",
    "value.deserializer": "values are always binary; cast them in a query",
    "key.serializer": "keys are always binary; cast them in a query",
    "value.serializer": "values are always binary; cast them in a query",
    "enable.auto.commit": "the source keeps its offsets in Spark, not in a group",
    "interceptor.classes": "Strom's client has no interceptors",
}
# Spark Kafka options Strom does not implement yet: refused by name, not ignored.
UNSUPPORTED: Final = {
    "minoffsetspertrigger": "admission by a minimum is not implemented",
    "maxtriggerdelay": "admission by a minimum is not implemented",
    "kafka.group.id": "the source reads with manual assignment and needs no group",
}


class OptionError(ValueError):
    """An option the data source cannot run with; raised before any job starts."""


@dataclass(frozen=True, slots=True)
class ClientOptions:
    """What every part (driver, reader, writer) needs to reach the brokers."""

    bootstrap_servers: str
    client: dict[str, str] = field(default_factory=dict)  # kafka.* without the prefix

    def consumer_config(self, client_id: str) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap_servers, "client.id": client_id,
                **self.client}

    def producer_config(self) -> dict[str, object]:
        return {"bootstrap.servers": self.bootstrap_servers, **self.client}


@dataclass(frozen=True, slots=True)
class SourceOptions:
    client: ClientOptions
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()
    starting: OffsetRequest | None = None  # None: the query kind's default
    ending: OffsetRequest | None = None
    no_timestamp_match: Literal["error", "latest"] = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    group_id_prefix: str = "spark-kafka-source"
    poll_timeout_ms: int = 120_000

    def topics_wanted(self, existing: set[str]) -> set[str]:
        if self.pattern is not None:
            regex = re.compile(self.pattern)
            return {t for t in existing if regex.fullmatch(t) and not t.startswith("__")}
        if self.assign:
            return {t for t, _ in self.assign}
        return set(self.subscribe)


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): str(v) for k, v in options.items()}


def parse_client_options(opts: Mapping[str, str], *, for_sink: bool) -> ClientOptions:
    servers = opts.get("kafka.bootstrap.servers") or opts.get("strom.bootstrap.servers")
    if not servers:
        raise OptionError("option 'kafka.bootstrap.servers' (or 'strom.bootstrap.servers') must be set")
    client: dict[str, str] = {}
    for key, value in opts.items():
        if key in ("kafka.bootstrap.servers", "strom.bootstrap.servers"):
            continue
        if key.startswith(("kafka.", "strom.")):
            name = key.split(".", 1)[1]
            if name in REFUSED_CLIENT_OPTIONS:
                raise OptionError(f"option {key!r} is not supported: {REFUSED_CLIENT_OPTIONS[name]}")
            client[name] = value
    # Unknown client property names fail here, on the driver, with the client's own message.
    from strom.client.config import ConsumerConfig, ProducerConfig
    try:
        if for_sink:
            ProducerConfig.from_properties({"bootstrap.servers": servers, **client})
        else:
            ConsumerConfig.from_properties({"bootstrap.servers": servers, **client})
    except ValueError as e:
        raise OptionError(f"invalid kafka.* option: {e}") from e
    return ClientOptions(servers, client)


def _check_names(opts: Mapping[str, str], allowed: frozenset[str]) -> None:
    for key in opts:
        if key in UNSUPPORTED:
            raise OptionError(f"option {key!r} is not supported by the strom source: {UNSUPPORTED[key]}")
        if key.startswith(("kafka.", "strom.")) or key in allowed:
            continue
        near = [a for a in sorted(allowed) if a.startswith(key[:5])]
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise OptionError(f"unknown option {key!r}{hint}")


def _int(opts: Mapping[str, str], name: str, minimum: int) -> int | None:
    if name not in opts:
        return None
    try:
        value = int(opts[name])
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, not {opts[name]!r}") from None
    if value < minimum:
        raise OptionError(f"option {name!r} must be >= {minimum}, not {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    value = opts.get(name)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise OptionError(f"option {name!r} must be true or false, not {value!r}")
    return value.lower() == "true"


def _json_partitions(name: str, text: str) -> dict[TopicPartition, int]:
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name!r} is not valid JSON ({e.msg}): {text!r}") from None
    out: dict[TopicPartition, int] = {}
    if not isinstance(parsed, dict):
        raise OptionError(f'option {name!r} must be like {{"topic": {{"0": 23}}}}, not {text!r}')
    for topic, parts in parsed.items():
        if not isinstance(parts, dict):
            raise OptionError(f'option {name!r} must be like {{"topic": {{"0": 23}}}}, not {text!r}')
        for p, value in parts.items():
            try:
                out[(str(topic), int(p))] = int(value)
            except (TypeError, ValueError):
                raise OptionError(f"option {name!r}: partition {p!r} of {topic!r} "
                                  f"needs an integer, not {value!r}") from None
    return out


def _offsets(opts: Mapping[str, str], kind: str) -> OffsetRequest | None:
    by_ts = opts.get(f"{kind}offsetsbytimestamp")
    ts = opts.get(f"{kind}timestamp")
    offsets = opts.get(f"{kind}offsets")
    given = [n for n, v in ((f"{kind}OffsetsByTimestamp", by_ts), (f"{kind}Timestamp", ts),
                            (f"{kind}Offsets", offsets)) if v is not None]
    if len(given) > 1:
        raise OptionError(f"options {' and '.join(map(repr, given))} conflict: set only one")
    if by_ts is not None:
        return ("timestamps", _json_partitions(f"{kind}OffsetsByTimestamp", by_ts))
    if ts is not None:
        value = _int(opts, f"{kind}timestamp", 0)
        assert value is not None
        return ("timestamp", value)
    if offsets is None:
        return None
    if offsets.strip().lower() in ("earliest", "latest"):
        return (offsets.strip().lower(), None)  # type: ignore[return-value]
    return ("offsets", _json_partitions(f"{kind}Offsets", offsets))


def parse_source_options(options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
    opts = _lower(options)
    _check_names(opts, SOURCE_OPTIONS)
    client = parse_client_options(opts, for_sink=False)
    chosen = [n for n in ("subscribe", "subscribepattern", "assign") if opts.get(n)]
    if len(chosen) != 1:
        raise OptionError("set exactly one of 'subscribe', 'subscribePattern' or 'assign'"
                          + (f"; got {', '.join(chosen)}" if chosen else ""))
    subscribe: tuple[str, ...] = ()
    pattern = None
    assign: tuple[TopicPartition, ...] = ()
    if "subscribe" in chosen:
        subscribe = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not subscribe:
            raise OptionError("option 'subscribe' names no topic")
    elif "subscribepattern" in chosen:
        pattern = opts["subscribepattern"]
        try:
            re.compile(pattern)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {e}") from None
    else:
        assign = tuple(sorted(_assign_json(opts["assign"])))
    starting = _offsets(opts, "starting")
    ending = _offsets(opts, "ending")
    if streaming and ending is not None:
        raise OptionError("ending offsets are not valid in a streaming query: "
                          "remove 'endingOffsets' / 'endingTimestamp' / 'endingOffsetsByTimestamp'")
    if not streaming:
        if starting is not None and starting[0] == "latest":
            raise OptionError("startingOffsets 'latest' is not valid in a batch query")
        if ending is not None and ending[0] == "earliest":
            raise OptionError("endingOffsets 'earliest' is not valid in a batch query")
        if starting is not None and starting[0] == "offsets" and LATEST in starting[1].values():
            raise OptionError("startingOffsets for a batch query cannot use -1 (latest)")
        if ending is not None and ending[0] == "offsets" and EARLIEST in ending[1].values():
            raise OptionError("endingOffsets for a batch query cannot use -2 (earliest)")
    if not streaming and "maxoffsetspertrigger" in opts:
        raise OptionError("option 'maxOffsetsPerTrigger' only applies to a streaming query")
    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    return SourceOptions(
        client=client, subscribe=subscribe, pattern=pattern, assign=assign,
        starting=starting, ending=ending,
        no_timestamp_match=strategy,  # type: ignore[arg-type]
        max_offsets_per_trigger=_int(opts, "maxoffsetspertrigger", 1),
        min_partitions=_int(opts, "minpartitions", 1),
        max_records_per_partition=_int(opts, "maxrecordsperpartition", 1),
        fail_on_data_loss=_bool(opts, "failondataloss", True),
        include_headers=_bool(opts, "includeheaders", False),
        group_id_prefix=opts.get("groupidprefix", "spark-kafka-source"),
        poll_timeout_ms=_int(opts, "kafkaconsumer.polltimeoutms", 1) or 120_000,
    )


def _assign_json(text: str) -> dict[TopicPartition, int]:
    """``assign`` is ``{"topic": [0, 1]}``: partitions as a list, not a map."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"option 'assign' is not valid JSON ({e.msg}): {text!r}") from None
    if not isinstance(parsed, dict) or not all(isinstance(v, list) for v in parsed.values()):
        raise OptionError(f'option \'assign\' must be like {{"topic": [0, 1]}}, not {text!r}')
    try:
        return {(str(t), int(p)): 0 for t, ps in parsed.items() for p in ps}
    except (TypeError, ValueError):
        raise OptionError(f"option 'assign' needs integer partitions: {text!r}") from None


@dataclass(frozen=True, slots=True)
class SinkOptions:
    client: ClientOptions
    topic: str | None
    include_headers: bool
    transactional: bool = False
    # None: a batch write takes a fresh one per job (source.py), a stream one from its query id.
    transactional_id_prefix: str | None = None


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    opts = _lower(options)
    _check_names(opts, SINK_OPTIONS)
    if "kafka.transactional.id" in opts or "strom.transactional.id" in opts:
        raise OptionError("option 'kafka.transactional.id' is not supported: set transactional=true "
                          "(and transactionalIdPrefix); each task derives its own id from them")
    client = parse_client_options(opts, for_sink=True)
    transactional = _bool(opts, "transactional", False)
    prefix = opts.get("transactionalidprefix")
    if prefix is not None and not transactional:
        raise OptionError("option 'transactionalIdPrefix' only applies with transactional=true")
    if prefix is not None and not prefix.strip():
        raise OptionError("option 'transactionalIdPrefix' must not be empty")
    if transactional:
        from strom.client.config import ProducerConfig
        try:  # what only a transactional producer refuses (enable.idempotence=false, ...)
            ProducerConfig.from_properties({**client.producer_config(), "transactional.id": "check"})
        except ValueError as e:
            raise OptionError(f"invalid kafka.* option for transactional=true: {e}") from e
    return SinkOptions(client, opts.get("topic") or None, _bool(opts, "includeheaders", False),
                       transactional, prefix)
