"""Rebalance benchmark: how long each step of a cooperative group's life takes, Strom beside
Apache Kafka 3.9, same client (librdkafka through confluent-kafka), same settings.

    .venv/bin/python benchmarks/rebalance.py [--members 4] [--partitions 6] [--rounds 2]

The scenario is librdkafka's cooperative-rebalance one in small: members with
``cooperative-sticky`` join one at a time, then leave one at a time (``close()``, which
sends LeaveGroup). A step's time runs from the join (subscribe) or the close to the moment
every remaining member's assignment is settled: together they hold every partition, none
twice, each member at least one. Both brokers run with the shared reference settings
(tools/kafka-reference/server.properties: ``group.initial.rebalance.delay.ms=0``), so
neither waits for more members. Rounds alternate between the brokers; best and median
of each step are printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from strom.broker.config import PROPERTY_NAMES  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402
from tests.support.reference_broker import shared_settings, start_reference_broker  # noqa: E402

SETTLE_TIMEOUT = 120.0


@contextmanager
def strom(work: Path) -> Iterator[str]:
    settings = {name: value for name, value in shared_settings().items() if name in PROPERTY_NAMES}
    broker = BrokerProcess(work / "strom", settings).start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextmanager
def kafka39(work: Path) -> Iterator[str]:
    (work / "kafka39").mkdir()
    with start_reference_broker("39", work / "kafka39") as broker:
        yield broker.bootstrap


def settled(members: list[confluent_kafka.Consumer], partitions: int) -> bool:
    owned = [p.partition for member in members for p in member.assignment()]
    return sorted(owned) == list(range(partitions)) and all(member.assignment() for member in members)


def wait_settled(members: list[confluent_kafka.Consumer], partitions: int) -> float:
    start = time.monotonic()
    while time.monotonic() - start < SETTLE_TIMEOUT:
        for member in members:
            member.poll(0.01)
        if not members or settled(members, partitions):
            return time.monotonic() - start
    raise RuntimeError(f"the group did not settle in {SETTLE_TIMEOUT} s")


def scenario(bootstrap: str, members_count: int, partitions: int) -> dict[str, float]:
    topic, group = f"rebalance-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    members: list[confluent_kafka.Consumer] = []
    steps: dict[str, float] = {}
    for i in range(members_count):
        member = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "partition.assignment.strategy": "cooperative-sticky", "client.id": f"m{i}"})
        start = time.monotonic()
        member.subscribe([topic])
        members.append(member)
        steps[f"join {i + 1}"] = time.monotonic() - start + wait_settled(members, partitions)
    while members:
        leaving = members.pop()
        start = time.monotonic()
        leaving.close()
        steps[f"leave -> {len(members)}"] = time.monotonic() - start + wait_settled(members, partitions)
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--members", type=int, default=4)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    figures: dict[tuple[str, str], list[float]] = {}
    order: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with strom(work) as strom_bootstrap, kafka39(work) as kafka_bootstrap:
            brokers = {"strom": strom_bootstrap, "kafka39": kafka_bootstrap}
            for bootstrap in brokers.values():  # warm-up, not counted
                scenario(bootstrap, 2, args.partitions)
            for _ in range(args.rounds):
                for name, bootstrap in brokers.items():
                    for step, seconds in scenario(bootstrap, args.members, args.partitions).items():
                        figures.setdefault((name, step), []).append(seconds)
                        if step not in order:
                            order.append(step)
    print(f"{'step':<12} {'strom best/median s':>22} {'kafka39 best/median s':>24}")
    for step in [*order, "total"]:
        cells = []
        for name in ("strom", "kafka39"):
            values = (figures[(name, step)] if step != "total" else
                      [sum(v) for v in zip(*(figures[(name, s)] for s in order), strict=True)])
            cells.append(f"{min(values):.2f} / {statistics.median(values):.2f}")
        print(f"{step:<12} {cells[0]:>22} {cells[1]:>24}")


if __name__ == "__main__":
    main()
