#!/usr/bin/env bash
# Run a command against a fresh standalone Spark Connect server, then stop the server:
#
#     server/with-local-server.sh COMMAND [ARGS...]
#
# Starts server/start-local.sh on a free port (workers: $DELTA_CONNECT_WORKER_PYTHON, default
# .venv-worker/bin/python), waits until it accepts connections (at most
# $DELTA_CONNECT_START_TIMEOUT seconds, default 300), runs COMMAND with
# SPARK_REMOTE=sc://127.0.0.1:PORT, stops the server on any exit, and exits with COMMAND's code.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=server/process-lib.sh
source "$root/server/process-lib.sh"
server_python="${DELTA_CONNECT_SERVER_PYTHON:-$root/.venv/bin/python}"
worker_python="${DELTA_CONNECT_WORKER_PYTHON:-$root/.venv-worker/bin/python}"
timeout="${DELTA_CONNECT_START_TIMEOUT:-300}"

port="$("$server_python" -c 'from delta_connect_py.embedded import free_port; print(free_port())')"
log="$(mktemp -t delta-connect-local-server.XXXXXX.log)"

"$root/server/start-local.sh" "$port" "$worker_python" >"$log" 2>&1 &
server_pid=$!
stop_on_exit "$server_pid"

echo "with-local-server: starting Spark Connect server on 127.0.0.1:$port (log: $log)"
start=$SECONDS
wait_for_line with-local-server "$log" "Spark Connect server ready" "$server_pid" "$timeout"
echo "with-local-server: server ready after $((SECONDS - start))s"

set +e
SPARK_REMOTE="sc://127.0.0.1:$port" "$@"
status=$?
set -e
# The launcher's own output (the server's log is in its scratch folder): kept only for a failure.
((status != 0)) || rm -f "$log"
exit "$status"
