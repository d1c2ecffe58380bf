# shellcheck shell=bash
# Shell functions for building and running the project's Spark Connect image on a machine that
# may have no Docker engine and no image registry (sourced by server/docker-image.sh,
# server/docker-ci.sh; bash, set -euo pipefail by the caller).
#
# Invariants:
# - Everything is idempotent: packages, the engine and images are made only when missing.
# - An engine is started only when none answers; DOCKER_LIB_STARTED_DOCKERD then holds its pid
#   and docker_stop_engine_if_started stops that one process (never another one).
# - The stand-in base image needs Debian's mirror and the host's CA certificates only, both taken
#   from the host (apt sources, /usr/local/share/ca-certificates), never from a registry.

DOCKER_LIB_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# The Python base: the official image where a registry is reachable, else (default) a stand-in
# built here from Debian's packages, with the same Python minor version (3.11, see Dockerfile).
DOCKER_STANDIN_BASE="local/python:3.11-slim-bookworm"
DELTA_CONNECT_IMAGE="${DELTA_CONNECT_IMAGE:-delta-connect-py/spark-connect:4.1.4}"
DOCKER_WORK="${DOCKER_WORK:-$DOCKER_LIB_ROOT/.docker-work}"
DOCKER_LIB_STARTED_DOCKERD=""

docker_log() { echo "docker: $*" >&2; }

# docker_timed NAME COMMAND...: run COMMAND and print "== NAME: N s" (the CI's step times).
# Call it outside conditions (not after ! or before ||), so that errexit still stops COMMAND
# at its first failure.
docker_timed() {
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "== $name: $((SECONDS - start)) s"
}

# apt-get install docker.io (engine, containerd, runc) and debootstrap when missing.
docker_install_packages() {
    local missing=()
    command -v dockerd >/dev/null || missing+=(docker.io)
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    ((${#missing[@]} == 0)) && return 0
    docker_log "installing ${missing[*]} from apt"
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Start dockerd in the background when no engine answers (no systemd on CI machines).
docker_ensure_engine() {
    docker info >/dev/null 2>&1 && return 0
    mkdir -p "$DOCKER_WORK"
    docker_log "starting dockerd (log: $DOCKER_WORK/dockerd.log)"
    dockerd >"$DOCKER_WORK/dockerd.log" 2>&1 &
    DOCKER_LIB_STARTED_DOCKERD=$!
    local waited=0
    until docker info >/dev/null 2>&1; do
        if ! kill -0 "$DOCKER_LIB_STARTED_DOCKERD" 2>/dev/null || ((waited > 120)); then
            docker_log "dockerd did not start; its log:"
            cat "$DOCKER_WORK/dockerd.log" >&2
            return 1
        fi
        sleep 0.5
        waited=$((waited + 1))
    done
}

# Stop the dockerd this shell started (and its containerd), if any.
docker_stop_engine_if_started() {
    [[ -n "$DOCKER_LIB_STARTED_DOCKERD" ]] || return 0
    if kill -0 "$DOCKER_LIB_STARTED_DOCKERD" 2>/dev/null; then
        docker_log "stopping the dockerd started here (pid $DOCKER_LIB_STARTED_DOCKERD)"
        kill -TERM "$DOCKER_LIB_STARTED_DOCKERD" 2>/dev/null || true
        wait "$DOCKER_LIB_STARTED_DOCKERD" 2>/dev/null || true
    fi
    DOCKER_LIB_STARTED_DOCKERD=""
}

# The host's apt mirror serving SUITE (e.g. bookworm, bookworm-security), from
# /etc/apt/sources.list and /etc/apt/sources.list.d/*.list (one-line) or *.sources (deb822).
# Prints nothing when no source names that suite.
apt_mirror_for() {
    local suite=$1 file
    {
        for file in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [[ -f "$file" ]] || continue
            awk -v suite="$suite" '
                $1 == "deb" {
                    sub(/^deb[ \t]+(\[[^]]*\][ \t]+)?/, "")
                    split($0, f, /[ \t]+/)
                    if (f[2] == suite) print f[1]
                }' "$file"
        done
        for file in /etc/apt/sources.list.d/*.sources; do
            [[ -f "$file" ]] || continue
            awk -v suite="$suite" '
                BEGIN { RS = ""; FS = "\n" }
                {
                    types = ""; uris = ""; suites = ""; enabled = "yes"
                    for (i = 1; i <= NF; i++) {
                        if ($i ~ /^#/) continue
                        key = tolower($i); sub(/:.*/, "", key)
                        value = $i; sub(/^[^:]*:[ \t]*/, "", value)
                        if (key == "types") types = value
                        else if (key == "uris") uris = value
                        else if (key == "suites") suites = value
                        else if (key == "enabled") enabled = tolower(value)
                    }
                    if (enabled == "no" || (" " types " ") !~ / deb /) next
                    if ((" " suites " ") ~ (" " suite " ")) { split(uris, u, /[ \t]+/); print u[1] }
                }' "$file"
        done
    } | sed -n 1p  # reads all its input: no SIGPIPE for pipefail to report
}

