"""Executor side of ``df.write.format("strom")`` and ``writeStream``: rows to records
with Strom's producer, one producer per task.

The columns are those of Spark's Kafka sink: ``value`` (required), ``key``, ``topic``,
``partition``, ``headers`` (optional); key and value may be binary or string. The
``topic`` option, when set, wins over the column, as in Spark.

**Default (``transactional=false``): at-least-once, as Spark's Kafka sink.** Each task
produces its rows and flushes before it returns its commit message, so a task that
reports success has every record acknowledged (``acks=all`` and idempotence as the
producer defaults). A task that fails after some records were acknowledged and is
retried writes those records again.

**``transactional=true``: one Kafka transaction per task.** The task's
``transactional.id`` is ``<transactionalIdPrefix>-<Spark partition id>``, so every
attempt at a partition (a retry, a speculative copy, a re-run after a restart) has the
same one. A task starts with ``init_transactions``, which fences any earlier attempt
still alive (a zombie: its next send or commit fails with PRODUCER_FENCED) and
completes or aborts what it left open; it writes its rows inside one transaction and
returns its commit message only after ``commit_transaction``. A task that fails aborts
its transaction (``AsyncProducer.close`` does); one whose process dies has it aborted by
the next attempt's ``init_transactions`` or by the coordinator after
``transaction.timeout.ms``. What that gives, for consumers reading ``read_committed``
(``read_uncommitted``, the Java client's default, sees aborted records too):

- *Every write: atomic per task.* All of a task attempt's rows become visible together,
  or none: a failed, killed or fenced attempt leaves nothing visible.
- *Streaming: exactly once per micro-batch, across Spark's task retries and query
  restarts.* Inside the same transaction, just before committing, the task commits an
  offset for the consumer group named as its ``transactional.id``: partition 0 of the
  topic of its first record, offset ``batchId + 1``, metadata
  ``{"queryId": ..., "batchId": ...}`` (``send_offsets_to_transaction``), so the group
  records the batch if, and only if, its rows are committed. Every attempt reads that
  group's offsets (OffsetFetch with ``require_stable``) *after* ``init_transactions``:
  from then on no earlier attempt can commit (its epoch is fenced) and its transaction
  is completed or aborted, so the read is final. If the group records this query's
  batch (or a later one), the attempt reads its input and writes nothing. This covers a
  task retried after its commit reached the brokers but not Spark, a speculative copy,
  and a batch Spark re-runs because the driver died before logging the batch's commit.
- *Batch writes: atomic per task only.* A task's success is not two-phase with its
  transaction (that would need KIP-939's prepared transactions): a task whose commit
  went through but whose success Spark never learnt (a lost executor) runs again and
  writes again, as does a speculative copy started after the first committed; and when
  a job fails, the rows of its tasks that committed stay. With no
  ``transactionalIdPrefix`` each write job takes a fresh one.

What the streaming guarantee assumes, and where it stops:

- The rows of a (batch id, Spark partition id) must be the same set on every run of
  the batch: a task re-run skips or writes its whole partition. Spark replays a batch
  with the source offsets of its offset log, and the ``strom`` source plans the same
  ranges for the same offsets and options; the rest of the plan is the query's. Keep it
  deterministic and keep the write's partitioning between a failure and the restart
  (the same ``minPartitions`` / ``maxRecordsPerPartition``, ``repartition(n)``,
  ``spark.sql.shuffle.partitions``). The order of rows inside a partition may differ.
- Atomicity is per task, not per batch: while a batch is partly committed (tasks still
  running, or the query failed mid-batch and is not yet restarted), read_committed
  consumers see the rows of its committed tasks.
- The prefix must be unique to one query (two running writers with one prefix fence
  each other) and stable across its restarts. The default, ``strom-spark-<query id>``,
  is both (Spark keeps the query id in the checkpoint). A stream started from a new
  checkpoint is a new query: its batch ids restart at 0 and the old query's records of
  batches are ignored (they carry its query id).
- A task must finish within ``kafka.transaction.timeout.ms`` (60 s by default, at most
  the brokers' ``transaction.max.timeout.ms``), or the coordinator aborts it and it fails.
- Each task's ``transactional.id`` and group stay on the brokers until
  ``transactional.id.expiration.ms`` and ``offsets.retention.minutes`` pass. With ACLs,
  the writer's principal needs Write on the transactional ids and, for a stream,
  Read on the groups and on the topic that keeps their offsets (Kafka's rules for
  AddOffsetsToTxn, TxnOffsetCommit and OffsetFetch).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from strom.spark.options import OptionError, SinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

    from strom.client.producer import AsyncProducer
    from strom.client.producer_batch import RecordCallback

KEY_VALUE_TYPES = ("binary", "string", "large_binary", "large_string")


@dataclass(frozen=True, slots=True)
class WriteTask:
    """Which task writes: Spark's partition id and, in a micro-batch, its query and batch
    (``source.py`` reads them from the task's context)."""

    partition: int
    query_id: str | None = None
    batch_id: int | None = None


@dataclass(frozen=True, slots=True)
class WriteSummary:
    records: int
    transactional_id: str | None = None
    skipped: bool = False  # the micro-batch's partition was already committed by an earlier run


def check_sink_schema(names_and_types: Iterable[tuple[str, str]], options: SinkOptions) -> None:
    """Refuse a DataFrame the sink cannot write, before any task runs (Spark's checks)."""
    columns = {name.lower(): kind for name, kind in names_and_types}
    if "value" not in columns:
        raise OptionError("the DataFrame to write needs a 'value' column (binary or string)")
    for name in ("key", "value"):
        if name in columns and columns[name] not in ("binary", "string"):
            raise OptionError(f"column {name!r} must be binary or string, not {columns[name]}")
    if options.topic is None and "topic" not in columns:
        raise OptionError("set the 'topic' option or give the DataFrame a 'topic' column")
    if "topic" in columns and columns["topic"] != "string":
        raise OptionError(f"column 'topic' must be a string, not {columns['topic']}")
    if "partition" in columns and columns["partition"] != "int":
        raise OptionError(f"column 'partition' must be an int, not {columns['partition']}")
    if "headers" in columns and columns["headers"] != "array<struct<key:string,value:binary>>":
        raise OptionError("column 'headers' must be array<struct<key: string, value: binary>>, "
                          f"not {columns['headers']}")


def transactional_id(options: SinkOptions, task: WriteTask) -> str:
    """``<prefix>-<partition>``: the same for every attempt at the partition, so a new
    attempt fences the old ones."""
    prefix = options.transactional_id_prefix
    if prefix is None:
        if task.query_id is None:
            raise OptionError("transactional=true needs 'transactionalIdPrefix' outside a streaming query")
        prefix = f"strom-spark-{task.query_id}"
    return f"{prefix}-{task.partition}"


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch],
                  task: WriteTask | None = None) -> WriteSummary:
    """Write one task's rows; ``task`` is needed with ``options.transactional``."""
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_write(options, batches, task))
    finally:
        loop.close()


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    import pyarrow as pa

    index = batch.schema.get_field_index(name)
    if index < 0:
        return None
    column = batch.column(index)
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    return column.to_pylist()  # type: ignore[no-any-return]


