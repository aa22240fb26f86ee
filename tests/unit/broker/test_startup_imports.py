"""``strom serve`` starts and answers Metadata without the heavy libraries it does not need.

numpy (compaction's offset map and vectorised scans), pyarrow (the client's Arrow
output) and the compression codecs' big dependencies cost tenths of a second to import
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
         "strom.compaction.offset_map", "strom.client.arrow"}


# ``strom serve`` in a process of its own; a thread of that process waits for the first
# Metadata answer, writes down the modules loaded by then and stops the broker (SIGTERM).
_SERVE = """
import os, signal, sys, threading
from pathlib import Path
from strom.cli import main
from tests.support.reference_broker import wait_for_metadata

def probe():
    try:
        wait_for_metadata("127.0.0.1:%(port)d", lambda: True, timeout=120)
        Path(%(out)r).write_text("\\n".join(sorted(sys.modules)))
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
