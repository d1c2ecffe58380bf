#!/usr/bin/env bash
# Fetch the delta-spark jars that match the pip pyspark 4.1 server into .delta-jars/ (ignored):
#
#     server/fetch-delta-jars.sh [DEST]
#
# These jars are for the tests' *oracle* server only (tests/delta_spark_server.py); the
# delta_connect_py client and its vanilla server never use them.
#
# Each artifact is copied on its own (`mvn dependency:copy`, not transitive): everything delta-spark
# needs at run time besides these (scala-library, hadoop-client, parquet, jackson, RoaringBitmap)
# is already in pyspark's jars/, and a transitive copy would put second, conflicting versions of
# those on the class path. DELTA_VERSION (default 4.3.1) picks the release. delta-spark 4.1.0 and
# 4.2.0 are built against Spark 4.1.0 but do not run on pyspark 4.1.4: reading any checkpoint
# fails with NoSuchMethodError (ParquetToSparkSchemaConverter.<init>(ZZZZZZZ)V, a constructor
# Spark 4.1.4 no longer has). 4.3.1, also built against Spark 4.1.0, calls the SQLConf
# constructor instead and works.
#
# Delta Connect (delta-connect-server / delta-connect-common) is fetched when Maven Central
# serves it for DELTA_VERSION; it is optional: without it the oracle server still runs Delta SQL
# and spark.read.format("delta"), only the Delta Connect DeltaTable API is missing.
#
# Idempotent: an artifact already in DEST is not fetched again; Maven caches in ~/.m2 as usual.
# A stamp file (DEST/VERSION) records the release; changing DELTA_VERSION empties DEST first.
# Exit status: 0 when every required jar is in DEST, else 1 with the failing mvn command.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.delta-jars}"
version="${DELTA_VERSION:-4.3.1}"
scala="2.13"
# jackson-datatype-jdk8 is the one run-time dependency of delta-kernel that pyspark lacks; it
# must match pyspark's jackson (2.21.2 in pyspark 4.1.4).
jackson_version="${DELTA_JACKSON_VERSION:-2.21.2}"

required=(
    "io.delta:delta-spark_${scala}:${version}"
    "io.delta:delta-storage:${version}"
    "io.delta:delta-kernel-api:${version}"
    "io.delta:delta-kernel-defaults:${version}"
    "io.delta:delta-kernel-unitycatalog:${version}"
    "com.fasterxml.jackson.datatype:jackson-datatype-jdk8:${jackson_version}"
)
optional=(
    "io.delta:delta-connect-common_${scala}:${version}"
    "io.delta:delta-connect-server_${scala}:${version}"
)

command -v mvn >/dev/null || { echo "fetch-delta-jars.sh: mvn not found on PATH" >&2; exit 1; }

mkdir -p "$dest"
if [[ -f "$dest/VERSION" && "$(cat "$dest/VERSION")" != "$version" ]]; then
    echo "fetch-delta-jars.sh: $dest holds $(cat "$dest/VERSION"); replacing with $version" >&2
    rm -f "$dest"/*.jar "$dest/.unavailable"
fi

# mvn needs a project-less directory: run it from a scratch dir so no pom.xml is picked up.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

fetch() {  # fetch GROUP:ARTIFACT:VERSION -> 0 if DEST has the jar afterwards
    local coordinate="$1" artifact version_
    artifact="$(cut -d: -f2 <<<"$coordinate")"
    version_="$(cut -d: -f3 <<<"$coordinate")"
    if [[ -s "$dest/$artifact-$version_.jar" ]]; then
        return 0
    fi
    local cmd=(mvn -q -B -U dependency:copy "-Dartifact=$coordinate:jar"
        "-DoutputDirectory=$dest" -Dmdep.overWriteReleases=false)
    if ! (cd "$scratch" && "${cmd[@]}") >"$scratch/mvn.log" 2>&1; then
        echo "fetch-delta-jars.sh: failed: (cd $scratch && ${cmd[*]})" >&2
        grep -E "ERROR" "$scratch/mvn.log" | head -5 >&2 || true
        return 1
    fi
    [[ -s "$dest/$artifact-$version_.jar" ]]
}

status=0
for coordinate in "${required[@]}"; do
    fetch "$coordinate" || status=1
done
for coordinate in "${optional[@]}"; do
    # A miss is remembered in DEST/.unavailable (delete it, or set DELTA_REFETCH=1, to retry).
    if [[ -z "${DELTA_REFETCH:-}" ]] && grep -qxF "$coordinate" "$dest/.unavailable" 2>/dev/null; then
        continue
    fi
    if ! fetch "$coordinate" 2>/dev/null; then
        echo "fetch-delta-jars.sh: optional $coordinate not available; the oracle server runs" \
            "without the Delta Connect plugins" >&2
        echo "$coordinate" >>"$dest/.unavailable"
    fi
done

if [[ $status -ne 0 ]]; then
    exit 1
fi
echo "$version" >"$dest/VERSION"
ls -1 "$dest"/*.jar
