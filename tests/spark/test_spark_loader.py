"""The warehouse loader (``strom load``): exactly once across re-runs, rewinds and kills."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from strom.spark.loader import CRASH_POINTS, load
from strom.spark.manifest import ManifestStore
from tests.support.broker_process import BrokerProcess
from tests.support.spark import create_topic, produce, topic_name

DAY_MS = 86_400_000
BASE_TS = 1_700_000_000_000  # 2023-11-14


def _produce(bootstrap: str, topic: str, partitions: int, first: int, count: int) -> None:
    produce(bootstrap, [{"topic": topic, "partition": i % partitions, "key": f"k{i}".encode(),
                         "value": f"value-{i}".encode(), "timestamp_ms": BASE_TS + i * DAY_MS // 10,
                         "headers": [("seq", str(i).encode())]}
                        for i in range(first, first + count)])


def _output(path: Path) -> list[tuple[str, int, int, bytes]]:
    """Every row of the output, read as any Parquet reader would (no manifest)."""
    rows = []
    for file in sorted(path.glob("topic=*/date=*/*.parquet")):
        topic = file.parent.parent.name.removeprefix("topic=")
        table = pq.read_table(file, columns=["partition", "offset", "value"])
        rows.extend((topic, p, o, v) for p, o, v in zip(*(table.column(c).to_pylist()
                                                         for c in ("partition", "offset", "value")), strict=True))
    return sorted(rows)


def _expected(topic: str, partitions: int, count: int) -> list[tuple[str, int, int, bytes]]:
    per_partition: dict[int, int] = {}
    rows = []
    for i in range(count):
        p = i % partitions
        offset = per_partition.get(p, 0)
        per_partition[p] = offset + 1
        rows.append((topic, p, offset, f"value-{i}".encode()))
    return sorted(rows)


def test_load_twice_is_exactly_once(spark: SparkSession, broker: BrokerProcess, tmp_path: Path) -> None:
    a, b = topic_name("load"), topic_name("load")
    create_topic(broker.bootstrap, a, 3)
    create_topic(broker.bootstrap, b, 1)
    _produce(broker.bootstrap, a, 3, 0, 300)
    _produce(broker.bootstrap, b, 1, 0, 50)
    out = tmp_path / "warehouse"
    lines: list[str] = []
    first = load(spark, broker.bootstrap, [a, b], out, progress=lines.append)
    assert first.run == 1 and [t.records for t in first.topics] == [300, 50]
    assert any(line.startswith(f"{a}: 300 records") and "lag left 0" in line for line in lines)
    assert _output(out) == sorted(_expected(a, 3, 300) + _expected(b, 1, 50))
    # Partitioned by topic and (UTC) date of the record's timestamp.
    dates = {p.name for p in (out / f"topic={a}").iterdir()}
    assert dates == {"date=" + datetime.fromtimestamp((BASE_TS + i * DAY_MS // 10) / 1000, UTC).date().isoformat()
                     for i in range(300)}

    _produce(broker.bootstrap, a, 3, 300, 90)
    second = load(spark, broker.bootstrap, [a, b], out, progress=None)
    assert second.run == 2 and [t.records for t in second.topics] == [90, 0]
    assert _output(out) == sorted(_expected(a, 3, 390) + _expected(b, 1, 50))
    assert load(spark, broker.bootstrap, [a, b], out, progress=None).run is None
    manifest = ManifestStore(out).latest()
    assert manifest is not None and manifest.offsets[a] == {0: 130, 1: 130, 2: 130}


def test_rewind_rewrites_records_from_a_point_in_time(spark: SparkSession, broker: BrokerProcess,
                                                      tmp_path: Path) -> None:
    topic = topic_name("rewind")
    create_topic(broker.bootstrap, topic, 2)
    out = tmp_path / "warehouse"
    _produce(broker.bootstrap, topic, 2, 0, 200)
    load(spark, broker.bootstrap, [topic], out, progress=None)
    _produce(broker.bootstrap, topic, 2, 200, 100)
    load(spark, broker.bootstrap, [topic], out, progress=None)
    before = {f.path for f in ManifestStore(out).latest().files}  # type: ignore[union-attr]

    # Record i has timestamp BASE_TS + i * DAY_MS / 10: rewind to record 150's time.
    result = load(spark, broker.bootstrap, [topic], out, rewind_to=BASE_TS + 150 * DAY_MS // 10, progress=None)
    assert result.run == 3 and result.rewritten_files > 0
    assert _output(out) == _expected(topic, 2, 300)
    manifest = ManifestStore(out).latest()
    assert manifest is not None
    # Every record at or after the rewind point (offset 75 in both partitions) is in a
    # file the rewind wrote; the files of earlier runs that held such records are gone.
    for f in manifest.files:
        if f.offsets[1] >= 75:
            assert f.path not in before, f
    assert set(manifest.superseded) <= before and manifest.superseded

    assert load(spark, broker.bootstrap, [topic], out, rewind_to="earliest", progress=None).run == 4
    assert _output(out) == _expected(topic, 2, 300)


# Nine `strom load` processes, each starting a JVM and Spark: about 2-3 minutes on an idle
# machine, past pytest's default 300 s once the cores are busy (seen in a loaded CI run).
@pytest.mark.timeout(900)
def test_killed_loader_reruns_to_exactly_once(broker: BrokerProcess, tmp_path: Path) -> None:
    """SIGKILL at random moments, and os._exit at the commit's edges; every re-run repairs."""
    topic = topic_name("kill")
    create_topic(broker.bootstrap, topic, 4)
    out = tmp_path / "warehouse"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    command = [sys.executable, "-m", "strom.cli", "load", "--bootstrap-server", broker.bootstrap,
               "--topics", topic, "--to", str(out), "--master", "local[2]"]
    rng = random.Random(8)
    produced = 0
    trials = [("kill", rng.uniform(3.0, 14.0)) for _ in range(5)] + [("crash", point) for point in CRASH_POINTS]
    outcomes = []
    for kind, how in trials:
        _produce(broker.bootstrap, topic, 4, produced, 400)
        produced += 400
        if kind == "crash":
            process = subprocess.run(command, env={**env, "STROM_LOAD_CRASH_AT": str(how)},
                                     capture_output=True, timeout=180)
            assert process.returncode == 137, process.stderr.decode()[-2000:]
            outcomes.append(how)
        else:
            child = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, start_new_session=True)
            time.sleep(float(how))
            finished = child.poll() is not None
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
            outcomes.append("finished" if finished else f"killed at {float(how):.1f}s")
    final = subprocess.run(command, env=env, capture_output=True, timeout=180)
    assert final.returncode == 0, final.stderr.decode()[-2000:]
    assert _output(out) == _expected(topic, 4, produced), outcomes
    assert not (out / "_strom" / "staging").exists()
