"""``StromDataSource``: Strom topics as a PySpark data source named ``strom``.

Built on PySpark's Python Data Source API (Spark >= 4.2 for stream admission control).
The parts run in three places, which is why state is kept as it is:

- planning (``partitions``, ``initialOffset``, ``latestOffset``) runs in a Python worker
  on the driver; the stream reader lives there for the query's lifetime and keeps one
  admin client, which is never pickled (``__getstate__``);
- ``read`` runs on executors with a pickled copy of the reader and only the
  ``ReadTask`` of its input partition;
- ``write`` runs on executors and returns a commit message once its records are
  acknowledged (with ``transactional=true``: committed, see ``strom.spark.writing``). The
  writer is pickled once per job or streaming query; a task learns its partition id,
  and in a micro-batch the query id and batch id, from its ``TaskContext`` (the local
  properties Spark's ``MicroBatchExecution`` sets for every batch's jobs).

Offsets in a streaming checkpoint are Spark's Kafka JSON, ``{"topic": {"0": 23}}``, so
the query's progress reads the same as with Spark's Kafka source.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from strom.protocol.topic_partition import TopicPartition
from strom.spark.options import (
    OptionError,
    SinkOptions,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from strom.spark.planning import (
    DataLossError,
    OffsetRange,
    OffsetReader,
    check_data_loss,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)
from strom.spark.reading import ReadTask, read_range
from strom.spark.writing import WriteSummary, WriteTask, check_sink_schema, write_batches

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"


class StromDataSource(DataSource):
    """``spark.read.format("strom")``, ``readStream``, ``write`` and ``writeStream``."""

    @classmethod
    def name(cls) -> str:
        return "strom"

    def schema(self) -> str:
        include = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return f"{SCHEMA}, {HEADERS}" if include else SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return StromBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StromStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        sink = _sink(self.options, schema)
        if sink.transactional and sink.transactional_id_prefix is None:
            # Runs once per job, on the driver: every task attempt of the job shares it.
            sink = replace(sink, transactional_id_prefix=f"strom-spark-{uuid.uuid4()}")
        return StromWriter(sink)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        return StromStreamWriter(_sink(self.options, schema))


def _sink(options: Any, schema: StructType) -> SinkOptions:
    sink = parse_sink_options(options)
    check_sink_schema(((f.name, f.dataType.simpleString()) for f in schema.fields), sink)
    return sink


def _tasks(options: SourceOptions, ranges: list[OffsetRange]) -> list[InputPartition]:
    ranges = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
    return [InputPartition(ReadTask(options.client, r, options.include_headers,
                                    options.fail_on_data_loss, options.poll_timeout_ms,
                                    f"{options.group_id_prefix}-executor"))
            for r in ranges]


class StromBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        opts = self.options
        offsets = OffsetReader(opts)
        try:
            tps = offsets.partitions()
            start = offsets.resolve(opts.starting or ("earliest", None), tps, what="starting")
            end = offsets.resolve(opts.ending or ("latest", None), tps, what="ending")
            earliest, latest = offsets.earliest(tps), offsets.latest(tps)
        finally:
            offsets.close()
        backwards = [tp for tp in tps if start[tp] > end[tp]]
        if backwards:
            raise OptionError("starting offsets are after ending offsets for "
                              + ", ".join(f"{t}-{p} ({start[(t, p)]} > {end[(t, p)]})" for t, p in backwards))
        ranges = [OffsetRange(t, p, start[(t, p)], end[(t, p)]) for t, p in tps]
        return _tasks(opts, check_data_loss(ranges, earliest, latest, fail=opts.fail_on_data_loss))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition.value)


class StromStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._offsets: OffsetReader | None = None
        self._target: dict[TopicPartition, int] | None = None  # Trigger.AvailableNow's end

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_offsets": None, "_target": self._target}

    @property
    def offsets(self) -> OffsetReader:
        if self._offsets is None:
            self._offsets = OffsetReader(self.options)
        return self._offsets

    def initialOffset(self) -> dict[str, Any]:
        tps = self.offsets.partitions()
        return to_json(self.offsets.resolve(self.options.starting or ("latest", None), tps,
                                            what="starting"))

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadAllAvailable() if limit is None else ReadMaxRows(limit)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.offsets.latest(self.offsets.partitions())

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = self._with_new_partitions(from_json(start))
        latest = self.offsets.latest(begin)
        if self._target is not None:
            latest = {tp: min(latest[tp], self._target.get(tp, begin[tp])) for tp in begin}
        shrunk = [tp for tp in begin if latest[tp] < begin[tp]]
        if shrunk and self.options.fail_on_data_loss:
            raise DataLossError(f"the log of {sorted(shrunk)} ends before the query's position: "
                                "the topic was re-created or truncated. Set failOnDataLoss=false "
                                "to continue from the new end.")
        # A shrunk partition (failOnDataLoss=false) jumps to its new end; the rest advance,
        # within the read limit.
        if isinstance(limit, ReadMaxRows):
            latest.update(rate_limit(begin, {tp: o for tp, o in latest.items() if tp not in shrunk},
                                     limit.max_rows))
        return to_json(latest)

    def _with_new_partitions(self, begin: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """Partitions that appeared since ``begin`` start at their earliest offset, as in Spark."""
        new = [tp for tp in self.offsets.partitions() if tp not in begin]
        return {**begin, **self.offsets.earliest(new)} if new else begin

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = from_json(start), from_json(end)
        new = [tp for tp in stop if tp not in begin]
        begin.update(self.offsets.earliest(new))
        ranges = [OffsetRange(t, p, min(begin[(t, p)], stop[(t, p)]), stop[(t, p)])
                  for t, p in sorted(stop)]
        tps = [(r.topic, r.partition) for r in ranges if r.size]
        earliest = self.offsets.earliest(tps)
        ranges = check_data_loss(ranges, earliest, {}, fail=self.options.fail_on_data_loss)
        return _tasks(self.options, ranges)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_range(partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark keeps the offsets in its checkpoint; the brokers are not told."""

    def stop(self) -> None:
        if self._offsets is not None:
            self._offsets.close()
            self._offsets = None


