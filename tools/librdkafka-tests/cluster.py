"""librdkafka's transaction tests against a 3-broker Strom cluster, as their authors run them.

    .venv/bin/python tools/librdkafka-tests/cluster.py [run.sh options]

librdkafka's CI runs 0098 and 0103 on a 3-broker cluster; run.sh's default is one broker.
This starts Debian's ZooKeeper and three ``strom serve`` brokers (tests/support/cluster.py)
with every topic replicated three times (``default.replication.factor=3``, which the tests'
topics ask for: build.sh makes them ask for -1, the broker's default, instead of 3;
``__transaction_state`` and ``__consumer_offsets`` three times with ``min.isr`` 2), runs
run.sh against it, stops it, and exits with the runner's status. The brokers' logs stay in
the temporary directory it prints.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from strom.cluster.zookeeper_server import ZooKeeperEnsemble  # noqa: E402
from tests.support.cluster import StromCluster  # noqa: E402

OVERRIDES = {
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "offsets.topic.num.partitions": "4",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "4",
}


def main(runner_arguments: list[str]) -> int:
    directory = Path(tempfile.mkdtemp(prefix="librdkafka-tests-cluster-"))
    print(f"librdkafka-tests cluster: logs in {directory}", flush=True)
    with ZooKeeperEnsemble(directory / "zookeeper", size=1) as zookeeper:
        cluster = StromCluster(directory / "brokers", zookeeper.connect_string + "/librdkafka-tests",
                               brokers=3, overrides=OVERRIDES)
        with cluster:
            run = ROOT / "tools" / "librdkafka-tests" / "run.sh"
            return subprocess.call([str(run), "--bootstrap", cluster.bootstrap, *runner_arguments])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
