"""The warehouse loader: topics into Parquet, partitioned by topic and date, exactly once.

This is the "Hadoop consumer" of Kafka's design, on Spark: one task per topic-partition
offset range (``strom`` data source), offsets stored *with the output* so a re-run
neither loses nor duplicates a record. Why a commit manifest and not Structured
Streaming's file sink with its checkpoint: the sink's log only appends, while
``--rewind-to`` must replace files earlier runs wrote in the same commit that adds their
replacements. See ``strom.spark.manifest`` for the on-disk protocol.

One run:

1. ``recover``: finish the last committed run, delete anything uncommitted.
2. Plan: per topic-partition, from the manifest's next offset (or the log start for
   new partitions) to the high watermark now. With ``rewind_to``, from the offset of the
   first record at or after that time (``ListOffsets`` by timestamp) instead; files that
   may hold records at or after those offsets are read back and rewritten without them.
3. One Spark job writes the new rows (and the kept rows of rewritten files) to the
   run's staging directory, partitioned by ``topic`` and ``date`` (UTC, of the record's
   timestamp).
4. Commit the manifest (the atomic step), then move staged files into place and delete
   superseded ones (redone by ``recover`` if the process dies in between).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from strom.protocol.topic_partition import TopicPartition
from strom.spark.manifest import DataFile, Manifest, ManifestStore
from strom.spark.options import SourceOptions, parse_source_options
from strom.spark.planning import OffsetReader

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

# Where a test may stop the loader dead (os._exit) to check recovery: STROM_LOAD_CRASH_AT.
CRASH_POINTS = ("after-write", "after-commit", "mid-publish")
# The date of the record's timestamp in UTC, whatever the session's time zone.
DATE_UTC = "CAST(date_add(DATE'1970-01-01', CAST(floor(unix_millis(timestamp) / 86400000) AS INT)) AS STRING)"
STORED_SCHEMA = ("key binary, value binary, partition int, offset long, timestamp timestamp, "
                 "timestampType int, headers array<struct<key: string, value: binary>>, "
                 "topic string, date string")


@dataclass(frozen=True, slots=True)
class TopicProgress:
    topic: str
    records: int
    bytes: int
    seconds: float
    lag_left: int

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class LoadResult:
    run: int | None  # None when there was nothing to load
    topics: tuple[TopicProgress, ...]
    rewritten_files: int
    seconds: float


def _crash_point(name: str) -> None:
    if os.environ.get("STROM_LOAD_CRASH_AT") == name:
        os._exit(137)


def parse_rewind(text: str) -> int | str:
    """``earliest``, epoch milliseconds, or an ISO-8601 time (UTC unless it says otherwise)."""
    if text == "earliest":
        return text
    if text.lstrip("-").isdigit():
        return int(text)
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--rewind-to takes 'earliest', epoch milliseconds or an ISO-8601 time, "
                         f"not {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def load(spark: SparkSession, bootstrap_servers: str, topics: Sequence[str], path: str | os.PathLike[str],
         *, rewind_to: int | str | None = None, output_format: str = "parquet",
         progress: Callable[[str], None] | None = print) -> LoadResult:
    """Land ``topics`` under ``path``; see the module docstring for what a run does."""
    if output_format != "parquet":
        raise ValueError(f"format {output_format!r} is not supported (only parquet)")
    if not topics:
        raise ValueError("name at least one topic")
    from strom.spark import register

    register(spark)
    began = time.monotonic()
    say = progress or (lambda _: None)
    store = ManifestStore(path)
    previous = store.recover()
    run = (previous.run + 1) if previous is not None else 1
    committed = previous.offsets if previous is not None else {}
    options = parse_source_options({"kafka.bootstrap.servers": bootstrap_servers,
                                    "subscribe": ",".join(topics)}, streaming=False)
    start, end, earliest = _plan(options, committed, rewind_to)
    if any(start[tp] < earliest[tp] for tp in start):
        lost = {f"{t}-{p}": (start[(t, p)], earliest[(t, p)]) for t, p in start if start[(t, p)] < earliest[(t, p)]}
        log.warning("records deleted before they were loaded (next offset, log start): %s", lost)
        say(f"warning: records were deleted before they were loaded: {lost}")
        start = {tp: max(o, earliest[tp]) for tp, o in start.items()}
    superseded: list[DataFile] = []
    if rewind_to is not None and previous is not None:
        by_topic: dict[str, dict[int, int]] = {}
        for (t, p), o in start.items():
            by_topic.setdefault(t, {})[p] = o
        superseded = [f for f in previous.files if f.may_hold(f.topic, by_topic.get(f.topic, {}))]
    wanted = {tp: (s, end[tp]) for tp, s in start.items() if end[tp] > s}
    if not wanted and not superseded:
        say(f"nothing new to load from {', '.join(topics)}")
        return LoadResult(None, (), 0, time.monotonic() - began)

    staging = store.staging(run)
    frame = _new_rows(spark, options, start, end)
    if superseded:
        frame = frame.unionByName(_kept_rows(spark, store.root, superseded, start))
    (frame.write.mode("overwrite").partitionBy("topic", "date")
     .option("compression", "snappy").parquet(str(staging)))
    _crash_point("after-write")
    written = _describe(store.root, staging)
    seconds = time.monotonic() - began

    offsets = {t: dict(parts) for t, parts in committed.items()}
    for (t, p), o in end.items():
        offsets.setdefault(t, {})[p] = o
    gone = {f.path for f in superseded}
    keep = [f for f in (previous.files if previous is not None else ()) if f.path not in gone]
    manifest = Manifest(run, int(time.time() * 1000), offsets,
                        tuple(DataFile(f.path, f.rows, f.bytes, f.partitions, f.offsets) for f in keep)
                        + tuple(written), tuple(sorted(gone)))
    store.commit(manifest)
    _crash_point("after-commit")
    _publish(store, manifest)

    latest_now = _latest(options)
    result = []
    for topic in topics:
        rows = sum(hi - lo for (t, _), (lo, hi) in wanted.items() if t == topic)
        size = sum(f.bytes for f in written if f.topic == topic)
        lag = sum(latest_now.get((t, p), o) - o for (t, p), o in end.items() if t == topic)
        result.append(TopicProgress(topic, rows, size, seconds, lag))
        say(f"{topic}: {rows} records, {size / 1e6:.1f} MB written, "
            f"{result[-1].mb_per_s:.1f} MB/s, lag left {lag}")
    say(f"run {run} committed: {sum(r.records for r in result)} records from {len(topics)} topic(s), "
        f"{len(written)} file(s), {len(superseded)} rewritten, {seconds:.1f} s")
    return LoadResult(run, tuple(result), len(superseded), time.monotonic() - began)


def _plan(options: SourceOptions, committed: dict[str, dict[int, int]], rewind_to: int | str | None
          ) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int], dict[TopicPartition, int]]:
    reader = OffsetReader(options)
    try:
        tps = reader.partitions()
        end = reader.latest(tps)
        earliest = reader.earliest(tps)
        if rewind_to == "earliest":
            start = dict(earliest)
        elif isinstance(rewind_to, int):
            # "ending": a partition with no record that late answers its end, not an error.
            found = reader.resolve(("timestamp", rewind_to), tps, what="ending")
            # A rewind never skips records not yet loaded.
            start = {tp: min(found[tp], committed.get(tp[0], {}).get(tp[1], earliest[tp])) for tp in tps}
        else:
            start = {tp: committed.get(tp[0], {}).get(tp[1], earliest[tp]) for tp in tps}
    finally:
        reader.close()
    return start, end, earliest


def _latest(options: SourceOptions) -> dict[TopicPartition, int]:
    reader = OffsetReader(options)
    try:
        return reader.latest(reader.partitions())
    finally:
        reader.close()


def _new_rows(spark: SparkSession, options: SourceOptions, start: dict[TopicPartition, int],
              end: dict[TopicPartition, int]) -> DataFrame:
    from pyspark.sql import functions as F

    def as_json(offsets: dict[TopicPartition, int]) -> str:
        out: dict[str, dict[str, int]] = {}
        for (t, p), o in offsets.items():
            out.setdefault(t, {})[str(p)] = o
        return json.dumps(out)

    frame = (spark.read.format("strom")
             .option("kafka.bootstrap.servers", options.client.bootstrap_servers)
             .option("subscribe", ",".join(sorted(options.subscribe)))
             .option("includeHeaders", "true")
             .option("startingOffsets", as_json({tp: min(s, end[tp]) for tp, s in start.items()}))
             .option("endingOffsets", as_json(end)).load())
    return frame.withColumn("date", F.expr(DATE_UTC))


def _kept_rows(spark: SparkSession, root: Path, files: list[DataFile],
               start: dict[TopicPartition, int]) -> DataFrame:
    """The rows of rewritten files that lie before the rewind point: they stay."""
    from pyspark.sql import functions as F

    # The schema is given so the partition columns stay strings (inference would turn a
    # topic named "007" into the integer 7).
    frame = (spark.read.schema(STORED_SCHEMA).option("basePath", str(root))
             .parquet(*(str(root / f.path) for f in files)))
    keep = F.lit(False)
    for (t, p), o in start.items():
        keep = keep | ((F.col("topic") == t) & (F.col("partition") == p) & (F.col("offset") < o))
    return frame.where(keep)


def _describe(root: Path, staging: Path) -> list[DataFile]:
    """The staged files with the ranges their Parquet footers give (no data is read)."""
    import pyarrow.parquet as pq

    out = []
    for file in sorted(staging.glob("topic=*/**/*.parquet")):
        meta = pq.read_metadata(file)
        if meta.num_rows == 0:
            continue
        names = meta.schema.names
        lows: dict[str, int] = {}
        highs: dict[str, int] = {}
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for column in ("partition", "offset"):
                stats = group.column(names.index(column)).statistics
                lows[column] = min(lows.get(column, stats.min), stats.min)
                highs[column] = max(highs.get(column, stats.max), stats.max)
        relative = file.relative_to(staging)
        out.append(DataFile(str(relative), meta.num_rows, file.stat().st_size,
                            (lows["partition"], highs["partition"]), (lows["offset"], highs["offset"]),
                            staged=str(file.relative_to(root))))
    return out


def _publish(store: ManifestStore, manifest: Manifest) -> None:
    """After the commit: staged files into place, superseded ones out (``recover`` redoes it)."""
    moved = 0
    for f in manifest.files:
        if f.staged is None:
            continue
        target = store.root / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(store.root / f.staged, target)
        moved += 1
        if moved == 1:
            _crash_point("mid-publish")
    store.recover()
