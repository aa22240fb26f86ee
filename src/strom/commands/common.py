"""What every client command shares: where the cluster is, client properties, output, errors.

The commands talk to the cluster only through ``strom.client``, so they work against
any Kafka-compatible broker. An operator's mistake or a broker's refusal is one line on
stderr and a non-zero exit (1: the cluster said no or could not be reached; 2: the
command line itself is wrong), never a traceback: a script checks ``$?`` and a person
reads one sentence.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TextIO

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
# Properties strom.client does not implement yet: said plainly instead of a generic "unknown property".
_SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")


class CommandError(Exception):
    """A failure the command explains in one line; ``exit_code`` 1 for the cluster's, 2 for usage."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def add_client_options(parser: argparse.ArgumentParser, formats: Sequence[str] = ("text", "json")) -> None:
    parser.add_argument("--bootstrap-server", "-b", metavar="HOST:PORT",
                        help=f"a broker to start from (default $STROM_BOOTSTRAP or {DEFAULT_BOOTSTRAP})")
    parser.add_argument("-X", dest="properties", action="append", default=[], metavar="NAME=VALUE",
                        help="a client property (Kafka's name), e.g. -X request.timeout.ms=5000")
    parser.add_argument("--format", default="text", choices=list(formats),
                        help="aligned text for people, json for scripts")


def client_properties(args: argparse.Namespace) -> dict[str, object]:
    """bootstrap.servers and the -X properties, checked for the ones strom.client lacks."""
    bootstrap = args.bootstrap_server or os.environ.get("STROM_BOOTSTRAP") or DEFAULT_BOOTSTRAP
    properties: dict[str, object] = {"bootstrap.servers": bootstrap}
    for text in args.properties:
        name, sep, value = text.partition("=")
        if not sep or not name.strip():
            raise CommandError(f"-X needs name=value, got {text!r}", 2)
        name = name.strip()
        if name.startswith(_SECURITY_PREFIXES):
            raise CommandError(f"{name}: strom.client has no TLS or SASL support yet", 2)
        properties[name] = value.strip()
    return properties


def parse_pairs(texts: Sequence[str], what: str) -> dict[str, str]:
    """``name=value`` options (configs, headers) into a dict, one clear line for a bad one."""
    pairs = {}
    for text in texts:
        name, sep, value = text.partition("=")
        if not sep or not name:
            raise CommandError(f"{what} needs name=value, got {text!r}", 2)
        pairs[name] = value
    return pairs


def run(command: str, work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command's coroutine; every expected failure becomes one line on stderr."""
    from strom.client.errors import ConfigError, KafkaError

    try:
        return asyncio.run(work())
    except CommandError as exc:
        print(f"strom {command}: {exc}", file=sys.stderr)
        return exc.exit_code
    except ConfigError as exc:
        print(f"strom {command}: {exc}", file=sys.stderr)
        return 2
    except KafkaError as exc:
        print(f"strom {command}: {_kafka_error_line(exc)}", file=sys.stderr)
        return 1
    except OSError as exc:  # a file named on the command line, or a socket the client did not wrap
        print(f"strom {command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def _kafka_error_line(exc: Exception) -> str:
    from strom.client.admin_types import AdminBatchError
    from strom.client.errors import KafkaConnectionError, KafkaTimeoutError

    if isinstance(exc, KafkaConnectionError | KafkaTimeoutError):
        return f"cannot reach the cluster: {exc}"
    if isinstance(exc, AdminBatchError):
        return "; ".join(f"{key}: {error}" for key, error in sorted(exc.errors.items(), key=str))
    return str(exc)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]], out: TextIO | None = None) -> None:
    """Space-padded columns as Kafka's tools print them (awk-friendly: no empty cells)."""
    out = out or sys.stdout
    cells = [[MISSING if value is None or value == "" else str(value) for value in row] for row in rows]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]
    for row in [list(headers), *cells]:
        print(" ".join(value.ljust(width) for value, width in zip(row, widths, strict=True)).rstrip(), file=out)


def print_json(value: Any, out: TextIO | None = None) -> None:
    print(json.dumps(value, sort_keys=False), file=out or sys.stdout)


def text(raw: bytes | None) -> str | None:
    """Record bytes as text for display; bytes that are not UTF-8 are shown escaped."""
    if raw is None:
        return None
    return raw.decode("utf-8", errors="backslashreplace")



async def require_topics(properties: dict[str, object], names: Sequence[str]) -> dict[str, list[int]]:
    """Each topic's partitions; fails at once on a topic that does not exist (a client would wait for it)."""
    from strom.client.admin import AsyncAdmin

    async with AsyncAdmin(properties) as admin:  # unknown or not ours to see: the broker's error, at once
        described = await admin.describe_topics(list(names))
    return {name: [p.partition for p in topic.partitions] for name, topic in described.items()}


async def request_any(args: argparse.Namespace, request: Any) -> Any:
    """One request to any broker of the cluster, at the best version both sides speak."""
    from strom.client.cluster import Cluster
    from strom.client.config import AdminConfig

    cluster = Cluster(AdminConfig.from_properties(client_properties(args)))
    try:
        await cluster.refresh([])
        return await cluster.request(None, request)
    finally:
        await cluster.close()


def check(error_code: int, message: str | None) -> None:
    """A response's error code, raised as the KafkaError that ``run`` prints as one line."""
    if error_code:
        from strom.client.errors import KafkaError

        raise KafkaError(error_code, message or None)