# Local properties Spark's MicroBatchExecution / StreamExecution set on a batch's jobs.
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # the id kept in the checkpoint, not the run id


def _current_task(streaming: bool) -> WriteTask:
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        raise RuntimeError("the strom writer runs inside a Spark task")
    if not streaming:
        return WriteTask(context.partitionId())
    batch_id = context.getLocalProperty(BATCH_ID_PROPERTY)
    query_id = context.getLocalProperty(QUERY_ID_PROPERTY)
    if batch_id is None or query_id is None:
        raise RuntimeError("a streaming write task without Spark's batch and query ids "
                           f"({BATCH_ID_PROPERTY}, {QUERY_ID_PROPERTY}): only micro-batch queries are supported")
    return WriteTask(context.partitionId(), query_id, int(batch_id))


class StromCommit(WriterCommitMessage):
    def __init__(self, summary: WriteSummary) -> None:
        self.records = summary.records
        self.transactional_id = summary.transactional_id
        self.skipped = summary.skipped


class StromWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        task = _current_task(streaming=False) if self.options.transactional else None
        return StromCommit(write_batches(self.options, iterator, task))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Every task flushed (or committed its transaction) before it reported: nothing is left to do."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records (transactions) a failed job's tasks already wrote stay, as in Spark's Kafka sink."""


class StromStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        task = _current_task(streaming=True) if self.options.transactional else None
        return StromCommit(write_batches(self.options, iterator, task))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """As ``StromWriter.commit``: each task flushed or committed its records."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """As ``StromWriter.abort``; with ``transactional=true`` a re-run of the batch
        skips the partitions whose transactions committed."""
