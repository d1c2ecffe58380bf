#!/usr/bin/env bash
# Build fake-gcs-server, a Google Cloud Storage emulator, into .fake-gcs/ (ignored):
#
#     server/install-fake-gcs.sh [DEST]
#
# For the GCS tests (tests/integration/gcs), which serve it over plain HTTP on loopback. Built
# from the Go module proxy with `go install github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION`
# (default v1.56.1); Go is on the machine, the emulator has no release on PyPI or Maven.
# Cached: nothing is built when DEST holds the binary of that version (DEST/VERSION). Exit status: 0 when the binary is in DEST, else 1 with go's error.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.fake-gcs}"
version="${FAKE_GCS_VERSION:-v1.56.1}"

if [[ -x "$dest/fake-gcs-server" && "$(cat "$dest/VERSION" 2>/dev/null)" == "$version" ]]; then
    echo "$dest/fake-gcs-server"
    exit 0
fi
PATH="$PATH:/usr/local/go/bin"  # where the machine kind installs Go
command -v go >/dev/null || { echo "install-fake-gcs.sh: go not found on PATH" >&2; exit 1; }
mkdir -p "$dest"
GOBIN="$dest" go install "github.com/fsouza/fake-gcs-server@$version"
echo "$version" >"$dest/VERSION"
echo "$dest/fake-gcs-server"
