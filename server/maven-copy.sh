#!/usr/bin/env bash
# Sourced by server/fetch-*-jars.sh: copy artifacts from Maven Central into a folder.
#
#     maven_copy TYPE DEST GROUP:ARTIFACT:VERSION[:CLASSIFIER]...
#
# mvn needs a project, so a throw-away pom in a scratch folder lists the artifacts and
# maven-dependency-plugin's `copy` puts each ARTIFACT-VERSION[-CLASSIFIER].TYPE into DEST. `-U` makes mvn ask
# Maven Central again for an artifact it failed to find earlier (it caches that failure).
# Returns 1, after printing the mvn command and its errors on stderr, when mvn fails.

maven_copy() {
    local type="$1" dest="$2" coordinate items="" group artifact version_ classifier scratch
    local status=0
    shift 2
    for coordinate in "$@"; do
        IFS=: read -r group artifact version_ classifier <<<"$coordinate"
        items+="<artifactItem><groupId>$group</groupId><artifactId>$artifact</artifactId>"
        items+="<version>$version_</version><type>$type</type>"
        [[ -z "$classifier" ]] || items+="<classifier>$classifier</classifier>"
        items+="</artifactItem>"
    done
    scratch="$(mktemp -d)"
    cat >"$scratch/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local</groupId><artifactId>maven-copy</artifactId><version>0</version>
  <packaging>pom</packaging>
  <build><plugins><plugin>
    <groupId>org.apache.maven.plugins</groupId><artifactId>maven-dependency-plugin</artifactId>
    <version>2.8</version>
    <configuration>
      <artifactItems>$items</artifactItems>
      <outputDirectory>$dest</outputDirectory>
      <overWriteReleases>false</overWriteReleases>
    </configuration>
  </plugin></plugins></build>
</project>
POM
    local cmd=(mvn -q -B -U dependency:copy)
    if ! (cd "$scratch" && "${cmd[@]}") >"$scratch/mvn.log" 2>&1; then
        echo "maven_copy: failed: ${cmd[*]} for: $*" >&2
        grep -E "ERROR" "$scratch/mvn.log" | head -5 >&2 || true
        status=1
    fi
    rm -rf "$scratch"
    return "$status"
}
