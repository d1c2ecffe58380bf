#!/usr/bin/env bash
# Start the standalone Spark Connect server without Docker, in the foreground:
#
#     server/start-local.sh [PORT] [WORKER_PYTHON]
#
# PORT defaults to 15002; WORKER_PYTHON (the server's Python workers) defaults to
# .venv-worker/bin/python, a Python 3.11 with only pyarrow and pandas, so the workers cannot
# import delta_connect_py. The server itself is started from .venv (full pyspark, Java 17) via
# `python -m delta_connect_py.embedded`, the same server the embedded default runs; it binds
# 127.0.0.1 only. Override the launching interpreter with DELTA_CONNECT_SERVER_PYTHON.
# SIGTERM/SIGINT stop it cleanly. DELTA_CONNECT_SPARK_MASTER replaces spark.master, e.g.
# local[*,4] (tasks retried up to 4 times, as on a cluster; local[*] never retries).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
port="${1:-15002}"
worker_python="${2:-$root/.venv-worker/bin/python}"
server_python="${DELTA_CONNECT_SERVER_PYTHON:-$root/.venv/bin/python}"

for python in "$server_python" "$worker_python"; do
    if [[ ! -x "$python" ]]; then
        echo "start-local.sh: $python not found (run 'make venvs' first)" >&2
        exit 2
    fi
done

exec "$server_python" -m delta_connect_py.embedded --port "$port" --worker-python "$worker_python"
