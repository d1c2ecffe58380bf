#!/usr/bin/env bash
# Run a command against the project's Spark Connect server on a Spark standalone cluster, then
# stop everything:
#
#     server/with-cluster.sh COMMAND [ARGS...]
#
# Starts, from .venv's pip pyspark, a standalone master and $DELTA_CONNECT_CLUSTER_WORKERS
# workers (default 2; 1 core and $DELTA_CONNECT_CLUSTER_WORKER_MEMORY each, default 1536m), then
# `python -m delta_connect_py.embedded` with spark.master on that master: executors of 1 core and
# 1 GB, each a separate JVM with its own Python workers ($DELTA_CONNECT_WORKER_PYTHON, default
# .venv-worker/bin/python). Everything binds 127.0.0.1 on free ports (web UIs on ephemeral
# ports). Checks that the server really runs on the cluster (spark.master is spark://, every
# worker granted an executor), runs COMMAND with SPARK_REMOTE set, stops the server and the
# cluster by PID on any exit, and exits with COMMAND's code. Logs: $DELTA_CONNECT_CLUSTER_DIR
# (default a fresh temporary folder, removed when COMMAND passed; the executors' copies of the
# application's jars are removed either way). Start-up waits at most $DELTA_CONNECT_START_TIMEOUT
# s each. The server logs at INFO here: the executors it was granted are read from its log.
#
# With DELTA_CONNECT_CLUSTER_SERVER=0 only the master and the workers start, and COMMAND runs
# with DELTA_CONNECT_CLUSTER_MASTER (the master's URL) and DELTA_CONNECT_CLUSTER_WORKERS set:
# for tests that start servers of their own on the cluster (tests/cluster_placement.py). The
# master and workers never see an AWS_* variable (AWS_EC2_METADATA_DISABLED=true instead), so
# executors hold only the credentials their server's Spark conf gives them.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
server_python="${DELTA_CONNECT_SERVER_PYTHON:-$root/.venv/bin/python}"
worker_python="${DELTA_CONNECT_WORKER_PYTHON:-$root/.venv-worker/bin/python}"
nworkers="${DELTA_CONNECT_CLUSTER_WORKERS:-2}"
worker_memory="${DELTA_CONNECT_CLUSTER_WORKER_MEMORY:-1536m}"
timeout="${DELTA_CONNECT_START_TIMEOUT:-300}"
work="${DELTA_CONNECT_CLUSTER_DIR:-}"
made_work=""
if [[ -z "$work" ]]; then
    work="$(mktemp -d -t delta-connect-cluster.XXXXXX)"
    made_work=1
fi
mkdir -p "$work/logs"

spark_home="$("$server_python" -c 'from delta_connect_py.embedded import find_spark_home; print(find_spark_home())')"
free_port() { "$server_python" -c 'from delta_connect_py.embedded import free_port; print(free_port())'; }
master_port="$(free_port)"
connect_port="$(free_port)"
master="spark://127.0.0.1:$master_port"
export SPARK_HOME="$spark_home" SPARK_LOCAL_IP=127.0.0.1 SPARK_DAEMON_MEMORY=256m
export SPARK_NO_DAEMONIZE=1

