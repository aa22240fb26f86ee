"""Protocol codec benchmark: Strom against kafka-python and kio, measured in one run.

    .venv/bin/python benchmarks/codec.py

Workloads (issue "Foundation"): encode+decode of a Metadata response with 100 topics x
10 partitions; a Produce request carrying a 1 MiB batch (zero copy: the time must not
grow with the batch); header + CRC of 1,000 batches of 1 MiB; full decode of a
10,000-record batch; and the cost of ``import strom``. Each figure is the best of
several runs, so it shows the code's cost rather than the machine's noise.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import records_bench
from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
from kafka.protocol.old.metadata import MetadataResponse as KpOldMetadataResponse
from kafka.protocol.producer import ProduceRequest as KpProduceRequest
from kio.index import load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer

from strom.protocol.headers import decode_request, encode_request
from strom.protocol.messages import MetadataResponse, ProduceRequest, RequestHeader
from strom.protocol.messages.metadata_response import (
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from strom.protocol.messages.produce_request import (
    PartitionProduceData,
    TopicProduceData,
)

Row = tuple[str, float]
METADATA_VERSION = 12
PRODUCE_VERSION = 9


def best(run: Callable[[], object], loops: int, repeats: int = 5) -> float:
    """Seconds per call: the fastest of ``repeats`` timings of ``loops`` calls."""
    fastest = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(loops):
            run()
        fastest = min(fastest, (time.perf_counter() - start) / loops)
    return fastest


def metadata_response() -> MetadataResponse:
    brokers = tuple(
        MetadataResponseBroker(n, f"broker-{n}.example", 9092, f"rack-{n % 3}") for n in range(3)
    )
    topics = tuple(
        MetadataResponseTopic(
            error_code=0,
            name=f"topic-{t:03d}",
            topic_id=uuid.UUID(int=t + 1),
            partitions=tuple(
                MetadataResponsePartition(
                    0, p, p % 3, 5, (p % 3, (p + 1) % 3, (p + 2) % 3), (p % 3, (p + 1) % 3), ()
                )
                for p in range(10)
            ),
        )
        for t in range(100)
    )
    return MetadataResponse(brokers=brokers, cluster_id="strom", controller_id=0, topics=topics)


class _Sink:
    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, chunk: bytes) -> None:
        self.out += chunk


def bench_metadata() -> list[Row]:
    message = metadata_response()
    wire = message.encode(METADATA_VERSION)
    assert MetadataResponse.decode(METADATA_VERSION, wire) == message

    def strom() -> None:
        MetadataResponse.decode(METADATA_VERSION, message.encode(METADATA_VERSION))

    def kp_decode(data: bytes) -> KpMetadataResponse:
        decoded = KpMetadataResponse.decode(data, version=METADATA_VERSION)
        decoded._header = None  # kafka-python 3.0.12 forgets it on decode, and encode needs it
        return decoded

    kp_message = kp_decode(wire)
    assert kp_message.encode(version=METADATA_VERSION) == wire

    def kafka_python() -> None:
        kp_decode(kp_message.encode(version=METADATA_VERSION))

    kio_cls = load_response_schema(3, METADATA_VERSION)
    read, write = entity_reader(kio_cls), entity_writer(kio_cls)
    kio_message, _ = read(wire, 0)

    def kio() -> None:
        sink = _Sink()
        write(sink, kio_message)  # type: ignore[arg-type]
        read(bytes(sink.out), 0)

    return [
        (
            "strom: Metadata v12 response, 100 topics x 10 partitions, encode+decode",
            best(strom, 20),
        ),
        ("kafka-python 3 (generated codec): same", best(kafka_python, 5)),
        ("kio: same", best(kio, 20)),
        *bench_metadata_v8(message),
    ]


def bench_metadata_v8(message: MetadataResponse) -> list[Row]:
    """v8, the newest version kafka-python's original (schema-interpreting) classes speak."""
    wire = message.encode(8)

    def strom() -> None:
        MetadataResponse.decode(8, message.encode(8))

    old = KpOldMetadataResponse[8].decode(wire)
    assert old.encode() == wire

    def kafka_python_old() -> None:
        KpOldMetadataResponse[8].decode(old.encode())

    return [
        ("strom: Metadata v8 response, same topics, encode+decode", best(strom, 20)),
        ("kafka-python (original protocol classes): same", best(kafka_python_old, 5)),
    ]


