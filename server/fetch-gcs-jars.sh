#!/usr/bin/env bash
# Fetch Google's Cloud Storage connector for Hadoop into .gcs-jars/ (ignored):
#
#     server/fetch-gcs-jars.sh [DEST]
#
# For the GCS tests (tests/integration/gcs) and for users whose server reads gs:// tables: pass
# the jar to the server in spark.jars. One artifact, the connector's `shaded` jar
# (com.google.cloud.bigdataoss:gcs-connector:$GCS_CONNECTOR_VERSION:shaded, default 3.1.3),
# which carries its Google client libraries relocated; pyspark's own Hadoop client does the rest.
#
# Cached: nothing is fetched when DEST holds that version's jar. Exit status: 0 when the jar is
# in DEST, else 1 with the failing mvn command.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.gcs-jars}"
version="${GCS_CONNECTOR_VERSION:-3.1.3}"
jar="$dest/gcs-connector-$version-shaded.jar"

if [[ -s "$jar" ]]; then
    echo "$jar"
    exit 0
fi
command -v mvn >/dev/null || { echo "fetch-gcs-jars.sh: mvn not found on PATH" >&2; exit 1; }
# shellcheck source=server/maven-copy.sh
source "$root/server/maven-copy.sh"
mkdir -p "$dest"
maven_copy jar "$dest" "com.google.cloud.bigdataoss:gcs-connector:$version:shaded"
[[ -s "$jar" ]] || { echo "fetch-gcs-jars.sh: $jar missing after mvn" >&2; exit 1; }
echo "$jar"
