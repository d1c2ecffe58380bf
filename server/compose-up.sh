#!/usr/bin/env bash
# Start compose.yaml's spark-connect service in the background and wait until it is healthy
# (its healthcheck connects to the server's port inside the container); fail, with the
# container's log, when it stops or turns unhealthy.
#
#     server/compose-up.sh [UP_ARGS...]          (make compose-up; e.g. --build)
#
# Compose v2 (`docker compose`) does this itself with `up -d --wait`. Debian bookworm packages
# only v1 (`docker-compose` 1.29), which has no --wait: its `up -d --wait` prints the usage and
# exits 0 having started nothing. With v1 this script runs `up -d` and polls the health status.
# Environment (also read by compose.yaml): DELTA_DATA_DIR, DELTA_CONNECT_HOST_PORT, PYTHON_IMAGE,
# SPARK_DRIVER_MEMORY; DELTA_CONNECT_START_TIMEOUT (seconds, default 600) bounds the v1 wait.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
compose_file="$root/compose.yaml"
service=spark-connect
timeout="${DELTA_CONNECT_START_TIMEOUT:-600}"
# Created here, not by the engine: a missing bind-mount source would be made root-owned.
mkdir -p "${DELTA_DATA_DIR:-/tmp/delta-data}"

if docker compose version >/dev/null 2>&1; then
    exec docker compose -f "$compose_file" up -d --wait "$@" "$service"
fi
if ! command -v docker-compose >/dev/null; then
    echo "compose-up: neither 'docker compose' (v2) nor 'docker-compose' (v1) is installed;" \
        "on Debian: apt-get install docker-compose" >&2
    exit 1
fi

docker-compose -f "$compose_file" up -d "$@" "$service"
container="$(docker-compose -f "$compose_file" ps -q "$service")"
if [[ -z "$container" ]]; then
    echo "compose-up: docker-compose started no $service container" >&2
    exit 1
fi
start=$SECONDS
while true; do
    state="$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$container")"
    case "$state" in
        "running healthy") break ;;
        "running starting") ;;
        *)
            echo "compose-up: $service is '$state'; its log:" >&2
            docker logs --tail 100 "$container" >&2 2>&1
            exit 1
            ;;
    esac
    if ((SECONDS - start > timeout)); then
        echo "compose-up: $service not healthy within ${timeout}s; its log:" >&2
        docker logs --tail 100 "$container" >&2 2>&1
        exit 1
    fi
    sleep 2
done
echo "compose-up: $service healthy after $((SECONDS - start)) s," \
    "at 127.0.0.1:${DELTA_CONNECT_HOST_PORT:-15002}"
