"""``strom group list|describe|reset-offsets|delete``, as ``kafka-consumer-groups.sh``.

``describe`` prints Kafka's columns (``GROUP TOPIC PARTITION CURRENT-OFFSET
LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``, ``-`` where there is nothing), one
row per partition the group committed or is assigned, and one row for a member with
no partitions. ``reset-offsets`` plans new offsets and only commits them with
``--execute``; like Kafka it refuses a group that has members, whose consumers would
overwrite the reset with their next commit.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import time
from datetime import UTC, datetime
from typing import Any

from strom.commands.common import (
    CommandError,
    add_client_options,
    client_properties,
    print_json,
    print_table,
    run,
)

DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
# java.time.Duration's ISO-8601 form, which Kafka's --by-duration takes: PnDTnHnMnS
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.IGNORECASE)


def add_parser(commands: Any) -> None:
    group = commands.add_parser("group", help="list, describe, reset and delete consumer groups")
    verbs = group.add_subparsers(dest="verb", required=True)

    listing = verbs.add_parser("list", help="consumer groups and their state")
    listing.set_defaults(run=lambda args: run("group list", lambda: _list(args)))

    describe = verbs.add_parser("describe", help="offsets, lag and members per partition")
    describe.add_argument("groups", nargs="+", metavar="GROUP")
    describe.set_defaults(run=lambda args: run("group describe", lambda: _describe(args)))

    reset = verbs.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)")
    reset.add_argument("group", metavar="GROUP")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="TOPIC[:P,P]", help="a topic, or some of its partitions")
    scope.add_argument("--all-topics", action="store_true", help="every partition the group committed")
    where = reset.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="OFFSET")
    where.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:MM:SS[.sss][±HH:MM]",
                       help="the first offset at or after this time (local time without a zone, as Kafka)")
    where.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N (may be negative)")
    where.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only (the default)")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")
    reset.add_argument("--export", action="store_true", help="print the plan as CSV (topic,partition,offset)")
    reset.set_defaults(run=lambda args: run("group reset-offsets", lambda: _reset(args)))

    delete = verbs.add_parser("delete", help="delete groups that have no members")
    delete.add_argument("groups", nargs="+", metavar="GROUP")
    delete.set_defaults(run=lambda args: run("group delete", lambda: _delete(args)))

    for verb in (listing, describe, reset, delete):
        add_client_options(verb)


def _admin(args: argparse.Namespace) -> Any:
    from strom.client.admin import AsyncAdmin

    return AsyncAdmin(client_properties(args))


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        groups = sorted(await admin.list_groups(), key=lambda g: g.group_id)
    if args.format == "json":
        for listing in groups:
            print_json({"group": listing.group_id, "protocol_type": listing.protocol_type,
                        "state": listing.state or None})
    else:
        print_table(("GROUP", "STATE"), [(g.group_id, g.state) for g in groups])
    return 0


async def _describe(args: argparse.Namespace) -> int:
    from strom.protocol.error_codes import ErrorCode

    rows: list[tuple[Any, ...]] = []
    async with _admin(args) as admin:
        descriptions = await admin.describe_groups(args.groups)
        for group_id in args.groups:
            description = descriptions[group_id]
            committed = await admin.list_consumer_group_offsets(group_id)
            if description.state == "Dead" and not committed:
                from strom.client.errors import KafkaError

                raise KafkaError(ErrorCode.GROUP_ID_NOT_FOUND, f"consumer group {group_id!r} does not exist")
            owners = {tp: member for member in description.members for tp in member.assignment}
            partitions = sorted(set(committed) | set(owners))
            ends = await admin.list_offsets(dict.fromkeys(partitions, "latest")) if partitions else {}
            for tp in partitions:
                member = owners.get(tp)
                current = committed[tp].offset if tp in committed else None
                end = ends[tp].offset if tp in ends else None
                lag = max(end - current, 0) if current is not None and end is not None else None
                rows.append((group_id, tp.topic, tp.partition, current, end, lag,
                             member.member_id if member else None, member.host if member else None,
                             member.client_id if member else None))
            for member in description.members:
                if not member.assignment:
                    rows.append((group_id, None, None, None, None, None,
                                 member.member_id, member.host, member.client_id))
            if not description.members and args.format == "text":
                print(f"Consumer group '{group_id}' has no active members.", file=sys.stderr)
    if args.format == "json":
        keys = [column.lower().replace("-", "_") for column in DESCRIBE_COLUMNS]
        for row in rows:
            print_json(dict(zip(keys, row, strict=True)))
    else:
        print_table(DESCRIBE_COLUMNS, rows)
    return 0


def _scope(topics: list[str]) -> dict[str, list[int] | None]:
    scope: dict[str, list[int] | None] = {}
    for entry in topics:
        name, _, partitions = entry.partition(":")
        try:
            scope[name] = [int(p) for p in partitions.split(",")] if partitions else None
        except ValueError:
            raise CommandError(f"--topic {entry!r}: partitions must be numbers, as topic:0,1,2", 2) from None
    return scope


def parse_duration_ms(text: str) -> int:
    match = _DURATION.match(text)
    if match is None or text.upper() in ("P", "PT"):
        raise CommandError(f"--by-duration {text!r} is not an ISO-8601 duration such as PT1H or P1DT30M", 2)
    days, hours, minutes, seconds = (float(part) if part else 0.0 for part in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_datetime_ms(text: str) -> int:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--to-datetime {text!r} is not YYYY-MM-DDTHH:MM:SS[.sss][±HH:MM]", 2) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka reads a datetime without a zone
    return int(moment.astimezone(UTC).timestamp() * 1000)


async def _reset(args: argparse.Namespace) -> int:
    from strom.client.admin_types import TopicPartition

    async with _admin(args) as admin:
        description = (await admin.describe_groups([args.group]))[args.group]
        if description.members:
            raise CommandError(f"Assignments can only be reset if the group '{args.group}' is inactive, "
                               f"but the current state is {description.state}.")
        committed = await admin.list_consumer_group_offsets(args.group)
        if args.all_topics:
            partitions = sorted(committed)
        else:
            scope = _scope(args.topic)
            topics = await admin.describe_topics(list(scope))
            partitions = sorted(TopicPartition(name, p.partition) for name, topic in topics.items()
                                for p in topic.partitions if p.partition in (scope[name] or [p.partition]))
        if not partitions:
            raise CommandError(f"group '{args.group}' has no committed offsets to reset")
        earliest = await admin.list_offsets(dict.fromkeys(partitions, "earliest"))
        latest = await admin.list_offsets(dict.fromkeys(partitions, "latest"))
        planned = await _plan(admin, args, partitions, committed, earliest, latest)
        if args.execute:
            await admin.alter_consumer_group_offsets(args.group, planned)
    _show_plan(args, planned)
    return 0


async def _plan(admin: Any, args: argparse.Namespace, partitions: list[Any], committed: dict[Any, Any],
                earliest: dict[Any, Any], latest: dict[Any, Any]) -> dict[Any, int]:
    """The new offset of each partition, kept inside [log start, log end] as Kafka does."""
    def clamp(tp: Any, offset: int) -> int:
        low: int = earliest[tp].offset
        high: int = latest[tp].offset
        return max(low, min(offset, high))

    if args.to_earliest:
        return {tp: earliest[tp].offset for tp in partitions}
    if args.to_latest:
        return {tp: latest[tp].offset for tp in partitions}
    if args.to_offset is not None:
        return {tp: clamp(tp, args.to_offset) for tp in partitions}
    if args.shift_by is not None:
        return {tp: clamp(tp, (committed[tp].offset if tp in committed else latest[tp].offset) + args.shift_by)
                for tp in partitions}
    if args.to_datetime is not None:
        timestamp = parse_datetime_ms(args.to_datetime)
    else:
        timestamp = int(time.time() * 1000) - parse_duration_ms(args.by_duration)
    found: dict[Any, Any] = await admin.list_offsets(dict.fromkeys(partitions, timestamp))
    # No record at or after the time: the log end, as Kafka's reset does.
    return {tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in partitions}


def _show_plan(args: argparse.Namespace, planned: dict[Any, int]) -> None:
    if args.export:
        writer = csv.writer(sys.stdout, lineterminator="\n")
        for tp, offset in sorted(planned.items()):
            writer.writerow((tp.topic, tp.partition, offset))
    elif args.format == "json":
        for tp, offset in sorted(planned.items()):
            print_json({"group": args.group, "topic": tp.topic, "partition": tp.partition, "new_offset": offset})
    else:
        print_table(RESET_COLUMNS, [(args.group, tp.topic, tp.partition, offset)
                                    for tp, offset in sorted(planned.items())])


async def _delete(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        await admin.delete_groups(args.groups)
    if args.format == "json":
        for group_id in args.groups:
            print_json({"group": group_id, "deleted": True})
    else:
        names = ", ".join(f"'{g}'" for g in args.groups)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
    return 0

