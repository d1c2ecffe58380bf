"""Snapshot benchmark: delta_connect_py vs delta-rs vs a pyarrow lower bound, one table.

Runs ``--repeat`` rounds; a round runs every reader once, each in a fresh process, one after
the other. Then prints one JSON line per reader: seconds (median over the rounds, and each
round's), the peak RSS of its processes, and its ratio to delta-rs: the median of the rounds'
ratios, each taken against delta-rs in the same round, so that the machine's speed drifting
during a run (delta-rs alone took 5.3-9.4 s on L within one hour) moves both sides of a ratio
alike. A benchmark, not a test: it asserts nothing.

Before the rounds, ``--warmup`` runs (default 10) of our full-state reader go untimed: a
freshly started server JVM is still compiling Spark's hot paths, and a fresh L snapshot took
12-13 s on the first run, 3.0-3.4 s by the fifth and 2.2-2.4 s after about twenty. What users
of a long-lived server see is the warm figure.

    python bench/run.py /tmp/bench/S --remote sc://127.0.0.1:15002
    python ../shared/bench/gen_log.py /tmp/bench/S --force --with-stats --files 10000 \\
        --commits 1000 --partitions 100 --txn-apps 4 --seed 1     # makes the S table
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

READERS = ("delta_rs", "delta_connect_py", "delta_connect_py_pm", "pyarrow_baseline")


def run_delta_connect_py(path: str, remote: str, full_state: bool) -> dict[str, object]:
    from delta_connect_py import DeltaTable, connect

    spark = connect(remote)
    started = time.perf_counter()
    snapshot = DeltaTable.for_path(spark, path).snapshot()
    result: dict[str, object] = {"version": snapshot.version, "schema_fields": len(snapshot.schema)}
    if full_state:
        result["live_files"] = snapshot.state.num_of_files
    result["seconds"] = time.perf_counter() - started
    return result


def run_delta_rs(path: str) -> dict[str, object]:
    from deltalake import DeltaTable

    started = time.perf_counter()
    table = DeltaTable(path)
    live = table.get_add_actions().num_rows
    return {
        "version": table.version(),
        "live_files": live,
        "seconds": time.perf_counter() - started,
    }


def run_pyarrow_baseline(path: str) -> dict[str, object]:
    """Least possible work: read the newest checkpoint and later commits, keep the last action
    per path. Ignores DVs, tombstone retention and everything else replay must do."""
    import pyarrow.compute as pc
    import pyarrow.json as pj
    import pyarrow.parquet as pq

    started = time.perf_counter()
    log = os.path.join(path, "_delta_log")
    names = sorted(os.listdir(log))
    checkpoints = [n for n in names if n.endswith(".checkpoint.parquet")]
    cp_version = int(checkpoints[-1].split(".")[0]) if checkpoints else -1
    live: dict[str, bool] = {}
    if checkpoints:
        add = pq.read_table(os.path.join(log, checkpoints[-1]), columns=["add"])["add"]
        for p in pc.struct_field(add, "path").drop_null().to_pylist():
            live[p] = True
    commits = [
        n for n in names if n.endswith(".json") and n[:20].isdigit() and int(n[:20]) > cp_version
    ]
    for name in commits:
        table = pj.read_json(os.path.join(log, name))
        for column, alive in (("add", True), ("remove", False)):
            if column in table.column_names:
                for p in pc.struct_field(table[column], "path").drop_null().to_pylist():
                    live[p] = alive
    return {"live_files": sum(live.values()), "seconds": time.perf_counter() - started}


def child(reader: str, path: str, remote: str) -> None:
    if reader == "delta_connect_py":
        result = run_delta_connect_py(path, remote, full_state=True)
    elif reader == "delta_connect_py_pm":
        result = run_delta_connect_py(path, remote, full_state=False)
    elif reader == "delta_rs":
        result = run_delta_rs(path)
    else:
        result = run_pyarrow_baseline(path)
    print(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--remote", default=os.environ.get("SPARK_REMOTE", "sc://127.0.0.1:15002"))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs of ours first")
    parser.add_argument(
        "--readers",
        default=",".join(READERS),
        help="comma-separated subset of " + ", ".join(READERS) + " (delta_rs is always run)",
    )
    parser.add_argument("--child", choices=READERS)
    args = parser.parse_args()
    readers = _chosen_readers(args.readers)
    if args.child:
        child(args.child, args.path, args.remote)
        return 0
    warmup = [
        _measure_with_rss("delta_connect_py", args.path, args.remote) for _ in range(args.warmup)
    ]
    print(json.dumps({"warmup_seconds": [round(float(r["seconds"]), 2) for r, _ in warmup]}))  # type: ignore[arg-type]
    rounds = [
        {reader: _measure_with_rss(reader, args.path, args.remote) for reader in readers}
        for _ in range(args.repeat)
    ]
    for reader in readers:
        runs = [measured[reader] for measured in rounds]
        seconds = [float(result["seconds"]) for result, _ in runs]  # type: ignore[arg-type]
        ratios = [
            float(measured[reader][0]["seconds"])  # type: ignore[arg-type]
            / float(measured["delta_rs"][0]["seconds"])  # type: ignore[arg-type]
            for measured in rounds
        ]
        print(
            json.dumps(
                {
                    "table": args.path,
                    "reader": reader,
                    "seconds": round(statistics.median(seconds), 3),
                    "peak_rss_mb": round(max(rss for _, rss in runs), 1),
                    "ratio_to_delta_rs": round(statistics.median(ratios), 2),
                    "rounds_seconds": [round(value, 2) for value in seconds],
                    "rounds_ratio": [round(value, 2) for value in ratios],
                    "result": runs[-1][0],
                }
            ),
            flush=True,
        )
    return 0


def _chosen_readers(spec: str) -> tuple[str, ...]:
    """The readers named in ``spec``, in ``READERS`` order; delta-rs always (every ratio's base)."""
    named = {name.strip() for name in spec.split(",") if name.strip()}
    unknown = named - set(READERS)
    if unknown:
        raise SystemExit(f"unknown readers {sorted(unknown)}; choose from {', '.join(READERS)}")
    return tuple(reader for reader in READERS if reader in named or reader == "delta_rs")


def _measure_with_rss(reader: str, path: str, remote: str) -> tuple[dict[str, object], float]:
    """Run one reader in a fresh process: its result and that process's peak RSS in MB."""
    process = subprocess.Popen(
        [sys.executable, __file__, "--child", reader, path, "--remote", remote],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    stdout = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{reader} failed with exit code {process.returncode}")
    return json.loads(stdout.strip().splitlines()[-1]), usage.ru_maxrss / 1024


if __name__ == "__main__":
    sys.exit(main())
