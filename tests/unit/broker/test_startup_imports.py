"""``strom serve`` starts and answers Metadata without the heavy libraries it does not need.

numpy (compaction's offset map and vectorised scans), pyarrow (the client's Arrow
output) and crc32c (whose package reads its own version through importlib.metadata) cost tenths of a second to import
on a small machine: that was most of the broker's start-up. Only a compacted topic
needs numpy, so the import must wait for one (benchmarks/startup.py measures the time).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from strom.compaction.log_cleaner import CleanerConfig
from strom.compaction.offset_map import DEFAULT_LOAD_FACTOR
from tests.support.reference_broker import free_port

REPO = Path(__file__).resolve().parents[3]

HEAVY = {"numpy", "pyarrow", "strom.compaction.cleaner", "strom.compaction.record_scan",
         "strom.compaction.offset_map", "strom.client.arrow",
         "crc32c", "importlib.metadata"}  # crc32c reads its version through importlib.metadata


# ``strom serve`` in a process of its own; a thread of that process sends Metadata requests
# (with only modules the broker loads itself) until one is answered, then writes down the
# modules loaded by then and stops the broker (SIGTERM).
_SERVE = """
import os, signal, socket, struct, sys, threading, time
from pathlib import Path
from strom.cli import main
from strom.protocol.headers import decode_response, encode_request
from strom.protocol.messages.metadata_request import MetadataRequest

def metadata():
    with socket.create_connection(("127.0.0.1", %(port)d), timeout=10) as sock:
        sock.sendall(encode_request(MetadataRequest(topics=()), 12, 1, "probe"))
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            data += chunk
        return decode_response(data[4:], 3, 12)[1]

def probe():
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if metadata().brokers:
                    Path(%(out)r).write_text("\\n".join(sorted(sys.modules)))
                    return
            except OSError:
                time.sleep(0.05)
    finally:
        os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
sys.exit(main(["serve", "--data-dir", %(data)r, "--listeners", "PLAINTEXT://127.0.0.1:%(port)d",
               "--log-level", "warning"]))
"""


def test_serve_answers_metadata_without_importing_numpy(tmp_path: Path) -> None:
    out = tmp_path / "modules.txt"
    script = _SERVE % {"port": free_port(), "out": str(out), "data": str(tmp_path / "data")}
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True, timeout=300,
                   stdout=subprocess.DEVNULL)
    loaded = set(out.read_text().splitlines())
    assert {"strom.broker.broker", "strom.broker.handlers.metadata"} <= loaded  # it served
    assert HEAVY & loaded == set()


def test_the_cleaners_default_load_factor_is_the_offset_maps() -> None:
    """log_cleaner states Kafka's default itself so that importing it needs no numpy."""
    assert CleanerConfig().io_buffer_load_factor == DEFAULT_LOAD_FACTOR == 0.9
