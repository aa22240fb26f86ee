"""kafkajs (Node.js) against the broker: admin, gzip produce, group consume and commit."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support.broker_process import BrokerProcess

JS = Path(__file__).parent / "js"


def test_kafkajs_round_trip(broker: BrokerProcess) -> None:
    node = shutil.which("node")
    assert node is not None, "node is not installed: ./scripts/test installs it"
    assert (JS / "node_modules" / "kafkajs").is_dir(), "run ./scripts/test: it installs kafkajs with npm"
    result = subprocess.run(
        [node, str(JS / "kafkajs_client.js"), broker.bootstrap, "kjs", "500"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout.strip().splitlines()[-1])
    assert outcome["created"] is True
    assert outcome["consumed"] == 500 and outcome["allMatch"] is True
    assert outcome["committedTotal"] == 500  # every record committed, across both partitions
