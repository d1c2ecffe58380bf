#!/usr/bin/env bash
# Container entrypoint: a vanilla Spark Connect server from pip's pyspark, in the foreground.
#
# Settings come from spark-defaults.conf beside this script (same as the embedded server's
# SERVER_CONF). The Python workers run $PYSPARK_PYTHON, the only setting a Connect server's
# workers follow; it must be the client's Python minor version (3.11) with pyarrow and pandas.
# Environment: DELTA_CONNECT_BIND (default 0.0.0.0), DELTA_CONNECT_PORT (default 15002),
# SPARK_DRIVER_MEMORY (default 4g; the whole heap is committed at start, as the embedded
# server does: see embedded.fixed_heap_options). Spark's classes are mapped from the image's
# class archive when it has one (build-class-archive.sh). Extra arguments are passed to
# spark-submit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
conf="${DELTA_CONNECT_SPARK_CONF:-$here/spark-defaults.conf}"
submit="${SPARK_HOME:+$SPARK_HOME/bin/}spark-submit"
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-python3}"
java_options="-Xms${SPARK_DRIVER_MEMORY:-4g}"
# The image's class archive (build-class-archive.sh), mapped when present.
archive="$here/spark.jsa"
if [[ -f "$archive" ]]; then
    java_options+=" -XX:SharedArchiveFile=$archive"
fi

exec "$submit" \
    --class org.apache.spark.sql.connect.service.SparkConnectServer \
    --name delta-connect-py \
    --properties-file "$conf" \
    --driver-memory "${SPARK_DRIVER_MEMORY:-4g}" \
    --conf "spark.driver.defaultJavaOptions=$java_options" \
    --conf "spark.connect.grpc.binding.address=${DELTA_CONNECT_BIND:-0.0.0.0}" \
    --conf "spark.connect.grpc.binding.port=${DELTA_CONNECT_PORT:-15002}" \
    "$@" \
    spark-internal