def produce_frame(batch_size: int) -> bytes:
    records = bytes(batch_size)
    body = ProduceRequest(
        acks=-1,
        timeout_ms=30000,
        topic_data=(TopicProduceData("events", (PartitionProduceData(0, records),)),),
    )
    return encode_request(body, PRODUCE_VERSION, correlation_id=1, client_id="bench")


def bench_produce() -> list[Row]:
    rows: list[Row] = []
    for size in (1 << 10, 1 << 20, 16 << 20):
        frame = produce_frame(size)
        payload = memoryview(frame)[4:]
        request = decode_request(payload).body
        label = f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
        rows.append(
            (
                f"strom: decode Produce v9 request, {label} batch",
                best(lambda payload=payload: decode_request(payload), 2000),
            )
        )
        out = bytearray()

        def encode(request: ProduceRequest = request, out: bytearray = out) -> None:
            del out[:]
            request.encode_into(PRODUCE_VERSION, out)

        rows.append(
            (
                f"strom: encode Produce v9 request (sendmsg buffers), {label} batch",
                best(encode, 2000),
            )
        )
        header_end = 4 + len(RequestHeader(0, PRODUCE_VERSION, 1, "bench").encode(2))
        body = frame[header_end:]
        rows.append(
            (
                f"kafka-python: decode Produce v9 request, {label} batch",
                best(
                    lambda body=body: KpProduceRequest.decode(body, version=PRODUCE_VERSION),
                    200 if size < 1 << 24 else 20,
                ),
            )
        )
        kio_cls = load_request_schema(0, PRODUCE_VERSION)
        read = entity_reader(kio_cls)
        rows.append(
            (
                f"kio: decode Produce v9 request, {label} batch",
                best(lambda body=body, read=read: read(body, 0), 200 if size < 1 << 24 else 20),
            )
        )
    return rows


def bench_import() -> list[Row]:
    """Import cost in a fresh interpreter each time (best of 5), measured inside it."""

    def run(statement: str) -> float:
        code = f"import time; t = time.perf_counter(); {statement}; print(time.perf_counter() - t)"
        return min(
            float(
                subprocess.run(
                    [sys.executable, "-c", code], check=True, capture_output=True, text=True
                ).stdout
            )
            for _ in range(5)
        )

    return [
        ("import strom", run("import strom")),
        ("import strom.protocol.messages (registry only)", run("import strom.protocol.messages")),
        (
            "first use of MetadataResponse (registry + one module)",
            run("from strom.protocol.messages import MetadataResponse"),
        ),
    ]


def main() -> None:
    started = time.perf_counter()
    sections = [
        ("Metadata", bench_metadata()),
        ("Produce (zero copy)", bench_produce()),
        ("Record batches", records_bench.bench_batch_headers() + records_bench.bench_full_decode()),
        ("Import", bench_import()),
    ]
    for title, rows in sections:
        print(f"\n## {title}")
        for label, seconds in rows:
            figure = f"{seconds * 1e6:12.1f} us" if seconds < 1e-3 else f"{seconds * 1e3:12.2f} ms"
            print(f"{figure}  {label}")
    metadata = dict(sections[0][1])
    v12 = metadata["strom: Metadata v12 response, 100 topics x 10 partitions, encode+decode"]
    v8 = metadata["strom: Metadata v8 response, same topics, encode+decode"]
    print(
        f"\nMetadata speed-up: v12 {metadata['kafka-python 3 (generated codec): same'] / v12:.1f}x kafka-python 3,"
        f" {metadata['kio: same'] / v12:.1f}x kio;"
        f" v8 {metadata['kafka-python (original protocol classes): same'] / v8:.1f}x kafka-python's original classes"
    )
    print(f"total benchmark time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
