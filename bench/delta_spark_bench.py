"""delta-spark next to delta_connect_py on one table: latency of the same questions.

    .venv/bin/python bench/delta_spark_bench.py TABLE_PATH [--repeat 3]
        [--remote sc://...] [--delta-spark-remote sc://...]

delta-spark side (a Spark Connect server with the jars from server/fetch-delta-jars.sh; started
here on port 15041 unless --delta-spark-remote is given): ``DESCRIBE DETAIL`` and the full file
listing (``spark.read.format("delta").load(path).inputFiles()``). Our side (the vanilla server:
--remote, else $SPARK_REMOTE, else the embedded default): ``DeltaTable.for_path(...).snapshot()``
and ``.state``, and our file listing (``all_files()`` paths). Each measurement is repeated;
run 1 is cold for delta-spark (its DeltaLog cache is empty), later runs hit that cache, while
every one of ours lists and replays the log afresh. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from delta_connect_py import DeltaTable, connect


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return times, result


def line(label: str, times: list[float], note: str = "") -> str:
    rest = f"median {statistics.median(times):7.3f}s" if len(times) > 1 else ""
    return f"{label:<42} first {times[0]:7.3f}s  {rest}  {note}".rstrip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--remote", help="vanilla server for delta_connect_py")
    parser.add_argument("--delta-spark-remote", help="running delta-spark Connect server")
    args = parser.parse_args(argv)
    path = str(Path(args.path).resolve()) if "://" not in args.path else args.path

    ours_spark = connect(args.remote)  # created first: it must stay pyspark's active session
    server = None
    remote = args.delta_spark_remote
    if remote is None:
        from tests.delta_spark_server import delta_spark_server

        server = delta_spark_server().start()
        remote = server.remote
    try:
        from pyspark.sql import SparkSession

        oracle = SparkSession.builder.remote(remote).create()

        def detail() -> Any:
            return oracle.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]

        def delta_files() -> list[str]:
            return list(oracle.read.format("delta").load(path).inputFiles())

        def our_state() -> Any:
            return DeltaTable.for_path(ours_spark, path).snapshot().state

        def our_files() -> list[str]:
            snapshot = DeltaTable.for_path(ours_spark, path).snapshot()
            return [r["path"] for r in snapshot.all_files().select("path").collect()]

        t_detail, d = timed(detail, args.repeat)
        t_files, files = timed(delta_files, args.repeat)
        t_state, state = timed(our_state, args.repeat)
        t_ours, ours = timed(our_files, args.repeat)
        print(
            f"table {path}: delta-spark numFiles={d.numFiles} sizeInBytes={d.sizeInBytes}; "
            f"ours num_of_files={state.num_of_files} size_in_bytes={state.size_in_bytes}"
        )
        print(line("delta-spark DESCRIBE DETAIL", t_detail))
        print(line("delta-spark file listing (inputFiles)", t_files, f"{len(files)} files"))
        print(line("ours snapshot().state (vanilla server)", t_state))
        print(line("ours snapshot().all_files() paths", t_ours, f"{len(ours)} files"))
        oracle.stop()
    finally:
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