def _topics(options: SinkOptions, batch: pa.RecordBatch) -> list[str | None]:
    n = batch.num_rows
    if options.topic is not None:
        return [options.topic] * n
    return [t.decode() if t is not None else None for t in _column(batch, "topic") or [None] * n]


async def _write(options: SinkOptions, batches: Iterator[pa.RecordBatch], task: WriteTask | None) -> WriteSummary:
    from strom.client.producer import AsyncProducer

    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return WriteSummary(0)  # nothing to write, nor to record: a re-run has nothing either
    rows = itertools.chain([first], batches)
    config = options.client.producer_config()
    txn_id = None
    if options.transactional:
        if task is None:
            raise OptionError("a transactional write needs its task's identity")
        txn_id = config["transactional.id"] = transactional_id(options, task)
    errors: list[BaseException] = []

    def delivered(_: object, error: BaseException | None) -> None:
        if error is not None and not errors:
            errors.append(error)

    producer = AsyncProducer(config)
    try:  # close() aborts a transaction left open by a failure
        await producer.start()
        count = 0
        if txn_id is None:
            for batch in rows:
                count += await _produce(producer, options, batch, delivered, errors)
            await producer.flush()
            if errors:
                raise errors[0]
            return WriteSummary(count)
        assert task is not None
        await producer.init_transactions()
        if task.batch_id is not None and await _batch_committed(options, txn_id, task):
            for _ in rows:  # Spark hands a task its input whether or not it reads it: drain it
                pass
            return WriteSummary(0, txn_id, skipped=True)
        producer.begin_transaction()
        for batch in rows:
            count += await _produce(producer, options, batch, delivered, errors)
        if task.batch_id is not None:
            await _record_batch(producer, options, first, txn_id, task)
        await producer.commit_transaction()
        return WriteSummary(count, txn_id)
    finally:
        await producer.close()


