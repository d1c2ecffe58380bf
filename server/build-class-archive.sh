#!/usr/bin/env bash
# Image build step: a class archive (Java's class data sharing) of the Spark Connect server's
# classes, which entrypoint.sh maps at every start instead of loading them from ~300 jars, as the
# embedded server does (delta_connect_py/class_archive.py).
#
#     build-class-archive.sh ARCHIVE [PORT]
#
# Starts the server once (entrypoint.sh on 127.0.0.1:PORT, default 15002) with
# -XX:DumpLoadedClassList, waits until its port opens (the server has loaded its classes), stops
# it, and dumps the recorded classes over the server JVM's own class path into ARCHIVE. A dump
# that fails leaves no ARCHIVE (the server then starts without one) and fails nothing: the
# archive only makes starts faster.
set -euo pipefail

archive=$1
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
port="${2:-15002}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
list="$work/classes.lst"

SPARK_DRIVER_MEMORY=1g DELTA_CONNECT_BIND=127.0.0.1 DELTA_CONNECT_PORT="$port" \
    "$here/entrypoint.sh" --conf "spark.driver.defaultJavaOptions=-XX:DumpLoadedClassList=$list" \
    >"$work/server.log" 2>&1 &
server=$!  # entrypoint.sh and spark-submit exec: this becomes the server's JVM

for _ in $(seq 600); do
    if (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        break
    fi
    if ! kill -0 "$server" 2>/dev/null; then
        echo "build-class-archive: the server exited while starting; no class archive" >&2
        tail -n 20 "$work/server.log" >&2
        exit 0
    fi
    sleep 0.5
done
class_path="$(tr '\0' '\n' <"/proc/$server/cmdline" | sed -n '/^-cp$/{n;p;q}')"
kill -TERM "$server"
wait "$server" || true

if [[ -n "$class_path" ]] && java -Xshare:dump "-XX:SharedClassListFile=$list" \
    "-XX:SharedArchiveFile=$archive.partial" -cp "$class_path" \
    --add-modules=jdk.incubator.vector >"$work/dump.log" 2>&1; then
    mv "$archive.partial" "$archive"
    echo "build-class-archive: $archive ($(du -h "$archive" | cut -f1))"
else
    rm -f "$archive.partial"
    echo "build-class-archive: the dump failed; no class archive" >&2
    tail -n 20 "$work/dump.log" >&2
fi
