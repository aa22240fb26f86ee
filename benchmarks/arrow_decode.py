"""Fetched records to Arrow: is ``poll_arrow()`` faster than confluent-kafka's consume loop?

In one run, on ~1M records of ~100 B in 16 KiB batches (uncompressed and lz4):

* ``records_to_arrow`` on the records bytes (best and median of 5), for values of
  exactly 100 B and of 50..150 B (mean 100);
* the reference decoder ``strom.protocol.records.decode_records`` (per-record objects);
* the peer: confluent-kafka consuming the same records from a Strom broker
  (``consume(num_messages=10000)`` in a loop, touching ``msg.value()``), and, for a
  like-for-like figure, Strom's own raw Fetch over one connection + ``records_to_arrow``.

Usage: ``.venv/bin/python benchmarks/arrow_decode.py [--records N] [--no-broker]``.
"""

from __future__ import annotations

import argparse
import random
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from strom.client.arrow import records_to_arrow
from strom.protocol.compression import CompressionType
from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.fetch_request import (
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from strom.protocol.messages.fetch_response import FetchResponse
from strom.protocol.records import RecordBatchBuilder, decode_records
from tests.support.broker_process import BrokerProcess

BATCH_BYTES = 16 << 10
REPEATS = 5


def _values(count: int, fixed: bool, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    pool = rng.randbytes(1 << 16)
    out = []
    for _ in range(count):
        size = 100 if fixed else rng.randint(50, 150)
        at = rng.randrange(len(pool) - size)
        out.append(pool[at : at + size])
    return out


def _fetch_bytes(values: list[bytes], codec: CompressionType) -> bytes:
    """The records as a fetch returns them: 16 KiB batches, 1 ms between records."""
    out = bytearray()
    timestamp = 1_700_000_000_000
    index = 0
    while index < len(values):
        builder = RecordBatchBuilder(base_offset=index, compression=codec)
        while index < len(values) and builder.size_in_bytes < BATCH_BYTES:
            builder.append(None, values[index], (), timestamp + index)
            index += 1
        out += builder.build()
    return bytes(out)


def _times(run: Callable[[], object], repeats: int = REPEATS) -> tuple[float, float]:
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        seconds.append(time.perf_counter() - start)
    return min(seconds), statistics.median(seconds)


def _line(label: str, records: int, payload: int, best: float, median: float) -> None:
    print(f"  {label:<62} {records / best / 1e6:6.2f} M rec/s (median {records / median / 1e6:5.2f})"
          f"  {payload / best / 1e6:7.0f} MB/s payload")


def bench_decode(count: int) -> None:
    print(f"records_to_arrow vs the reference decoder, {count:,} records, {BATCH_BYTES >> 10} KiB batches")
    for fixed in (True, False):
        values = _values(count, fixed, seed=1)
        payload = sum(map(len, values))
        for codec in (CompressionType.NONE, CompressionType.LZ4):
            data = _fetch_bytes(values, codec)
            kind = f"{'100 B' if fixed else '50-150 B'} values, {codec.name.lower()}"
            assert records_to_arrow("t", 0, data).num_rows == count
            _line(f"records_to_arrow, {kind}", count, payload,
                  *_times(partial(records_to_arrow, "t", 0, data)))
            _line(f"records_to_arrow verify_crc=False, {kind}", count, payload,
                  *_times(partial(records_to_arrow, "t", 0, data, verify_crc=False)))
            if fixed:
                _line(f"reference decode_records, {kind}", count, payload,
                      *_times(partial(decode_records, data), repeats=2))


def _produce(broker: BrokerProcess, topic: str, values: list[bytes], codec: str) -> None:
    producer = confluent_kafka.Producer({
        "bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 10,
        "batch.size": BATCH_BYTES, "queue.buffering.max.messages": 2_000_000,
        "log.connection.close": False,
    })
    for index, value in enumerate(values):
        producer.produce(topic, value=value, partition=0)
        if index % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0


def _confluent_consume(broker: BrokerProcess, topic: str, count: int, tuned: bool) -> float:
    """Seconds from the first message to the ``count``-th, consume(10000) in a loop.

    Untuned, librdkafka stops fetching for ``fetch.queue.backoff.ms`` (1 s) whenever its
    queue holds ``queued.min.messages`` (100,000): with a broker this fast that pause,
    not the consume loop, sets the rate. Tuned, the pause is 10 ms.
    """
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
        "log.connection.close": False, **({"fetch.queue.backoff.ms": 10} if tuned else {}),
    })
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    seen = 0
    size = 0
    start = 0.0
    try:
        while seen < count:
            messages = consumer.consume(num_messages=10_000, timeout=5.0)
            if not messages:
                raise RuntimeError(f"confluent-kafka stalled at {seen} of {count}")
            if not seen:
                start = time.perf_counter()
            for message in messages:
                size += len(message.value() or b"")
            seen += len(messages)
        return time.perf_counter() - start
    finally:
        consumer.close()


def _strom_fetch_decode(broker: BrokerProcess, topic: str, count: int) -> float:
    """Sequential raw Fetches (8 MiB) on one connection, each decoded to Arrow."""
    host, port = broker.bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        decoder = FrameDecoder()
        offset, correlation = 0, 0
        start = time.perf_counter()
        while offset < count:
            correlation += 1
            request = FetchRequest(
                replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=8 << 20,
                topics=(FetchTopic(topic, partitions=(FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=8 << 20),)),),
            )
            sock.sendall(encode_request(request, 12, correlation, "bench"))
            frames: list[bytes] = []
            while not frames:
                frames = decoder.feed(sock.recv(1 << 20))
            _, response = decode_response(frames[0], 1, 12)
            assert isinstance(response, FetchResponse)
            records = response.responses[0].partitions[0].records
            assert isinstance(records, memoryview)
            batch = records_to_arrow(topic, 0, records, start_offset=offset)
            offset = batch.column("offset")[-1].as_py() + 1
        return time.perf_counter() - start


def bench_peer(count: int) -> None:
    print(f"\nFrom a Strom broker, {count:,} records of 100 B, 16 KiB batches, one partition")
    values = _values(count, True, seed=2)
    payload = sum(map(len, values))
    with tempfile.TemporaryDirectory() as work:
        broker = BrokerProcess(Path(work) / "data").start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            for codec in ("none", "lz4"):
                topic = f"bench-{codec}"
                admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
                _produce(broker, topic, values, codec)
                for tuned in (False, True):
                    consume = [_confluent_consume(broker, topic, count, tuned) for _ in range(3)]
                    setting = "fetch.queue.backoff.ms=10" if tuned else "defaults"
                    _line(f"confluent-kafka consume(10000), {setting}, {codec}", count, payload,
                          min(consume), statistics.median(consume))
                strom = [_strom_fetch_decode(broker, topic, count) for _ in range(3)]
                _line(f"Strom Fetch + records_to_arrow, {codec}", count, payload,
                      min(strom), statistics.median(strom))
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--no-broker", action="store_true", help="skip the broker figures")
    args = parser.parse_args()
    bench_decode(args.records)
    if not args.no_broker:
        bench_peer(args.records)


if __name__ == "__main__":
    main()
