#!/usr/bin/env bash
# Run librdkafka's own transaction tests, 0098 (consumer isolation: a Java and a librdkafka
# transactional producer, read_committed and read_uncommitted consumers) and 0103
# (transactions), against a broker.
#
#   tools/librdkafka-tests/run.sh                       start a `strom serve` of this tree
#                                                       on a free port, run, stop it
#   tools/librdkafka-tests/run.sh --bootstrap HOST:PORT run against a broker already up
#                                                       (Strom, or scripts/kafka-reference's
#                                                       Kafka 3.9 for comparison)
#   .venv/bin/python tools/librdkafka-tests/cluster.py  the same against 3 Strom brokers
#   options: --tests 0098,0103   which tests (test-runner's TESTS, substring matches)
#            --kafka-version V   TEST_KAFKA_VERSION, the broker version the runner assumes
#                                (default 3.9.0: features it gates on, e.g. KIP-360, exist)
#            --quick             the runner's quick mode (-Q): 0098 then skips its tests 0-4
#
# The runner's own output goes to stdout; the exit status is the runner's (0: every test it
# ran passed). The build comes from tools/librdkafka-tests/build.sh (cached). 0098's Java
# producer (TransactionProducerCli) is compiled and run against kafka-clients 3.9 from
# tests/compat/java/fetch: the runner wants $KAFKA_PATH/bin/kafka-run-class.sh and
# $KAFKA_PATH/libs/kafka-clients-*.jar, which a small directory here stands in for (there is
# no Kafka tarball among the registries this project reaches).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
TESTS_TO_RUN=0098,0103
KAFKA_VERSION=3.9.0
BOOTSTRAP=""
RUNNER_ARGS=()

usage_error() { echo "librdkafka-tests run: $*" >&2; exit 2; }
fail() { echo "librdkafka-tests run: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case "$1" in
        --bootstrap) BOOTSTRAP=${2:?}; shift 2 ;;
        --tests) TESTS_TO_RUN=${2:?}; shift 2 ;;
        --kafka-version) KAFKA_VERSION=${2:?}; shift 2 ;;
        --quick) RUNNER_ARGS+=(-Q); shift ;;
        *) usage_error "unknown argument '$1' (see the comment at the top of $0)" ;;
    esac
done

TREE=$("$ROOT/tools/librdkafka-tests/build.sh")
WORK=$(mktemp -d)
BROKER_PID=""
cleanup() {
    if [ -n "$BROKER_PID" ]; then
        kill -TERM "$BROKER_PID" 2>/dev/null || true
        wait "$BROKER_PID" 2>/dev/null || true
    fi
    # The runner writes a stats_<test>_<n>.json per test into the shared build tree.
    [ -f "$WORK/test.conf" ] && find "$TREE/tests" -maxdepth 1 -name 'stats_*.json' -newer "$WORK/test.conf" -delete
    rm -rf "$WORK"
}
trap cleanup EXIT

kafka_path_stand_in() {  # $WORK/kafka: libs/ = kafka-clients' jars, bin/kafka-run-class.sh
    local jars
    jars=$("$ROOT/tests/compat/java/fetch" dir 39)
    [ -f "$jars/.complete" ] || "$ROOT/tests/compat/java/fetch" install 39 >&2
    mkdir -p "$WORK/kafka/bin"
    ln -s "$jars" "$WORK/kafka/libs"
    cat >"$WORK/kafka/bin/kafka-run-class.sh" <<'EOF'
#!/usr/bin/env bash
# Stand-in for Kafka's launcher: the class on $CLASSPATH plus kafka-clients' jars.
exec java -cp "$CLASSPATH:$(dirname "$0")/../libs/*" "$@"
EOF
    chmod +x "$WORK/kafka/bin/kafka-run-class.sh"
}

start_strom() {  # a `strom serve` on a free port; sets BOOTSTRAP and BROKER_PID
    local python=$ROOT/.venv/bin/python
    [ -x "$python" ] || python=python3
    mkfifo "$WORK/ready"
    # One node: the internal topics' replication factors fall back to the single broker.
    "$python" -m strom serve --data-dir "$WORK/strom-data" --listeners PLAINTEXT://127.0.0.1:0 \
        --override group.initial.rebalance.delay.ms=0 \
        --override transaction.state.log.num.partitions=4 \
        --override offsets.topic.num.partitions=4 \
        >"$WORK/ready" 2>"$WORK/strom.log" &
    BROKER_PID=$!
    local line
    exec 8<"$WORK/ready"
    while IFS= read -r -t 60 line <&8; do
        case "$line" in *"ready on "*) BOOTSTRAP=${line##*ready on }; break ;; esac
    done
    [ -n "$BOOTSTRAP" ] || { cat "$WORK/strom.log" >&2; fail "strom serve did not start"; }
    # Keep reading its stdout so the broker never blocks on a full pipe.
    cat <&8 >/dev/null &
    exec 8<&-
}

kafka_path_stand_in
[ -n "$BOOTSTRAP" ] || start_strom
cat >"$WORK/test.conf" <<EOF
# Written by Strom's tools/librdkafka-tests/run.sh
bootstrap.servers=$BOOTSTRAP
# A loaded 2-core machine: the runner's timeouts times this.
test.timeout.multiplier=3
EOF
echo "librdkafka-tests: $(cat "$TREE/.debian-version") tests $TESTS_TO_RUN against $BOOTSTRAP"
cd "$TREE/tests"
set +e
RDKAFKA_TEST_CONF=$WORK/test.conf TESTS=$TESTS_TO_RUN TEST_KAFKA_VERSION=$KAFKA_VERSION \
    KAFKA_PATH=$WORK/kafka LD_LIBRARY_PATH=../src:../src-cpp \
    ./test-runner -p1 "${RUNNER_ARGS[@]}"
status=$?
set -e
if [ "$status" != 0 ] && [ -s "$WORK/strom.log" ]; then
    echo "--- the last lines of strom serve's log ---"
    tail -40 "$WORK/strom.log"
fi
exit "$status"
