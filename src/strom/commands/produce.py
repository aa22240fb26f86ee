"""``strom produce TOPIC``: records from lines or JSON objects, read from stdin or a file.

A line is a value, or ``key<SEP>value`` with ``--key-separator`` (kcat's ``-K``);
``--input json`` reads one object per line, ``{"key": …, "value": …, "headers": {…},
"partition": n}``, where a value that is not a string is written as its JSON text.
Headers given with ``-H name=value`` go on every record.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from strom.commands.common import (
    CommandError,
    add_client_options,
    client_properties,
    parse_pairs,
    print_json,
    require_topics,
    run,
)
from strom.commands.progress import Progress


@dataclass(frozen=True, slots=True)
class OutgoingRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    partition: int | None


def add_parser(commands: Any) -> None:
    produce = commands.add_parser("produce", help="write records from stdin or a file")
    produce.add_argument("topic", metavar="TOPIC")
    produce.add_argument("--file", "-f", metavar="PATH", help="read records from PATH (default stdin)")
    produce.add_argument("--input", default="lines", choices=["lines", "json"],
                         help="one value per line, or one JSON object per line")
    produce.add_argument("--key-separator", "-K", metavar="SEP", help="a line is KEY<SEP>VALUE")
    produce.add_argument("--header", "-H", action="append", default=[], metavar="NAME=VALUE",
                         help="a header on every record")
    produce.add_argument("--partition", "-p", type=int, help="write every record to this partition")
    add_client_options(produce)
    produce.set_defaults(run=lambda args: run("produce", lambda: _produce(args)))


def parse_records(lines: TextIO, args: argparse.Namespace) -> Iterator[OutgoingRecord]:
    headers = tuple((name, value.encode()) for name, value in parse_pairs(args.header, "--header").items())
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if args.input == "json":
            if not line.strip():
                continue
            yield _json_record(line, number, headers, args.partition)
            continue
        key: bytes | None = None
        if args.key_separator:
            key_text, sep, line = line.partition(args.key_separator)
            if not sep:
                raise CommandError(f"line {number} has no key separator {args.key_separator!r}", 2)
            key = key_text.encode()
        yield OutgoingRecord(key, line.encode(), headers, args.partition)


def _json_record(line: str, number: int, headers: tuple[tuple[str, bytes], ...],
                 partition: int | None) -> OutgoingRecord:
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CommandError(f"line {number} is not JSON: {exc.msg}", 2) from None
    if not isinstance(item, dict):
        raise CommandError(f"line {number}: expected an object with key, value, headers", 2)

    def encode(value: object) -> bytes | None:
        if value is None:
            return None
        return (value if isinstance(value, str) else json.dumps(value)).encode()

    extra = item.get("headers") or {}
    if not isinstance(extra, dict):
        raise CommandError(f"line {number}: headers must be an object", 2)
    record_headers = headers + tuple((str(name), encode(value) or b"") for name, value in extra.items())
    record_partition = item.get("partition", partition)
    return OutgoingRecord(encode(item.get("key")), encode(item.get("value")), record_headers,
                          None if record_partition is None else int(record_partition))


async def _produce(args: argparse.Namespace) -> int:
    from strom.client.producer import AsyncProducer

    properties = client_properties(args)
    source: TextIO = open(args.file, encoding="utf-8") if args.file else sys.stdin  # noqa: SIM115
    written: dict[int, int] = {}
    await require_topics(properties, [args.topic])
    try:
        async with AsyncProducer({**properties, "allow.auto.create.topics": "false"}) as producer:
            progress = Progress(f"produce {args.topic}", os.path.getsize(args.file) if args.file else None)
            futures = []
            for record in parse_records(source, args):
                futures.append(await producer.send(args.topic, record.value, record.key,
                                                   partition=record.partition, headers=record.headers))
                progress.advance(1, len(record.value or b"") + len(record.key or b"") + 1)
            for future in futures:
                metadata = await future
                written[metadata.partition] = written.get(metadata.partition, 0) + 1
            progress.close()
    finally:
        if source is not sys.stdin:
            source.close()
    total = sum(written.values())
    if args.format == "json":
        print_json({"topic": args.topic, "records": total,
                    "partitions": {str(p): n for p, n in sorted(written.items())}})
    else:
        print(f"Produced {total} records to {args.topic}.", file=sys.stderr)
    return 0
