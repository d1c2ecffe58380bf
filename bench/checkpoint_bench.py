"""Benchmark (not a test): our server-side checkpoint vs delta-rs ``create_checkpoint``.

Usage::

    python /work/shared/bench/gen_log.py /tmp/bench/S --force --with-stats --files 10000 \\
        --commits 1000 --partitions 100 --txn-apps 4 --seed 1
    SPARK_REMOTE=sc://127.0.0.1:15010 python bench/checkpoint_bench.py /tmp/bench/S [--repeat 3]

Each run works on a fresh copy of the table (the source is never written) and prints the median
seconds of each writer, the checkpoint's action count and whether delta-rs loads our result.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def _fresh_copy(source: Path, work: Path, name: str) -> Path:
    target = work / name
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.checkpoint*", "_last_*"))
    return target


def _time(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("table", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--part-size", type=int, default=None)
    args = parser.parse_args()

    import deltalake

    from delta_connect_py import DeltaTable, connect

    spark = connect()
    ours: list[float] = []
    theirs: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        for _ in range(args.repeat):
            copy = _fresh_copy(args.table, work, "ours")
            table = DeltaTable.for_path(spark, str(copy))
            result = None

            def run_ours(table: DeltaTable = table) -> None:
                nonlocal result
                result = table.create_checkpoint(part_size=args.part_size)

            ours.append(_time(run_ours))
            loaded = deltalake.DeltaTable(str(copy))
            copy = _fresh_copy(args.table, work, "delta-rs")
            theirs.append(
                _time(lambda copy=copy: deltalake.DeltaTable(str(copy)).create_checkpoint())
            )
    print(f"table: {args.table}")
    print(f"checkpoint: {result and dataclasses.replace(result, last_checkpoint=None)}")
    print(f"delta-rs loads ours: version {loaded.version()}, {len(loaded.get_add_actions())} files")
    print(f"delta_connect_py create_checkpoint: median {statistics.median(ours):.2f} s {ours}")
    print(f"delta-rs create_checkpoint:        median {statistics.median(theirs):.2f} s {theirs}")


if __name__ == "__main__":
    main()
