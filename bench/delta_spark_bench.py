"""delta-spark next to delta_connect_py on the same tables: latency of the same questions.

    .venv/bin/python bench/delta_spark_bench.py [TABLE_PATH ...] [--repeat 3]
        [--remote sc://...] [--delta-spark-remote sc://...]

TABLE_PATHs default to the shared bench tables /tmp/bench/S, /tmp/bench/M and /tmp/bench/L
(``../shared/bench/gen_log.py``; logs only, no data files). Nothing is written to them.

delta-spark side: a Spark Connect server with the jars from server/fetch-delta-jars.sh (started
here once for all tables, on $DELTA_SPARK_PORT or a free port, unless --delta-spark-remote is
given). Delta Connect's own plugin (``DeltaTable`` over Connect) is not on Maven Central, so
the questions are asked as Delta SQL and ``format("delta")`` over plain Spark Connect:
``DESCRIBE DETAIL`` (numFiles, sizeInBytes) and the full file listing
(``spark.read.format("delta").load(path).inputFiles()``, every path brought to the client;
``input_file_name()`` would need the data files, which the bench tables do not have).

Our side (the vanilla server: --remote, else $SPARK_REMOTE, else the embedded default):
``DeltaTable.for_path(path).snapshot().state`` (the same numbers as DESCRIBE DETAIL) and our
file listing (``all_files()`` paths, brought to the client).

Each measurement is repeated; run 1 is cold for delta-spark (its DeltaLog cache is empty; a
fresh DeltaLog per table), later runs hit that cache, while every one of ours lists and
replays the log afresh. Prints one line per (table, reader) with first and median seconds, then
a summary table. Not a test; a run on a loaded machine is noisy (check ``uptime``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from delta_connect_py import DeltaTable, connect

DEFAULT_TABLES = ["/tmp/bench/S", "/tmp/bench/M", "/tmp/bench/L"]


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    """Seconds of each run and the last result; a failing run ends the series (the exception
    is the result, printed in its line)."""
    times: list[float] = []
    result: Any = None
    for _ in range(repeat):
        started = time.perf_counter()
        try:
            result = fn()
        except Exception as exc:  # a bench line, not a test: report and go on
            times.append(time.perf_counter() - started)
            return times, exc
        times.append(time.perf_counter() - started)
    return times, result


def size_note(result: Any, attribute: str = "") -> str:
    if isinstance(result, Exception):
        return f"FAILED: {type(result).__name__}: {str(result).splitlines()[0][:160]}"
    value = getattr(result, attribute) if attribute else len(result)
    return f"{attribute or 'files'}={value}"


def median(times: list[float]) -> float:
    return statistics.median(times[1:] if len(times) > 1 else times)


def line(label: str, times: list[float], note: str = "") -> str:
    rest = f"median(2..) {median(times):7.3f}s" if len(times) > 1 else ""
    return f"  {label:<40} first {times[0]:7.3f}s  {rest}  {note}".rstrip()


def bench_table(oracle: Any, ours_spark: Any, path: str, repeat: int) -> dict[str, Any]:
    def detail() -> Any:
        return oracle.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]

    def delta_files() -> list[str]:
        return list(oracle.read.format("delta").load(path).inputFiles())

    def our_state() -> Any:
        return DeltaTable.for_path(ours_spark, path).snapshot().state

    def our_files() -> list[str]:
        snapshot = DeltaTable.for_path(ours_spark, path).snapshot()
        return [r["path"] for r in snapshot.all_files().select("path").collect()]

    print(f"table {path}", flush=True)
    t_detail, d = timed(detail, repeat)
    print(line("delta-spark DESCRIBE DETAIL", t_detail, size_note(d, "numFiles")), flush=True)
    t_files, files = timed(delta_files, repeat)
    print(line("delta-spark file listing (inputFiles)", t_files, size_note(files)), flush=True)
    t_state, state = timed(our_state, repeat)
    print(line("ours snapshot().state", t_state, size_note(state, "num_of_files")), flush=True)
    t_ours, our_paths = timed(our_files, repeat)
    print(line("ours snapshot().all_files() paths", t_ours, size_note(our_paths)), flush=True)
    if not any(isinstance(r, Exception) for r in (d, files, state, our_paths)):
        same = (d.numFiles, d.sizeInBytes) == (state.num_of_files, state.size_in_bytes)
        counts = len(files) == len(our_paths)
        print(f"  same numFiles/sizeInBytes: {same}; same file count: {counts}")
    return {
        "table": path,
        "files": getattr(d, "numFiles", "?"),
        "detail": t_detail,
        "delta_files": t_files,
        "state": t_state,
        "our_files": t_ours,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_TABLES)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--remote", help="vanilla server for delta_connect_py")
    parser.add_argument("--delta-spark-remote", help="running delta-spark Connect server")
    args = parser.parse_args(argv)
    paths = [str(Path(p).resolve()) if "://" not in p else p for p in args.paths]
    print(f"load average at start: {os.getloadavg()}", flush=True)

    ours_spark = connect(args.remote)  # created first: it must stay pyspark's active session
    server = None
    remote = args.delta_spark_remote
    if remote is None:
        from tests.delta_spark_server import delta_spark_server

        port = int(os.environ.get("DELTA_SPARK_PORT", "0")) or None
        server = delta_spark_server(port, fast_start=False)
        server.driver_memory = os.environ.get("DELTA_SPARK_DRIVER_MEMORY", "4g")
        server.start()
        remote = server.remote
    results = []
    try:
        from pyspark.sql import SparkSession

        oracle = SparkSession.builder.remote(remote).create()
        for path in paths:
            results.append(bench_table(oracle, ours_spark, path, args.repeat))
        oracle.stop()
    finally:
        if server is not None:
            server.stop()
    print(f"load average at end: {os.getloadavg()}")
    print()
    print("| table | files | delta-spark DESCRIBE DETAIL | delta-spark inputFiles |", end="")
    print(" ours state | ours all_files paths |")
    print("|---|---|---|---|---|---|")
    for r in results:
        cells = [
            f"{r[k][0]:.1f} s / {median(r[k]):.1f} s"
            for k in ("detail", "delta_files", "state", "our_files")
        ]
        print(f"| {Path(r['table']).name} | {r['files']} | " + " | ".join(cells) + " |")
    print("(first run / median of the later runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