pids=()
# shellcheck disable=SC2329  # invoked by the EXIT trap
stop_all() {
    local pid
    # The Connect server first (it stops its spark-submit process group on SIGTERM), then the
    # workers, then the master: the reverse of the start order.
    for (( i=${#pids[@]}-1; i>=0; i-- )); do
        pid="${pids[i]}"
        kill -TERM "$pid" 2>/dev/null || continue
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -KILL "$pid" 2>/dev/null || true
    done
}
# shellcheck disable=SC2329  # invoked by the EXIT trap
on_exit() {
    local code=$?
    stop_all
    # Each executor fetched the application's jars into its folder (with the s3a jars, some
    # 600 MB per worker): only the logs are worth keeping.
    find "$work" -path '*/app-*' -name '*.jar' -delete 2>/dev/null || true
    if [[ -n "$made_work" && $code == 0 ]]; then
        rm -rf "$work"
    fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_for LOG PATTERN PID WHAT: until PATTERN is in LOG; fails if PID exits or time runs out.
wait_for() {
    local log="$1" pattern="$2" pid="$3" what="$4" start=$SECONDS
    until grep -q "$pattern" "$log" 2>/dev/null; do
        if ! kill -0 "$pid" 2>/dev/null || (( SECONDS - start > timeout )); then
            echo "with-cluster: $what did not start; log $log:" >&2
            tail -n 40 "$log" >&2
            exit 1
        fi
        sleep 1
    done
}

aws_variables=()
while IFS='=' read -r name _; do
    [[ $name == AWS_* ]] && aws_variables+=(-u "$name")
done < <(env)

# daemon ARGS... &: a master or worker without the caller's PYTHONPATH (executors' Python
# workers must not import delta_connect_py: the library ships its worker code by value) or
# AWS_*. It execs (as spark-class execs java), so $! is the JVM that stop_all stops.
daemon() {
    exec env -u PYTHONPATH "${aws_variables[@]}" AWS_EC2_METADATA_DISABLED=true \
        "$spark_home/bin/spark-class" "$@"
}

start=$SECONDS
daemon org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$master_port" --webui-port 0 >"$work/logs/master.log" 2>&1 &
pids+=("$!")
wait_for "$work/logs/master.log" "I have been elected leader" "${pids[0]}" "the master"

for i in $(seq 1 "$nworkers"); do
    mkdir -p "$work/worker$i"
    daemon org.apache.spark.deploy.worker.Worker "$master" \
        --host 127.0.0.1 --port 0 --webui-port 0 --cores 1 --memory "$worker_memory" \
        --work-dir "$work/worker$i" >"$work/logs/worker$i.log" 2>&1 &
    pids+=("$!")
done
for i in $(seq 1 "$nworkers"); do
    wait_for "$work/logs/worker$i.log" "Successfully registered with master" "${pids[i]}" \
        "worker $i"
done

if [[ ${DELTA_CONNECT_CLUSTER_SERVER:-1} == 0 ]]; then
    echo "with-cluster: $nworkers workers on $master ready after $((SECONDS - start))s" \
        "(logs: $work/logs); the command starts its own servers"
    set +e
    DELTA_CONNECT_CLUSTER_MASTER="$master" DELTA_CONNECT_CLUSTER_WORKERS="$nworkers" "$@"
    status=$?
    set -e
    exit "$status"
fi

DELTA_CONNECT_DRIVER_MEMORY="${DELTA_CONNECT_DRIVER_MEMORY:-2g}" \
"$server_python" -m delta_connect_py.embedded --port "$connect_port" \
    --worker-python "$worker_python" \
    --conf "spark.master=$master" \
    --conf spark.executor.memory=1g \
    --conf spark.executor.cores=1 \
    --conf "spark.cores.max=$nworkers" \
    --conf "spark.pyspark.python=$worker_python" \
    --conf "spark.executorEnv.PYSPARK_PYTHON=$worker_python" \
    --conf spark.log.level=INFO \
    >"$work/logs/connect.log" 2>&1 &
pids+=("$!")
connect_pid="${pids[-1]}"
wait_for "$work/logs/connect.log" "Spark Connect server ready" "$connect_pid" "the Connect server"
server_log="$(sed -n 's/.*server ready at .* (log: \(.*\))$/\1/p' "$work/logs/connect.log")"

# Distributed for real: every worker granted an executor of the Connect server's application.
granted_start=$SECONDS
until (( $(grep -c "Granted executor ID" "$server_log" 2>/dev/null || true) >= nworkers )); do
    if (( SECONDS - granted_start > timeout )); then
        echo "with-cluster: fewer than $nworkers executors granted; log $server_log:" >&2
        tail -n 40 "$server_log" >&2
        exit 1
    fi
    sleep 1
done
remote="sc://127.0.0.1:$connect_port"
"$root/.venv-thin/bin/python" - "$remote" "$master" <<'PY'
import sys

from pyspark.sql import SparkSession

remote, master = sys.argv[1:]
spark = SparkSession.builder.remote(remote).getOrCreate()
actual = spark.conf.get("spark.master")
spark.stop()
if actual != master:
    sys.exit(f"with-cluster: the server runs on {actual}, not on {master}")
PY
echo "with-cluster: $nworkers workers, executors granted, server on $master ready after" \
    "$((SECONDS - start))s (logs: $work/logs, server log: $server_log)"
grep "Granted executor ID" "$server_log" | sed 's/^.*Granted/with-cluster:   granted/'

set +e
SPARK_REMOTE="$remote" "$@"
status=$?
set -e
lost=$(grep -c "Lost task" "$server_log" || true)
echo "with-cluster: the server log shows $lost lost task attempt(s) (log: $server_log)"
exit "$status"
