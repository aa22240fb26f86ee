"""A read-process-write processor for the exactly-once crash test, run as its own process.

``python -m tests.support.eos_processor BOOTSTRAP INPUT OUTPUT PARTITIONS [--seed SEED]``

A confluent-kafka consume-transform-produce loop as librdkafka's transactions example
writes it: one transactional producer (fixed ``transactional.id``, so a restarted
processor fences the one that was killed and aborts its open transaction), one
``read_committed`` consumer without auto commit, the input's partitions assigned by hand
(one processor at a time, so no group rebalances wait for a dead member's session to
time out). Per poll batch: begin, produce ``transform(value)`` with the same key to the
same partition of the output, ``send_offsets_to_transaction`` with the offsets after the
batch, commit. A commit that fails retriably is retried; one that needs an abort is
aborted and the consumer rewound to the committed offsets; anything else is fatal (exit 2).

It prints ``committed P:OFFSET,...`` (the group's committed offset of every input
partition) when it has read them at its start or after an abort, and after each commit: the
test measures progress by these offsets, not by commits, so it can tell a processor that
has nothing left to do from one that is stuck. ``STROM_EOS_DEBUG`` sets the producer's
librdkafka ``debug`` contexts (e.g. ``eos,msg``).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

TRANSACTIONAL_ID = "eos-processor"
GROUP_ID = "eos-processor"
MAX_BATCH = 25
T = TypeVar("T")


def transform(value: bytes) -> bytes:
    """What the processor writes for an input value: the test checks the output against it."""
    return b"out:" + value[::-1]


def _retrying(call: Callable[[], T]) -> T:
    """``call`` again while its KafkaError is retriable (a broker restart, a timeout)."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not exc.args[0].retriable():
                raise


class Processor:
    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, partitions: int) -> None:
        self.output_topic = output_topic
        self.assignment = [TopicPartition(input_topic, partition) for partition in range(partitions)]
        # No re-bootstrap when the broker is down (librdkafka's default since 2.10): it
        # decommissions the broker objects, and send_offsets_to_transaction then waits for
        # good on a group coordinator cached as a decommissioned broker (librdkafka #5511,
        # its timeout unchecked: #5456), seen here after a broker restart.
        client = {"bootstrap.servers": bootstrap, "metadata.recovery.strategy": "none"}
        debug = {"debug": os.environ["STROM_EOS_DEBUG"]} if os.environ.get("STROM_EOS_DEBUG") else {}
        self.producer = Producer({**client, "transactional.id": TRANSACTIONAL_ID,
                                  "linger.ms": 2, "transaction.timeout.ms": 60000, **debug})
        self.consumer = Consumer({**client, "group.id": GROUP_ID,
                                  "isolation.level": "read_committed", "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest"})
        self.next_offsets: dict[int, int] = {}  # per partition: the committed offset, the next to process

    def start(self) -> None:
        # First the producer, so the killed processor's transaction is aborted (its offsets
        # no longer pending) before the consumer fetches the committed offsets.
        _retrying(lambda: self.producer.init_transactions(60))
        self.rewind()

    def rewind(self) -> None:
        """Assign the input at the group's committed offsets (stable ones: read_committed)."""
        committed = _retrying(lambda: self.consumer.committed(self.assignment, timeout=60))
        self.next_offsets = {tp.partition: max(tp.offset, 0) for tp in committed}
        self.consumer.assign([TopicPartition(tp.topic, tp.partition, self.next_offsets[tp.partition])
                              for tp in committed])
        self.report()

    def report(self) -> None:
        """The committed offsets on stdout, for the test (see the module's docstring)."""
        offsets = ",".join(f"{partition}:{offset}" for partition, offset in sorted(self.next_offsets.items()))
        print(f"committed {offsets}", flush=True)

    def process(self, batch: list[Message]) -> None:
        """One transaction: the batch's transformed records and the input offsets after it."""
        self.producer.begin_transaction()
        try:
            for message in batch:
                self.producer.produce(self.output_topic, transform(message.value()), message.key(),
                                      partition=message.partition())
            # The consumer's position() of a partition not fetched yet is not an offset: kept here.
            next_offsets = dict(self.next_offsets)
            for message in batch:
                next_offsets[message.partition()] = message.offset() + 1
            offsets = [TopicPartition(tp.topic, tp.partition, next_offsets[tp.partition]) for tp in self.assignment]
            _retrying(lambda: self.producer.send_offsets_to_transaction(
                offsets, self.consumer.consumer_group_metadata(), 60))
            _retrying(lambda: self.producer.commit_transaction(60))
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            print(f"aborting: {exc.args[0]}", file=sys.stderr, flush=True)
            _retrying(lambda: self.producer.abort_transaction(60))
            self.rewind()
            return
        self.next_offsets = next_offsets
        self.report()

    def run(self, rng: random.Random) -> None:
        """Until killed: the test SIGKILLs every processor it starts."""
        while True:
            batch = self.consumer.consume(rng.randint(1, MAX_BATCH), timeout=0.2)
            errors = [message for message in batch if message.error()]
            for message in errors:  # a broker going away is reported here too: only fatal ones stop us
                if message.error().fatal():
                    raise KafkaException(message.error())
                print(f"consumer: {message.error()}", file=sys.stderr, flush=True)
            batch = [message for message in batch if not message.error()]
            if batch:
                self.process(batch)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bootstrap")
    parser.add_argument("input_topic")
    parser.add_argument("output_topic")
    parser.add_argument("partitions", type=int)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    processor = Processor(args.bootstrap, args.input_topic, args.output_topic, args.partitions)
    try:
        processor.start()
        processor.run(random.Random(args.seed))
    except KafkaException as exc:
        error: KafkaError = exc.args[0]
        print(f"fatal: {error} (fatal={error.fatal()}, retriable={error.retriable()})", file=sys.stderr, flush=True)
        return 2
    finally:
        processor.consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
