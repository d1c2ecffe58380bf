#!/usr/bin/env bash
# CI phase: delta_connect_py against a stock Spark Connect server of another Spark line than
# the project's own (4.1), from one or more pyspark client lines.
#
#     [STOCK_SPARK_CLIENTS="4.1 4.2"] server/stock-spark-ci.sh LINE [PYTEST_ARGS...]
#
# LINE: the server's Spark line (4.0, 4.2, 4.3). STOCK_SPARK_CLIENTS: the client lines to test
# from, in order (default "4.1 LINE"): 4.1 is the project's own thin client, any other line an
# environment that brings its own pyspark-client of that line.
#
# 1. .venv-sparkNN (NN: LINE without its dot): full pip pyspark[connect] LINE (the server; its
#    jars hold Spark Connect).
# 2. For each client line other than 4.1, .venv-thinMM (MM: that line without its dot), made by
#    server/client-venv.sh: pyspark-client of that line installed FIRST, then this package,
#    checked to leave it as it was. Both venvs are cached (made again when pyproject.toml or the
#    pins change), the client's shared by every phase that uses its line.
# 3. Starts org.apache.spark.sql.connect.service.SparkConnectServer (spark-submit ...
#    spark-internal, server/spark-defaults.conf) on 127.0.0.1 and a free port, its Python workers
#    .venv-worker (or $DELTA_CONNECT_WORKER_PYTHON), and waits for it.
# 4. Runs the conformance tests and the subset below from the first client, then the subset's
#    client-side part from each other client (4.1: .venv-thin), each in two test processes
#    (pytest-xdist; DELTA_TEST_WORKERS) sharing the server, as make test-integration.
#    Stops the server on any exit.
#
# Prerequisites: python3.11 (or $PYTHON), Java 17, pip reaching PyPI, .venv-worker and
# .venv-thin made (make venvs). Exits non-zero if any step or any client's test run fails.
set -euo pipefail

line="${1:?usage: server/stock-spark-ci.sh LINE [PYTEST_ARGS...] (LINE: 4.0, 4.2, 4.3)}"
shift
read -r -a client_lines <<<"${STOCK_SPARK_CLIENTS:-4.1 $line}"
for checked in "$line" "${client_lines[@]}"; do
    if [[ ! "$checked" =~ ^4\.[0-9]+$ ]]; then
        echo "stock-spark-ci: LINE and each of STOCK_SPARK_CLIENTS must be a Spark 4 line such" \
            "as 4.2 (got $checked)" >&2
        exit 2
    fi