async def _produce(producer: AsyncProducer, options: SinkOptions, batch: pa.RecordBatch,
                   delivered: RecordCallback, errors: list[BaseException]) -> int:
    values = _column(batch, "value")
    if values is None:
        raise OptionError("the DataFrame to write needs a 'value' column")
    n = len(values)
    keys = _column(batch, "key") or [None] * n
    topics = _topics(options, batch)
    partitions = _column(batch, "partition") or [None] * n
    headers = _column(batch, "headers") or [None] * n
    for i in range(n):
        topic = topics[i]
        if topic is None:
            raise ValueError("a row to write has a null topic and no 'topic' option is set")
        head = [(h["key"], h["value"]) for h in headers[i]] if headers[i] else ()
        await producer.produce(topic, values[i], keys[i], partition=partitions[i],
                               headers=head, callback=delivered)
        if errors:
            raise errors[0]
    return n


async def _record_batch(producer: AsyncProducer, options: SinkOptions, first: pa.RecordBatch,
                        group_id: str, task: WriteTask) -> None:
    """Commit, inside the transaction, that this query's batch is written for this partition.

    The offset is kept on partition 0 of the first record's topic: Kafka accepts offsets
    only for partitions that exist, and the group is this task's alone, so any one does."""
    from strom.client.consumer import ConsumerGroupMetadata
    from strom.client.offsets import OffsetAndMetadata

    assert task.batch_id is not None
    topic = _topics(options, first)[0]
    assert topic is not None  # _produce refused a null topic before this
    marker = json.dumps({"queryId": task.query_id, "batchId": task.batch_id})
    await producer.send_offsets_to_transaction({(topic, 0): OffsetAndMetadata(task.batch_id + 1, marker)},
                                               ConsumerGroupMetadata(group_id))


async def _batch_committed(options: SinkOptions, group_id: str, task: WriteTask) -> bool:
    """Whether the group records this query's batch, or a later one, as committed.

    Asked with ``require_stable``: a commit whose transaction is not complete answers
    UNSTABLE_OFFSET_COMMIT, and is asked again until it is."""
    from strom.client.admin import AsyncAdmin
    from strom.client.config import AdminConfig
    from strom.client.errors import KafkaError
    from strom.protocol.error_codes import ErrorCode

    shared = {f.name for f in fields(AdminConfig)}
    config = {k: v for k, v in options.client.producer_config().items()
              if k.replace(".", "_").replace("-", "_") in shared}
    async with AsyncAdmin(config) as admin:
        deadline = time.monotonic() + admin.config.request_timeout_ms / 1000
        while True:
            try:
                committed = await admin.list_consumer_group_offsets(group_id, require_stable=True)
                break
            except KafkaError as exc:
                if exc.error_code is not ErrorCode.UNSTABLE_OFFSET_COMMIT or time.monotonic() > deadline:
                    raise
            await asyncio.sleep(admin.config.retry_backoff_ms / 1000)
    assert task.batch_id is not None
    return any(batch is not None and batch >= task.batch_id
               for batch in (_marked_batch(c.metadata, task.query_id) for c in committed.values()))


def _marked_batch(metadata: str, query_id: str | None) -> int | None:
    """The batch id a record of ``_record_batch`` holds, if it is of ``query_id``."""
    try:
        marker = json.loads(metadata)
    except ValueError:
        return None
    if not isinstance(marker, dict) or marker.get("queryId") != query_id:
        return None
    batch = marker.get("batchId")
    return batch if isinstance(batch, int) else None
