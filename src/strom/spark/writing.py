"""Executor side of ``df.write.format("strom")``: rows to records with Strom's producer.

The columns are those of Spark's Kafka sink: ``value`` (required), ``key``, ``topic``,
``partition``, ``headers`` (optional); key and value may be binary or string. The
``topic`` option, when set, wins over the column, as in Spark.

Each task produces its rows and flushes before it returns its commit message, so
a task that reports success has every record acknowledged (``acks=all`` and
idempotence as the producer defaults). Like Spark's Kafka sink this is at-least-once:
a task that fails after some records were acknowledged and is retried writes those
records again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from strom.spark.options import OptionError, SinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

KEY_VALUE_TYPES = ("binary", "string", "large_binary", "large_string")


@dataclass(frozen=True, slots=True)
class WriteSummary:
    records: int


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


def write_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteSummary:
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(_write(options, batches))
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


async def _write(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> WriteSummary:
    from strom.client.producer import AsyncProducer

    errors: list[BaseException] = []

    def delivered(_: object, error: BaseException | None) -> None:
        if error is not None and not errors:
            errors.append(error)

    count = 0
    producer = AsyncProducer(options.client.producer_config())
    await producer.start()
    try:
        for batch in batches:
            values = _column(batch, "value")
            if values is None:
                raise OptionError("the DataFrame to write needs a 'value' column")
            n = len(values)
            keys = _column(batch, "key") or [None] * n
            topics = ([options.topic] * n if options.topic is not None
                      else [t.decode() if t is not None else None for t in _column(batch, "topic") or [None] * n])
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
            count += n
        await producer.flush()
        if errors:
            raise errors[0]
    finally:
        await producer.close()
    return WriteSummary(count)
