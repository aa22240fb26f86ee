"""``strom consume TOPIC…``: records from a group's offsets or from chosen offsets or times.

Without ``--follow`` it stops at the end of the partitions as they were when it
started (kcat's ``-e``), or after ``--count`` records; with ``--follow`` it waits for
more. ``--format json`` prints one object per record, with kcat ``-J``'s field names
(``topic partition offset tstype ts headers key payload``), for ``jq``.
With ``--group`` the group's committed offsets are the start and what was read is
committed at the end; without it nothing is committed.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from strom.commands.common import (
    CommandError,
    add_client_options,
    client_properties,
    print_json,
    require_topics,
    run,
    text,
)
from strom.commands.group import parse_datetime_ms
from strom.commands.progress import Progress

POLL_MS = 500


def add_parser(commands: Any) -> None:
    consume = commands.add_parser("consume", help="read records to stdout")
    consume.add_argument("topics", nargs="+", metavar="TOPIC")
    consume.add_argument("--group", "-g", help="read as this consumer group (committing at the end)")
    consume.add_argument("--partition", "-p", type=int, action="append", help="only these partitions")
    consume.add_argument("--offset", "-o", default=None, metavar="beginning|end|N|@TIME",
                         help="where to start without a group: beginning (default), end, an offset, "
                              "or @epoch-ms / @ISO-8601 time")
    consume.add_argument("--count", "-n", type=int, help="stop after this many records")
    consume.add_argument("--follow", "-F", action="store_true", help="wait for new records instead of stopping")
    consume.add_argument("--key-separator", "-K", metavar="SEP", help="print KEY<SEP>VALUE in text output")
    add_client_options(consume)
    consume.set_defaults(run=lambda args: run("consume", lambda: _consume(args)))


def start_timestamp(offset: str) -> int | None:
    """The time an ``@TIME`` start names, in ms (None when it is not a time)."""
    if not offset.startswith("@"):
        return None
    moment = offset[1:]
    return int(moment) if moment.isdigit() else parse_datetime_ms(moment)


async def _consume(args: argparse.Namespace) -> int:
    from strom.client.admin_types import TopicPartition
    from strom.client.consumer import AsyncConsumer

    if args.group and (args.offset or args.partition):
        raise CommandError("--group reads from the group's offsets; --offset and --partition are without one", 2)
    properties = client_properties(args)
    known = await require_topics(properties, args.topics)
    config: dict[str, object] = {**properties, "allow.auto.create.topics": "false", "enable.auto.commit": "false"}
    if args.group:
        config.update({"group.id": args.group, "auto.offset.reset": "earliest"})
    printed = 0
    async with AsyncConsumer(config) as consumer:
        if args.group:
            consumer.subscribe(args.topics)
            ends = None
            progress = _progress(args, args.count)
        else:
            partitions = [TopicPartition(topic, p) for topic in args.topics
                          for p in known[topic] if not args.partition or p in args.partition]
            consumer.assign(partitions)
            await _seek(consumer, partitions, args.offset or "beginning")
            ends = await consumer.end_offsets(partitions)
            remaining = 0
            for tp, end in ends.items():
                remaining += max(end - await consumer.position(tp), 0)
            progress = _progress(args, None if args.follow else min(remaining, args.count or remaining))
        while args.count is None or printed < args.count:
            limit = None if args.count is None else args.count - printed
            batches = await consumer.getmany(timeout_ms=POLL_MS, max_records=limit)
            for records in batches.values():
                for record in records:
                    _print_record(args, record)
                    printed += 1
                    progress.advance()
            if args.follow:
                sys.stdout.flush()  # a pipe reader (tail -f style) sees each batch as it arrives
                continue
            if ends is None and consumer.assignment():
                ends = await consumer.end_offsets(consumer.assignment())
            if ends is not None and await _at_end(consumer, ends):
                break
        progress.close()
        if args.group:
            await consumer.commit()
    sys.stdout.flush()
    return 0


def _progress(args: argparse.Namespace, total: int | None) -> Progress:
    """A bar only when records go to a file or a pipe: on a terminal they are their own progress."""
    progress = Progress(f"consume {','.join(args.topics)}", total)
    progress.enabled = progress.enabled and not sys.stdout.isatty()
    return progress


async def _seek(consumer: Any, partitions: list[Any], offset: str) -> None:
    if offset == "beginning":
        consumer.seek_to_beginning(*partitions)
    elif offset == "end":
        ends = await consumer.end_offsets(partitions)
        for tp in partitions:
            consumer.seek(tp, ends[tp])
    elif offset.isdigit():
        for tp in partitions:
            consumer.seek(tp, int(offset))
    else:
        timestamp = start_timestamp(offset)
        if timestamp is None:
            raise CommandError(f"--offset {offset!r} is not beginning, end, an offset or @TIME", 2)
        found = await consumer.offsets_for_times(dict.fromkeys(partitions, timestamp))
        ends = await consumer.end_offsets(partitions)
        for tp in partitions:
            hit = found.get(tp)
            consumer.seek(tp, hit if hit is not None else ends[tp])


async def _at_end(consumer: Any, ends: dict[Any, int]) -> bool:
    for tp, end in ends.items():
        if tp in consumer.assignment() and await consumer.position(tp) < end:
            return False
    return True


def _print_record(args: argparse.Namespace, record: Any) -> None:
    if args.format == "json":
        headers: list[str | None] = []
        for name, value in record.headers:
            headers += [name, text(value)]
        print_json({"topic": record.topic, "partition": record.partition, "offset": record.offset,
                    "tstype": "logappend" if record.timestamp_type == 1 else "create", "ts": record.timestamp,
                    "headers": headers, "key": text(record.key), "payload": text(record.value)})
    elif args.key_separator is not None:
        print(f"{text(record.key) or ''}{args.key_separator}{text(record.value) or ''}")
    else:
        print(text(record.value) or "")