done
if (( ${#client_lines[@]} == 0 )); then
    echo "stock-spark-ci: STOCK_SPARK_CLIENTS names no client line" >&2
    exit 2
fi
tag="spark${line/./}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# shellcheck source=server/process-lib.sh
source "$root/server/process-lib.sh"
python="${PYTHON:-python3.11}"
server_venv="$root/.venv-$tag"
thin41="$root/.venv-thin"
worker_python="${DELTA_CONNECT_WORKER_PYTHON:-$root/.venv-worker/bin/python}"
timeout="${DELTA_CONNECT_START_TIMEOUT:-300}"
pip=(pip install --quiet --disable-pip-version-check)
server_pin="pyspark[connect]==$line.*"

# The tests that exercise what differed on Spark 4.0 (and so may on another line):
# createDataFrame (every listing), observed metrics (update() + state, create_checkpoint), CDF,
# history, the checkpoint schemas the client states (Spark's own inference), and the failures
# each line words its own way (an unreachable server after the client's retries, a cast, a
# missing file system, a refused write, a query's own raise_error). The conformance tests run
# whole.
# Left out for time: the polling loop without checkpoints, and the longest CDF stream test.
subset=(
    tests/conformance
    tests/integration/test_server.py
    tests/integration/test_lifecycle.py
    tests/integration/test_snapshot.py::test_update_builds_on_the_previous_state
    tests/integration/test_snapshot.py::test_timestamp_strings_are_read_as_spark_casts_them_in_the_session_time_zone
    "tests/integration/test_snapshot.py::test_a_polling_loop_over_a_delta_rs_table_matches_delta_rs[True]"
    tests/integration/test_snapshot.py::test_update_after_a_longer_transaction_retention_keeps_the_transaction
    tests/integration/test_checkpoint.py::test_a_single_file_checkpoint_observes_the_state_it_writes
    tests/integration/test_checkpoint.py::test_without_observed_metrics_the_state_query_counts_the_checkpoint
    tests/integration/test_damaged_logs.py::test_a_checkpoint_action_read_for_the_snapshot_that_is_not_utf8_is_refused
    tests/integration/test_cdf.py
    tests/integration/test_history.py
    tests/integration/test_snapshot_cache.py::test_a_quiet_unchanged_log_is_answered_without_listing_it
    tests/integration/test_snapshot_cache.py::test_a_change_to_a_quiet_log_is_seen
    tests/integration/test_session_settings.py
    tests/integration/test_footer_schemas.py
)
# What only the server decides (its session settings, its schema inference): run from the first
# client line alone; every other client line runs the rest of the subset on the same server.
server_only=(
    tests/integration/test_session_settings.py
    tests/integration/test_footer_schemas.py
)
# The conformance suite mostly tests the server's reading of many tables through the same
# few plans; a later client line runs it for five tables that take every one of those plans
# (a multi-part and a V2 checkpoint with sidecars, deletion vectors, column mapping, CDF).
replays='tests/conformance/test_snapshots.py::test_table_replays_like_upstream'
later_client_conformance=(
    "$replays[golden/multi-part-checkpoint/delta]"
    "$replays[kernel/v2-checkpoints-parquet-with-sidecars/delta]"
    "$replays[golden/kernel-basic-dv-with-checkpoint/delta]"
    "$replays[golden/dv-with-columnmapping/delta]"
    "$replays[kernel/cdf-table-with-cdc-and-dvs/delta]"
)
client_subset=("${later_client_conformance[@]}")
for entry in "${subset[@]}"; do
    [[ " ${server_only[*]} tests/conformance " == *" $entry "* ]] || client_subset+=("$entry")
done

phase() { echo "== $tag-ci: $* ($SECONDS s)"; }

stamp() {  # what a cached venv was built from
    printf '%s\n' "$1" "$(sha256sum "$root/pyproject.toml" | cut -c1-16)"
}

for python_path in "$worker_python" "$thin41/bin/python"; do
    if [[ ! -x "$python_path" ]]; then
        echo "stock-spark-ci: $python_path not found (make venvs first)" >&2
        exit 2
    fi
done

# --- environments ---------------------------------------------------------------------------

phase "server venv $server_venv"
if [[ "$(cat "$server_venv/.installed" 2>/dev/null)" != "$(stamp "$server_pin")" ]]; then
    test -x "$server_venv/bin/python" || "$python" -m venv "$server_venv"
    "$server_venv/bin/${pip[0]}" "${pip[@]:1}" "$server_pin"
    stamp "$server_pin" > "$server_venv/.installed"
fi

clients=()
for client_line in "${client_lines[@]}"; do
    if [[ "$client_line" == 4.1 ]]; then
        clients+=("$thin41")
        continue
    fi
    clients+=("$root/.venv-thin${client_line/./}")
    phase "$client_line thin client venv ${clients[-1]}"
    "$root/server/client-venv.sh" "$client_line"
done

# --- the server -----------------------------------------------------------------------------

spark_home="$("$server_venv/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
port="$("$server_venv/bin/python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
log="$(mktemp -t "delta-connect-$tag.XXXXXX.log")"

phase "starting Spark $("$server_venv/bin/python" -c 'import pyspark; print(pyspark.__version__)') Connect server on 127.0.0.1:$port (log: $log)"
SPARK_HOME="$spark_home" PYSPARK_PYTHON="$worker_python" SPARK_LOCAL_IP=127.0.0.1 \
    "$spark_home/bin/spark-submit" \
    --class org.apache.spark.sql.connect.service.SparkConnectServer \
    --name "delta-connect-py-$tag" \
    --properties-file "$root/server/spark-defaults.conf" \
    --driver-memory 2g \
    --conf spark.connect.grpc.binding.address=127.0.0.1 \
    --conf "spark.connect.grpc.binding.port=$port" \
    spark-internal >"$log" 2>&1 &
server_pid=$!
stop_on_exit "$server_pid"
start=$SECONDS
wait_for_line stock-spark-ci "$log" "Spark Connect server started at" "$server_pid" "$timeout"
phase "server ready after $((SECONDS - start)) s"

# --- the tests ------------------------------------------------------------------------------

status=0
tests=("${subset[@]}")
for client in "${clients[@]}"; do
    version="$("$client/bin/python" -c 'import pyspark; print(pyspark.__version__)')"
    phase "tests from pyspark client $version ($client)"
    basetemp="$(mktemp -d -t "delta-connect-$tag-tests.XXXXXX")"
    SPARK_REMOTE="sc://127.0.0.1:$port" PYTHONPATH="$root" \
        "$client/bin/pytest" -p no:cacheprovider --basetemp "$basetemp" --durations=25 \
        -n "${DELTA_TEST_WORKERS:-2}" --dist loadfile \
        -m "integration and not embedded and not delta_spark" "${tests[@]}" \
        --deselect tests/integration/test_cdf.py::test_stream_batches_concatenate_to_load_cdf_and_resume_exactly \
        "$@" || status=1
    rm -rf "$basetemp"
    tests=("${client_subset[@]}")
done
phase "done (status $status)"
# The server logs at Spark's INFO here (tens of MB): kept only for a failure to be read.
((status != 0)) || rm -f "$log"
exit "$status"
