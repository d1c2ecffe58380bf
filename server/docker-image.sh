#!/usr/bin/env bash
# Build the project's Spark Connect image (delta-connect-py/spark-connect:4.1.4) on a machine
# that may have no Docker engine and no image registry (Debian bookworm, root, apt + PyPI):
#
#     server/docker-image.sh
#
# Installs docker.io and debootstrap through apt-get when missing, starts dockerd when no engine
# answers (and leaves it running: stop it with `kill $(cat .docker-work/dockerd.pid)`), builds
# the Python base and then server/Dockerfile on it. The base is $PYTHON_IMAGE when set (e.g.
# python:3.11.13-slim-bookworm where Docker Hub is reachable); otherwise a stand-in
# (local/python:3.11-slim-bookworm) is built from Debian's packages, once. compose.yaml then
# finds the image by its tag: PYTHON_IMAGE=local/python:3.11-slim-bookworm server/compose-up.sh.
# Prints each step's time ("== step: N s").
set -euo pipefail
# shellcheck source=server/docker-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/docker-lib.sh"

base="$(docker_python_base)"
docker_timed apt docker_install_packages
docker_timed dockerd docker_ensure_engine
if [[ -n "$DOCKER_LIB_STARTED_DOCKERD" ]]; then
    echo "$DOCKER_LIB_STARTED_DOCKERD" >"$DOCKER_WORK/dockerd.pid"
    docker_log "dockerd left running (pid $DOCKER_LIB_STARTED_DOCKERD, in $DOCKER_WORK/dockerd.pid)"
fi
if [[ "$base" == "$DOCKER_STANDIN_BASE" ]]; then
    docker_timed base-image docker_build_standin_base "$base"
fi
docker_timed image docker_build_project_image "$base"
echo "docker: built $DELTA_CONNECT_IMAGE on $base"
