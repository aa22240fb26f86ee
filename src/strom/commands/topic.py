"""``strom topic create|list|describe|alter-config|delete|add-partitions``.

Text output follows ``kafka-topics.sh``: ``describe`` prints its ``Topic: … PartitionCount: …``
line per topic and one tab-indented line per partition, so what people grep for
carries over; ``--format json`` gives the same facts as one object per topic.
"""

from __future__ import annotations

import argparse
from typing import Any

from strom.commands.common import (
    CommandError,
    add_client_options,
    client_properties,
    parse_pairs,
    print_json,
    run,
)


def add_parser(commands: Any) -> None:
    topic = commands.add_parser("topic", help="create, list, describe, configure and delete topics")
    verbs = topic.add_subparsers(dest="verb", required=True)

    create = verbs.add_parser("create", help="create topics")
    create.add_argument("topics", nargs="+", metavar="TOPIC")
    create.add_argument("--partitions", "-p", type=int, default=-1, help="default: the broker's num.partitions")
    create.add_argument("--replication-factor", "-r", type=int, default=-1,
                        help="default: the broker's default.replication.factor")
    create.add_argument("--config", "-c", action="append", default=[], metavar="NAME=VALUE")
    create.add_argument("--if-not-exists", action="store_true", help="a topic that exists is not an error")
    create.set_defaults(run=lambda args: run("topic create", lambda: _create(args)))

    listing = verbs.add_parser("list", help="list topic names")
    listing.add_argument("--exclude-internal", action="store_true")
    listing.set_defaults(run=lambda args: run("topic list", lambda: _list(args)))

    describe = verbs.add_parser("describe", help="partitions, leaders, replicas and config overrides")
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="default: every topic")
    describe.set_defaults(run=lambda args: run("topic describe", lambda: _describe(args)))

    alter = verbs.add_parser("alter-config", help="set or delete a topic's config overrides")
    alter.add_argument("topic", metavar="TOPIC")
    alter.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    alter.add_argument("--delete", action="append", default=[], metavar="NAME")
    alter.set_defaults(run=lambda args: run("topic alter-config", lambda: _alter_config(args)))

    delete = verbs.add_parser("delete", help="delete topics")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="a missing topic is not an error")
    delete.set_defaults(run=lambda args: run("topic delete", lambda: _delete(args)))

    grow = verbs.add_parser("add-partitions", help="raise a topic's partition count")
    grow.add_argument("topic", metavar="TOPIC")
    grow.add_argument("--partitions", "-p", type=int, required=True, help="the new total")
    grow.set_defaults(run=lambda args: run("topic add-partitions", lambda: _add_partitions(args)))

    for verb in (create, listing, describe, alter, delete, grow):
        add_client_options(verb)


def _admin(args: argparse.Namespace) -> Any:
    from strom.client.admin import AsyncAdmin

    return AsyncAdmin(client_properties(args))


async def _create(args: argparse.Namespace) -> int:
    from strom.client.admin_types import AdminBatchError, NewTopic
    from strom.protocol.error_codes import ErrorCode

    configs = parse_pairs(args.config, "--config")
    new = [NewTopic(name, args.partitions, args.replication_factor, configs=configs) for name in args.topics]
    async with _admin(args) as admin:
        try:
            created = await admin.create_topics(new)
        except AdminBatchError as exc:
            existing = {name for name, error in exc.errors.items() if error.error_code == ErrorCode.TOPIC_ALREADY_EXISTS}
            if not args.if_not_exists or existing != set(exc.errors):
                raise
            created = exc.results
    for name in args.topics:
        topic = created.get(name)
        if args.format == "json":
            print_json({"topic": name, "created": topic is not None,
                        "topic_id": None if topic is None else str(topic.topic_id),
                        "partitions": None if topic is None else topic.num_partitions,
                        "replication_factor": None if topic is None else topic.replication_factor})
        elif topic is not None:
            print(f"Created topic {name}.")
    return 0


async def _list(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        topics = await admin.list_topics(include_internal=not args.exclude_internal)
    for name in sorted(topics):
        listing = topics[name]
        if args.format == "json":
            print_json({"topic": name, "topic_id": str(listing.topic_id), "internal": listing.internal})
        else:
            print(name)
    return 0


async def _describe(args: argparse.Namespace) -> int:
    from strom.client.admin_types import ConfigResource, ConfigResourceType, ConfigSource

    async with _admin(args) as admin:
        names = args.topics or sorted(await admin.list_topics(include_internal=True))
        if not names:
            return 0
        descriptions = await admin.describe_topics(names)
        resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in names]
        configs = await admin.describe_configs(resources)
    for name in names:
        topic = descriptions[name]
        entries = configs.get(ConfigResource(ConfigResourceType.TOPIC, name), {})
        overrides = {e.name: e.value for e in entries.values() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG}
        replication = len(topic.partitions[0].replicas) if topic.partitions else 0
        if args.format == "json":
            print_json({
                "topic": name, "topic_id": str(topic.topic_id), "internal": topic.internal,
                "partition_count": len(topic.partitions), "replication_factor": replication,
                "configs": overrides,
                "partitions": [{"partition": p.partition, "leader": p.leader if p.leader >= 0 else None,
                                "replicas": list(p.replicas), "isr": list(p.isr)} for p in topic.partitions],
            })
            continue
        config_text = ",".join(f"{key}={value}" for key, value in sorted(overrides.items()))
        print(f"Topic: {name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(topic.partitions)}\t"
              f"ReplicationFactor: {replication}\tConfigs: {config_text}")
        for p in topic.partitions:
            leader = p.leader if p.leader >= 0 else "none"
            print(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {leader}\t"
                  f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")
    return 0


async def _alter_config(args: argparse.Namespace) -> int:
    from strom.client.admin_types import (
        AlterConfigOp,
        AlterConfigOpType,
        ConfigResource,
        ConfigResourceType,
    )

    changes = [AlterConfigOp(name, value) for name, value in parse_pairs(args.set, "--set").items()]
    changes += [AlterConfigOp(name, None, AlterConfigOpType.DELETE) for name in args.delete]
    if not changes:
        raise CommandError("nothing to change: give --set NAME=VALUE or --delete NAME", 2)
    resource = ConfigResource(ConfigResourceType.TOPIC, args.topic)
    async with _admin(args) as admin:
        await admin.describe_topics([args.topic])  # an unknown topic is UNKNOWN_TOPIC_OR_PARTITION, as Kafka says it
        await admin.incremental_alter_configs({resource: changes})
    if args.format == "json":
        print_json({"topic": args.topic, "set": parse_pairs(args.set, "--set"), "deleted": args.delete})
    else:
        print(f"Completed updating config for topic {args.topic}.")
    return 0


async def _delete(args: argparse.Namespace) -> int:
    from strom.client.admin_types import AdminBatchError
    from strom.protocol.error_codes import ErrorCode

    async with _admin(args) as admin:
        try:
            await admin.delete_topics(args.topics)
            missing: set[str] = set()
        except AdminBatchError as exc:
            missing = {name for name, error in exc.errors.items()
                       if error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
            if not args.if_exists or missing != set(exc.errors):
                raise
    for name in args.topics:
        if args.format == "json":
            print_json({"topic": name, "deleted": name not in missing})
        elif name not in missing:
            print(f"Deleted topic {name}.")
    return 0


async def _add_partitions(args: argparse.Namespace) -> int:
    async with _admin(args) as admin:
        await admin.create_partitions({args.topic: args.partitions})
    if args.format == "json":
        print_json({"topic": args.topic, "partitions": args.partitions})
    else:
        print(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0
