#!/usr/bin/env bash
# Fetch Hadoop's s3a connector matching the pip pyspark server into .s3a-jars/ (ignored):
#
#     server/fetch-s3a-jars.sh [DEST]
#
# For the object-store tests (tests/integration/object_store) and for users whose server reads
# s3a:// tables: pass the jars to the server as spark.jars (a comma-separated list; the script
# prints one path per line). Three artifacts, no transitive dependencies (everything else
# hadoop-aws needs is in pyspark's shaded hadoop-client jars):
#
#   org.apache.hadoop:hadoop-aws:<H>       H = the version of pyspark's hadoop-client-api jar
#   software.amazon.awssdk:bundle:<S>      S = hadoop-project <H>'s aws-java-sdk-v2.version
#   software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:<A>
#                                          A = hadoop-project <H>'s amazon-s3-analyticsaccelerator-s3.version
#
# S and A are read from the hadoop-project pom of H (fetched with the same Maven run), so a
# pyspark on another Hadoop picks the versions its hadoop-aws was built with. SPARK_HOME or
# PYSPARK_JARS (a folder) name pyspark's jars; by default .venv's pyspark.
#
# Cached: nothing is fetched when DEST/VERSION records H and every jar it names is present
# (~650 MB, mostly the SDK bundle). Maven caches in its local repository too.
# Exit status: 0 when every jar is in DEST, else 1 with the failing mvn command.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-$root/.s3a-jars}"

pyspark_jars() {
    if [[ -n "${PYSPARK_JARS:-}" ]]; then echo "$PYSPARK_JARS"; return; fi
    if [[ -n "${SPARK_HOME:-}" ]]; then echo "$SPARK_HOME/jars"; return; fi
    "$root/.venv/bin/python" -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")'
}

jars="$(pyspark_jars)"
hadoop="$(ls "$jars" | sed -n 's/^hadoop-client-api-\(.*\)\.jar$/\1/p' | head -n 1)"
[[ -n "$hadoop" ]] || { echo "fetch-s3a-jars.sh: no hadoop-client-api jar in $jars" >&2; exit 1; }
command -v mvn >/dev/null || { echo "fetch-s3a-jars.sh: mvn not found on PATH" >&2; exit 1; }

mkdir -p "$dest"
if [[ -f "$dest/VERSION" ]]; then
    if [[ "$(head -n 1 "$dest/VERSION")" == "$hadoop" ]]; then
        complete=1
        while read -r jar; do [[ -s "$dest/$jar" ]] || complete=0; done < <(tail -n +2 "$dest/VERSION")
        if [[ $complete == 1 ]]; then ls -1 "$dest"/*.jar; exit 0; fi
    else
        echo "fetch-s3a-jars.sh: $dest holds Hadoop $(head -n 1 "$dest/VERSION"); replacing with $hadoop" >&2
    fi
    rm -f "$dest"/*.jar "$dest"/*.pom "$dest/VERSION"
fi

# shellcheck source=server/maven-copy.sh
source "$root/server/maven-copy.sh"

copy() {  # copy TYPE GROUP:ARTIFACT:VERSION... into DEST, or exit
    maven_copy "$1" "$dest" "${@:2}" || exit 1
}

# The versions hadoop-aws was built against, from its parent pom's properties.
copy pom "org.apache.hadoop:hadoop-project:$hadoop"
property() {
    sed -n "s|.*<$1>\(.*\)</$1>.*|\1|p" "$dest/hadoop-project-$hadoop.pom" | head -n 1
}
sdk="$(property aws-java-sdk-v2.version)"
accelerator="$(property amazon-s3-analyticsaccelerator-s3.version)"
rm -f "$dest/hadoop-project-$hadoop.pom"
[[ -n "$sdk" ]] || { echo "fetch-s3a-jars.sh: no aws-java-sdk-v2.version in hadoop-project $hadoop" >&2; exit 1; }

coordinates=("org.apache.hadoop:hadoop-aws:$hadoop" "software.amazon.awssdk:bundle:$sdk")
# Hadoop releases before 3.4.2 have no analytics accelerator.
[[ -n "$accelerator" ]] && coordinates+=("software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:$accelerator")
copy jar "${coordinates[@]}"

{
    echo "$hadoop"
    for coordinate in "${coordinates[@]}"; do
        echo "$(cut -d: -f2 <<<"$coordinate")-$(cut -d: -f3 <<<"$coordinate").jar"
    done
} >"$dest/VERSION"
ls -1 "$dest"/*.jar
