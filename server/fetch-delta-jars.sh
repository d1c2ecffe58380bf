#!/usr/bin/env bash
# Fetch the delta-spark jars that match the pip pyspark 4.1 server into .delta-jars/ (ignored):
#
#     server/fetch-delta-jars.sh [DEST]
#
# These jars are for the tests' *oracle* server only (tests/delta_spark_server.py); the
# delta_connect_py client and its vanilla server never use them.
#
# The artifacts are copied exactly as listed (`mvn dependency:copy` of an artifactItems list in a
# throw-away pom, one Maven run; no transitive dependencies): everything delta-spark needs at run
# time besides these (scala-library, hadoop-client, parquet, jackson, RoaringBitmap) is already in
# pyspark's jars/, and a transitive copy would put second, conflicting versions of those on the
# class path. DELTA_VERSION (default 4.3.1) picks the release. delta-spark 4.1.0 and 4.2.0 are
# built against Spark 4.1.0 but do not run on pyspark 4.1.4: reading any checkpoint fails with
# NoSuchMethodError (ParquetToSparkSchemaConverter.<init>(ZZZZZZZ)V, a constructor Spark 4.1.4
# no longer has). 4.3.1, also built against Spark 4.1.0, calls the SQLConf constructor instead
# and works.
#
# Delta Connect (the server plugin) is NOT on Maven Central for any 4.x release, under either
# name Delta's build uses (io.delta:delta-connect-server_2.13 and, with the Spark suffix,
# io.delta:delta-connect-server_4.1_2.13; checked for 4.0.0 to 4.4.0): the oracle server runs
# Delta SQL and spark.read.format("delta") only. It is still tried, once per DEST (a miss is
# remembered in DEST/.unavailable; DELTA_REFETCH=1 retries), so a future release is picked up.
#
# Cached: nothing is fetched when DEST already holds every jar of DELTA_VERSION (DEST/VERSION
# records it; changing DELTA_VERSION empties DEST first). Maven itself caches in its local
# repository (~/.m2, or MAVEN_OPTS=-Dmaven.repo.local=...); on a fresh machine, with an empty
# local repository, a fetch from Maven Central takes ~20 s (mostly Maven's own plugins; the
# dependency plugin is pinned to 2.8, Maven 3's default and the smallest download).
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
    rm -f "$dest"/*.jar "$dest/.unavailable" "$dest/VERSION"
fi

jar_of() {  # GROUP:ARTIFACT:VERSION -> DEST/ARTIFACT-VERSION.jar
    local artifact version_
    artifact="$(cut -d: -f2 <<<"$1")"
    version_="$(cut -d: -f3 <<<"$1")"
    echo "$dest/$artifact-$version_.jar"
}

missing() {  # the coordinates among "$@" whose jar is not in DEST yet
    local coordinate
    for coordinate in "$@"; do
        [[ -s "$(jar_of "$coordinate")" ]] || echo "$coordinate"
    done
}

# shellcheck source=server/maven-copy.sh
source "$root/server/maven-copy.sh"

copy() {  # copy COORDINATE... -> 0 if every jar is in DEST afterwards
    maven_copy jar "$dest" "$@" || return 1
    [[ -z "$(missing "$@")" ]]
}

mapfile -t todo < <(missing "${required[@]}")
if [[ ${#todo[@]} -gt 0 ]]; then
    copy "${todo[@]}" || exit 1
fi

if [[ -n "${DELTA_REFETCH:-}" ]]; then
    rm -f "$dest/.unavailable"
fi
mapfile -t todo < <(missing "${optional[@]}")
if [[ ${#todo[@]} -gt 0 ]] && ! grep -qxF "${todo[0]}" "$dest/.unavailable" 2>/dev/null; then
    if ! copy "${todo[@]}" 2>/dev/null; then
        echo "fetch-delta-jars.sh: optional ${todo[*]} not on Maven Central; the oracle" \
            "server runs without the Delta Connect plugins" >&2
        printf '%s\n' "${todo[@]}" >>"$dest/.unavailable"
    fi
fi

echo "$version" >"$dest/VERSION"
ls -1 "$dest"/*.jar
