"""The ``strom`` command line.

Subcommands import what they need when they run, so ``strom --help`` stays
fast and does not pay for the broker or the clients.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _serve(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from strom.broker.broker import Broker
    from strom.broker.config import BrokerConfig, ConfigError
    from strom.broker.server import ListenError, serve

    overrides = dict(_property(text) for text in args.override)
    for flag, name in (
        ("data_dir", "log.dirs"),
        ("listeners", "listeners"),
        ("advertised_listeners", "advertised.listeners"),
        ("node_id", "node.id"),
    ):
        value = getattr(args, flag)
        if value is not None:
            overrides[name] = str(value)
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        config = BrokerConfig.load(args.config, overrides)
    except ConfigError as exc:  # an operator's mistake: one line, not a traceback
        print(f"strom serve: {exc}", file=sys.stderr)
        return 2
    Path(config.data_dir).mkdir(parents=True, exist_ok=True)
    try:
        broker = Broker(config)
    except ConfigError as exc:  # settings only the broker's parts check (super.users, the stored ACLs)
        print(f"strom serve: {exc}", file=sys.stderr)
        return 2
    broker.startup()

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(broker, stop)

    try:
        if args.event_loop == "uvloop":
            import uvloop

            uvloop.run(run())
        else:
            asyncio.run(run())
    except ListenError as exc:
        print(f"strom serve: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        if not config.cluster_mode:
            raise
        from strom.cluster.zk_broker import ClusterStartupError
        from strom.cluster.zk_client import BrokerRegistrationError

        if not isinstance(exc, ClusterStartupError | BrokerRegistrationError):
            raise
        print(f"strom serve: {exc}", file=sys.stderr)  # one line: the operator's to fix
        return 1
    return 0


def _load(args: argparse.Namespace) -> int:
    import os

    from strom.spark.loader import load, parse_rewind

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        rewind = parse_rewind(args.rewind_to) if args.rewind_to is not None else None
    except ValueError as e:
        raise SystemExit(str(e)) from None
    topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("strom-load").config("spark.ui.enabled", "false")
    if args.master:
        builder = builder.master(args.master)
    for text in args.spark_conf:
        name, value = _property(text)
        builder = builder.config(name, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    try:
        load(spark, args.bootstrap_server, topics, args.to, rewind_to=rewind, output_format=args.format)
    finally:
        spark.stop()
    return 0


def _dev_cluster(args: argparse.Namespace) -> int:
    from strom.cluster.dev_cluster import run

    if args.brokers < 1:
        print("strom dev-cluster: --brokers must be at least 1", file=sys.stderr)
        return 2
    return run(args.brokers, args.zookeeper, Path(args.data_dir), args.base_port)


def _property(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        raise SystemExit(f"--override needs name=value, got {text!r}")
    return name.strip(), value.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strom", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run a broker on a local data directory")
    serve.add_argument("--data-dir", help="where the log lives (log.dirs; default ./strom-data)")
    serve.add_argument("--config", help="a server.properties file (Kafka property names)")
    serve.add_argument("--listeners", help="listeners (default PLAINTEXT://127.0.0.1:9092)")
    serve.add_argument("--advertised-listeners", help="advertised.listeners")
    serve.add_argument("--node-id", type=int, help="node.id (default 1)")
    serve.add_argument(
        "--override", action="append", default=[], metavar="NAME=VALUE",
        help="any broker property, e.g. --override log.retention.ms=3600000",
    )
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--event-loop", default="asyncio", choices=["asyncio", "uvloop"],
        help="the event loop; uvloop needs the [uvloop] extra (measured: BENCHMARKS.md)",
    )
    serve.set_defaults(run=_serve)

    dev = commands.add_parser(
        "dev-cluster", help="run ZooKeeper and a cluster of brokers on this machine (loopback only)")
    dev.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    dev.add_argument("--zookeeper", type=int, default=1, choices=[1, 3],
                     help="ZooKeeper servers: 1 (standalone) or a 3-node ensemble (default 1)")
    dev.add_argument("--data-dir", default="./strom-cluster", help="where brokers and ZooKeeper keep data")
    dev.add_argument("--base-port", type=int, default=9092,
                     help="broker N listens on base-port + N - 1 (default 9092)")
    dev.set_defaults(run=_dev_cluster)

    load = commands.add_parser(
        "load", help="land topics in Parquet with Spark, exactly once (offsets kept with the output)")
    load.add_argument("--bootstrap-server", required=True, help="HOST:PORT of a broker")
    load.add_argument("--topics", required=True, help="comma-separated topic names")
    load.add_argument("--to", required=True, help="output directory (topic=/date= partitions)")
    load.add_argument("--format", default="parquet", choices=["parquet"])
    load.add_argument("--rewind-to", metavar="TIME|earliest",
                      help="re-land every record at or after TIME (epoch ms or ISO-8601, UTC), "
                           "replacing what earlier runs wrote for them")
    load.add_argument("--master", help="Spark master URL (default: Spark's, local[*])")
    load.add_argument("--spark-conf", action="append", default=[], metavar="NAME=VALUE",
                      help="a Spark property, e.g. --spark-conf spark.driver.memory=4g")
    load.set_defaults(run=_load)

    from strom.commands import add_parsers

    add_parsers(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
