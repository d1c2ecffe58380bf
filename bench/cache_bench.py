"""The snapshot cache: a notebook asking a table the same question again, with and without it.

    .venv/bin/python bench/cache_bench.py TABLE [TABLE ...] [--rounds 5] [--remote sc://...]
        [--delta-spark-remote sc://...]

Each table's ``_delta_log`` is copied to a temporary folder (the input is never written). After
a warm-up, every round times, in this order, on the same server:

- ``after commit, cached``: one commit appended (the last commit's adds under new names, as in
  ``update_bench.py``), then ``DeltaTable.for_path(...).snapshot().state`` with the cache;
- ``after commit, delta-spark``: another commit appended, then delta-spark's ``DESCRIBE
  DETAIL`` (its DeltaLog cache lists and replays the new commit), when ``--delta-spark-remote``
  names a server with the Delta jars (ours may run there too: it needs nothing installed);
- ``unchanged, cached``: ``snapshot().state`` again, the log unchanged;
- ``unchanged, delta-spark``: ``DESCRIBE DETAIL`` again;
- ``no cache``: ``snapshot().state`` with ``snapshot_cache=False`` (a listing, the P&M job
  and the state replay, whatever changed).

Prints one line per measurement (median of the rounds, and every round), the median of the
per-round ratio of ours after a commit to delta-spark's, and checks that the cached state
equals the uncached one in every round. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.update_bench import append_commit


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def bench_table(spark: Any, oracle: Any, source: Path, rounds: int) -> dict[str, Any]:
    from delta_connect_py import DeltaTable

    with tempfile.TemporaryDirectory(prefix="cache-bench-") as tmp:
        root = Path(tmp) / "table"
        log = root / "_delta_log"
        shutil.copytree(source / "_delta_log", log)
        path = str(root)
        version = max(int(p.name.split(".")[0]) for p in log.glob("*.json"))

        def cached() -> Any:
            return DeltaTable.for_path(spark, path).snapshot().state

        def uncached() -> Any:
            return DeltaTable.for_path(spark, path, snapshot_cache=False).snapshot().state

        def detail() -> Any:
            return oracle.sql(f"DESCRIBE DETAIL delta.`{path}`").collect()[0]

        def commit() -> None:
            nonlocal version
            version += 1
            append_commit(log, version)

        for _ in range(2):  # warm-up: the server's plans and Python workers, delta-spark's cache
            cached(), uncached()
            if oracle is not None:
                detail()
        times: dict[str, list[float]] = {}
        ratios: list[float] = []
        for _ in range(rounds):
            commit()
            after_commit, state = timed(cached)
            times.setdefault("after commit, cached", []).append(after_commit)
            if oracle is not None:
                commit()
                ds_after_commit, _ = timed(detail)
                times.setdefault("after commit, delta-spark", []).append(ds_after_commit)
                ratios.append(after_commit / ds_after_commit)
                state = cached()  # the second commit, untimed
            unchanged, again = timed(cached)
            times.setdefault("unchanged, cached", []).append(unchanged)
            if oracle is not None:
                times.setdefault("unchanged, delta-spark", []).append(timed(detail)[0])
            fresh, expected = timed(uncached)
            times.setdefault("no cache", []).append(fresh)
            if not (again is state and _same(state, expected)):
                raise AssertionError(f"cached state differs from a fresh one at {version}")
    result: dict[str, Any] = {"table": str(source), "version": version, "rounds": rounds}
    for label, series in times.items():
        result[label] = {"median": round(statistics.median(series), 3), "rounds": _r(series)}
    if ratios:
        result["after commit: ours / delta-spark (median of rounds)"] = round(
            statistics.median(ratios), 2
        )
    return result


def _same(a: Any, b: Any) -> bool:
    fields = ("num_of_files", "size_in_bytes", "num_of_removes", "metadata", "protocol")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def _r(series: list[float]) -> list[float]:
    return [round(s, 3) for s in series]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--remote", default=os.environ.get("SPARK_REMOTE"))
    parser.add_argument("--delta-spark-remote", help="a server with the Delta jars")
    args = parser.parse_args(argv)

    from delta_connect_py import connect

    spark = connect(args.remote)
    oracle = None
    if args.delta_spark_remote:
        from pyspark.sql import SparkSession

        oracle = SparkSession.builder.remote(args.delta_spark_remote).create()
    print(json.dumps({"load_average_at_start": os.getloadavg()}), flush=True)
    for path in args.paths:
        print(json.dumps(bench_table(spark, oracle, Path(path), args.rounds)), flush=True)
    print(json.dumps({"load_average_at_end": os.getloadavg()}), flush=True)
    if oracle is not None:
        oracle.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
