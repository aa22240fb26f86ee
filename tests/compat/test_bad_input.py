"""A running broker under 100,000 malformed requests while a real client uses it.

Mutated frames of every request type (truncated, bytes flipped, sizes wrong, versions
wrong, huge lengths, random garbage) arrive on many connections; meanwhile
confluent-kafka produces and consumes. The broker must stay up, keep answering the real
client correctly, and keep its memory bounded. Admin APIs that create or delete topics
are left out of the corpus (a mutated CreateTopics could legitimately ask for a million
partitions), and auto topic creation is off for the same reason.
"""

from __future__ import annotations

import os
import random
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from strom.protocol.framing import FrameDecoder
from strom.protocol.headers import encode_request
from strom.protocol.messages import APIS
from strom.protocol.messages.api_versions_request import ApiVersionsRequest
from tests.support.broker_process import BrokerProcess
from tests.support.protocol_samples import random_message

REQUESTS = int(os.environ.get("STROM_BAD_INPUT_REQUESTS", "100000"))
SEED = int(os.environ.get("STROM_BAD_INPUT_SEED", "7"))
PROBE_ID = 0x5EED
EXCLUDED = {19, 20, 21, 37, 33, 44, 17, 36, 50}  # topic/config-changing admin APIs, SASL


@pytest.fixture
def quiet_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess(
        tmp_path / "data",
        # A short cleaner back-off: the warm-up below waits for the cleaner's start.
        {"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "0",
         "log.cleaner.backoff.ms": "100"},
    ).start()
    yield process
    if process.alive():
        process.stop()


def _corpus(rng: random.Random) -> list[bytes]:
    frames = []
    for api_key, info in sorted(APIS.items()):
        if api_key in EXCLUDED:
            continue
        for version in {info.versions.start, info.versions.stop - 1, rng.choice(info.versions)}:
            frames.append(encode_request(random_message(info.request, version, rng), version, 1, "fuzz"))
    return frames


def _mutate(frame: bytes, rng: random.Random) -> bytes:
    body = bytearray(frame[4:])
    kind = rng.randrange(8)
    if kind == 0 and body:  # flip bytes
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate, size prefix agreeing
        del body[rng.randrange(len(body) + 1) :]
    elif kind == 2:  # wrong version
        body[2:4] = struct.pack(">h", rng.choice([-1, 99, 32767, rng.randrange(30)]))
    elif kind == 3 and len(body) > 12:  # huge declared length inside the body
        at = rng.randrange(8, len(body) - 4)
        body[at : at + 4] = struct.pack(">i", rng.choice([0x7FFFFFFF, -2, 0x40000000]))
    elif kind == 4:  # random garbage with a plausible header
        body = bytearray(body[:8]) + rng.randbytes(rng.randrange(64))
    elif kind == 5:  # unknown API key
        body[0:2] = struct.pack(">h", rng.choice([-1, 500, 32000]))
    elif kind == 6:
        return struct.pack(">i", rng.choice([-1, 0x7FFFFFFF, 200 * 1024 * 1024])) + bytes(body)
    return struct.pack(">i", len(body)) + bytes(body)


def _hammer(broker: BrokerProcess, count: int, seed: int) -> int:
    """Send ``count`` mutated frames, each followed by a valid ApiVersions probe.

    The probe's answer (or the connection closing) proves the broker has dealt with the
    mutated frame before the next one goes out; a closed connection is reopened.
    """
    rng = random.Random(seed)
    corpus = _corpus(rng)
    probe = encode_request(ApiVersionsRequest(), 0, PROBE_ID, "probe")
    host, port = broker.bootstrap.rsplit(":", 1)
    sock: socket.socket | None = None
    decoder = FrameDecoder()
    for _ in range(count):
        if sock is None:
            sock = socket.create_connection((host, int(port)), timeout=10)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST: no TIME_WAIT
            decoder = FrameDecoder()
        if not _answered(sock, decoder, _mutate(rng.choice(corpus), rng) + probe):
            sock.close()
            sock = None
    if sock is not None:
        sock.close()
    return count


def _answered(sock: socket.socket, decoder: FrameDecoder, data: bytes) -> bool:
    """True once the probe's answer arrives; False if the broker closed the connection."""
    try:
        sock.sendall(data)
        while True:
            chunk = sock.recv(1 << 16)
            if not chunk:
                return False
            if any(frame[:4] == PROBE_ID.to_bytes(4, "big") for frame in decoder.feed(chunk)):
                return True
    except OSError:
        return False


def _real_client(broker: BrokerProcess, stop: threading.Event, errors: list[str], counts: list[int]) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2})
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "real", "enable.auto.commit": False}
    )
    consumer.assign([confluent_kafka.TopicPartition("real", 0, 0)])
    expected = 0
    while not stop.is_set() or expected < counts[0]:
        if not stop.is_set():
            for _ in range(50):
                producer.produce("real", value=b"%d" % counts[0])
                counts[0] += 1
            producer.flush(10)
        message = consumer.poll(0.05)
        while message is not None:
            if message.error() is not None:
                errors.append(str(message.error()))
            elif int(message.value()) != expected:
                errors.append(f"expected {expected}, got {message.value()!r}")
                expected = int(message.value())
            expected += 1
            message = consumer.poll(0)
        if stop.is_set() and expected < counts[0]:
            time.sleep(0.05)
            if len(errors) > 10:
                break
    counts.append(expected)
    consumer.close()


def _wait_for_mapped(broker: BrokerProcess, library: str, timeout: float = 60.0) -> None:
    """Until the broker process has ``library`` mapped (the cleaner imported numpy)."""
    assert broker.process is not None
    deadline = time.monotonic() + timeout
    while library not in Path(f"/proc/{broker.process.pid}/maps").read_text():
        assert time.monotonic() < deadline, f"{library} never loaded"
        time.sleep(0.05)


def test_broker_survives_malformed_requests_while_serving_a_real_client(quiet_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": quiet_broker.bootstrap})
    admin.create_topics([NewTopic("real", 1, 1)])["real"].result(15)
    # The steady state memory is measured from includes the log cleaner, which loads numpy
    # and allocates its offset map when a compacted log (here, or __consumer_offsets once
    # a fuzzed request makes a group) first exists: bring that about before measuring.
    admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])["compacted"].result(15)
    _wait_for_mapped(quiet_broker, "numpy/_core/_multiarray_umath")
    stop = threading.Event()
    errors: list[str] = []
    counts = [0]
    client = threading.Thread(target=_real_client, args=(quiet_broker, stop, errors, counts), daemon=True)
    client.start()
    _hammer(quiet_broker, 2000, SEED)  # warm up before measuring memory
    rss_before = quiet_broker.rss_bytes()
    sent = _hammer(quiet_broker, REQUESTS, SEED + 1)
    rss_after = quiet_broker.rss_bytes()
    stop.set()
    client.join(60)
    assert sent >= REQUESTS
    assert quiet_broker.alive()
    assert errors == []
    produced, consumed = counts[0], counts[1]
    assert produced > 0 and consumed == produced
    # Bounded memory: malformed input must not accumulate state.
    assert rss_after - rss_before < 64 * 1024 * 1024, (rss_before, rss_after)
