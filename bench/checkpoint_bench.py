"""Benchmark (not a test): our server-side checkpoint vs delta-rs ``create_checkpoint``.

Usage::

    python /work/shared/bench/gen_log.py /tmp/bench/S --force --with-stats --files 10000 \\
        --commits 1000 --partitions 100 --txn-apps 4 --seed 1
    python bench/checkpoint_bench.py /tmp/bench/S --remote sc://127.0.0.1:15002 [--repeat 3]

The source table is never written: each writer gets its own copy under ``--work`` (default a
fresh ``/tmp/ckpt-bench-*`` folder, removed afterwards), made once and reset between runs
(every log file the run added is deleted and ``_last_checkpoint`` restored). The copy keeps the
source's checkpoints, so both writers start from the same newest checkpoint;
``--without-checkpoints`` drops them (both then replay every commit). ``--steady-state`` first
checkpoints each copy with our writer and adds one commit, untimed: the timed checkpoints then
start from a checkpoint holding typed stats (``stats_parsed``), as after delta-spark's
(unless ``--stats-as-struct false``).
``--stats-as-struct true|false`` first sets ``delta.checkpoint.writeStatsAsStruct`` on both
copies (a delta-rs ``ALTER``, untimed), so that both writers write the same columns: unset, we
write ``stats_parsed`` (delta-spark's default) and delta-rs does not (PROTOCOL.md's default).

Prints, per writer, the median seconds and every run; for ours also the phases (snapshot:
listing and protocol/metadata; write: everything ``create_checkpoint`` does after it: the
replay, computedState where the layout needs it first, the parquet, rename and hint), the
checkpoint's action count, and whether delta-rs loads our result. The ratio is the median of
each run's ratio (ours against delta-rs's run right after it), so that the machine's speed
drifting during a run moves both sides of a ratio alike.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _copy(source: Path, target: Path, without_checkpoints: bool) -> None:
    ignore = shutil.ignore_patterns("*.checkpoint*", "_last_*") if without_checkpoints else None
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target, ignore=ignore)


def _log_files(log: Path) -> set[str]:
    return {str(p.relative_to(log)) for p in log.rglob("*") if p.is_file()}


def _reset(copy: Path, pristine: set[str], hint: bytes | None) -> None:
    """Delete every log file a run added and restore the hint: the copy as it was."""
    log = copy / "_delta_log"
    for name in _log_files(log) - pristine:
        (log / name).unlink()
    for folder in sorted((p for p in log.rglob("*") if p.is_dir()), reverse=True):
        if not any(folder.iterdir()):
            folder.rmdir()
    if hint is None:
        (log / "_last_checkpoint").unlink(missing_ok=True)
    else:
        (log / "_last_checkpoint").write_bytes(hint)


def _ours(spark: Any, copy: Path, part_size: int | None) -> tuple[dict[str, float], Any]:
    """create_checkpoint's own steps, timed one by one."""
    from delta_connect_py import DeltaTable
    from delta_connect_py.checkpoints import write_checkpoint

    phases: dict[str, float] = {}
    start = time.perf_counter()
    snapshot = DeltaTable.for_path(spark, str(copy)).snapshot()
    phases["snapshot"] = time.perf_counter() - start
    result = write_checkpoint(snapshot, part_size)
    snapshot.unpersist()
    phases["total"] = time.perf_counter() - start
    phases["write"] = phases["total"] - phases["snapshot"]
    return phases, result


def _theirs(copy: Path) -> float:
    import deltalake

    start = time.perf_counter()
    deltalake.DeltaTable(str(copy)).create_checkpoint()
    return time.perf_counter() - start


def _steady_state(spark: Any, copy: Path) -> None:
    """Checkpoint the copy's latest version with our writer (typed stats included unless the
    table turns them off, as delta-spark writes them), then add one commit copying two adds of
    the newest commit that has any: the next checkpoint starts from it."""
    import json

    from delta_connect_py import DeltaTable
    from delta_connect_py.protocol.filenames import commit_name

    table = DeltaTable.for_path(spark, str(copy))
    version = table.create_checkpoint().version
    adds: list[dict[str, Any]] = []
    for earlier in range(version, -1, -1):  # the newest commit that adds files
        lines = (copy / "_delta_log" / commit_name(earlier)).read_text().splitlines()
        adds = [json.loads(line) for line in lines if line.startswith('{"add"')][:2]
        if adds:
            break
    for number, action in enumerate(adds):
        action["add"]["path"] = f"steady-state-{number}.parquet"
    lines = [json.dumps(action) for action in adds]
    (copy / "_delta_log" / commit_name(version + 1)).write_text("\n".join(lines) + "\n")


