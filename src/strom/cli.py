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
    data_dir = Path(args.data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"strom serve: data directory {data_dir.resolve()} is ready, but the broker is "
        "not yet built (it lands with the broker issue); exiting cleanly.",
        flush=True,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="strom", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run a broker on a local data directory")
    serve.add_argument("--data-dir", default="./strom-data", help="where the log lives")
    serve.add_argument("--config", help="a server.properties file (Kafka property names)")
    serve.add_argument("--listeners", default="PLAINTEXT://127.0.0.1:9092")
    serve.add_argument("--advertised-listeners")
    serve.add_argument("--node-id", type=int, default=1)
    serve.set_defaults(run=_serve)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.run(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