# A python:3.11-slim-bookworm stand-in from Debian's packages: bookworm minbase with python3
# and python3-venv, a venv created AT /usr/local (so /usr/local/bin/python and pip exist as in
# the official image, and Debian's PEP 668 guard does not apply), the host's extra CA
# certificates trusted (a TLS-intercepting proxy's; none on most machines), then imported.
docker_build_standin_base() {
    local image=$1
    if docker image inspect "$image" >/dev/null 2>&1; then
        docker_log "$image exists; not rebuilt"
        return 0
    fi
    local mirror security rootfs
    mirror="$(apt_mirror_for bookworm)"
    mirror="${mirror:-http://deb.debian.org/debian}"
    security="$(apt_mirror_for bookworm-security)"
    security="${security:-http://deb.debian.org/debian-security}"
    rootfs="$DOCKER_WORK/rootfs"
    rm -rf "$rootfs"
    mkdir -p "$DOCKER_WORK"
    docker_log "debootstrap bookworm from $mirror into $rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        bookworm "$rootfs" "$mirror" >"$DOCKER_WORK/debootstrap.log" 2>&1 || {
        tail -n 40 "$DOCKER_WORK/debootstrap.log" >&2
        return 1
    }
    rm -f "$rootfs/etc/apt/sources.list"
    cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    local cert
    for cert in /usr/local/share/ca-certificates/*.crt; do
        [[ -f "$cert" ]] && cp "$cert" "$rootfs/usr/local/share/ca-certificates/"
    done
    chroot "$rootfs" update-ca-certificates >/dev/null
    chroot "$rootfs" python3 -m venv /usr/local
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' \
        --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
        --change 'CMD ["python3"]' - "$image" >/dev/null
    rm -rf "$rootfs"
}

# The project's image from server/Dockerfile (unchanged) on the given Python base image. The
# image the tag named before goes when the build replaced it (else each build of a changed
# project would leave an untagged image, pyspark and all, behind).
docker_build_project_image() {
    local base=$1 before after
    before="$(docker image inspect -f '{{.Id}}' "$DELTA_CONNECT_IMAGE" 2>/dev/null || true)"
    docker build -q -f "$DOCKER_LIB_ROOT/server/Dockerfile" --build-arg PYTHON_IMAGE="$base" \
        -t "$DELTA_CONNECT_IMAGE" "$DOCKER_LIB_ROOT/server" >/dev/null
    after="$(docker image inspect -f '{{.Id}}' "$DELTA_CONNECT_IMAGE")"
    if [[ -n "$before" && "$before" != "$after" ]]; then
        docker image rm "$before" >/dev/null 2>&1 || true
    fi
}

# The base to build on: $PYTHON_IMAGE when set (pulled by docker if need be), else the stand-in
# (built when missing).
docker_python_base() {
    echo "${PYTHON_IMAGE:-$DOCKER_STANDIN_BASE}"
}