def _set_stats_as_struct(copy: Path, value: str) -> None:
    import deltalake

    properties = {"delta.checkpoint.writeStatsAsStruct": value}
    deltalake.DeltaTable(str(copy)).alter.set_table_properties(properties)


def _prepare(
    source: Path,
    target: Path,
    without: bool,
    steady_state: Callable[[Path], None] | None = None,
    stats_as_struct: str | None = None,
) -> tuple[set[str], bytes | None]:
    _copy(source, target, without)
    if stats_as_struct is not None:
        _set_stats_as_struct(target, stats_as_struct)
    if steady_state is not None:
        steady_state(target)
    # The copy's dirty pages would otherwise be written back during the first timed run.
    os.sync()
    hint = target / "_delta_log" / "_last_checkpoint"
    return _log_files(target / "_delta_log"), hint.read_bytes() if hint.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("table", type=Path)
    parser.add_argument(
        "--remote",
        default=os.environ.get("SPARK_REMOTE"),
        help="Spark Connect server (default $SPARK_REMOTE, else the embedded server)",
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--part-size", type=int, default=None)
    parser.add_argument("--without-checkpoints", action="store_true")
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument(
        "--steady-state",
        action="store_true",
        help="first checkpoint the copy with our writer and add one commit (untimed)",
    )
    parser.add_argument(
        "--stats-as-struct",
        choices=("true", "false"),
        default=None,
        help="set delta.checkpoint.writeStatsAsStruct on both copies first (untimed)",
    )
    args = parser.parse_args()

    import deltalake

    from delta_connect_py import connect

    spark = connect(args.remote)
    spark.range(1).collect()  # the session's first job pays start-up costs: not ours to time
    work = args.work or Path(tempfile.mkdtemp(prefix="ckpt-bench-", dir="/tmp"))
    ours_copy, theirs_copy = work / "ours", work / "delta-rs"
    try:
        steady = (lambda copy: _steady_state(spark, copy)) if args.steady_state else None
        ours_state, theirs_state = (
            _prepare(args.table, copy, args.without_checkpoints, steady, args.stats_as_struct)
            for copy in (ours_copy, theirs_copy)
        )
        runs: list[dict[str, float]] = []
        theirs: list[float] = []
        result = loaded = None
        for _ in range(args.repeat):
            _reset(ours_copy, *ours_state)
            phases, result = _ours(spark, ours_copy, args.part_size)
            runs.append(phases)
            loaded = deltalake.DeltaTable(str(ours_copy))
            loaded_files = len(loaded.get_add_actions())
            _reset(theirs_copy, *theirs_state)
            theirs.append(_theirs(theirs_copy))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    ours = [run["total"] for run in runs]
    print(f"table: {args.table}")
    print(f"checkpoint: {result and dataclasses.replace(result, last_checkpoint=None, paths=())}")
    print(f"delta-rs loads ours: version {loaded and loaded.version()}, {loaded_files} files")
    for phase in ("snapshot", "write"):
        values = [round(run[phase], 2) for run in runs]
        print(f"  ours {phase:<8} median {statistics.median(values):.2f} s {values}")
    median_ours, median_theirs = statistics.median(ours), statistics.median(theirs)
    print(f"delta_connect_py create_checkpoint: median {median_ours:.2f} s {ours}")
    print(f"delta-rs create_checkpoint:        median {median_theirs:.2f} s {theirs}")
    ratios = [round(mine / other, 2) for mine, other in zip(ours, theirs, strict=True)]
    print(f"ratio ours / delta-rs: {statistics.median(ratios):.2f}x (runs {ratios})")


if __name__ == "__main__":
    main()
