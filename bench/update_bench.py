"""Snapshot.update() benchmark: a polling loop's snapshots, each built on the previous state.

Copies the table's ``_delta_log`` to a temporary directory (the input is never written), takes
the latest snapshot and its state, then ``--updates`` times: appends one commit (the last
commit's adds under new file names), times ``update()`` (a snapshot ready to query: listing, P&M
of the new commit) and then its computedState (the new commit's replay and the state query), as
a poller reading the state after each commit would. A fresh ``snapshot()`` of the last version
follows for comparison. Prints one JSON line. A benchmark, not a test: it asserts nothing.

    python bench/update_bench.py /tmp/bench/L --remote sc://127.0.0.1:15002
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
from pathlib import Path


def new_commit_from(last_commit: Path, version: int) -> str:
    """The adds of ``last_commit`` as new files (renamed paths), plus a commitInfo."""
    lines = [
        json.dumps({"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}})
    ]
    for line in last_commit.read_text().splitlines():
        action = json.loads(line)
        if "add" in action:
            add = action["add"]
            add["path"] = add["path"].replace("part-", f"part-v{version}-")
            lines.append(json.dumps({"add": add}))
    return "\n".join(lines) + "\n"


def append_commit(log: Path, version: int) -> None:
    commits = sorted(log.glob("*.json"))
    (log / f"{version:020d}.json").write_text(new_commit_from(commits[-1], version))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--remote", default=os.environ.get("SPARK_REMOTE", "sc://127.0.0.1:15002"))
    parser.add_argument("--updates", type=int, default=6, help="commits appended, one at a time")
    args = parser.parse_args()

    from delta_connect_py import DeltaTable, connect

    spark = connect(args.remote)
    with tempfile.TemporaryDirectory(prefix="update-bench-") as tmp:
        root = Path(tmp) / "table"
        log = root / "_delta_log"
        shutil.copytree(Path(args.path) / "_delta_log", log)
        table = DeltaTable.for_path(spark, str(root))
        started = time.perf_counter()
        snapshot = table.snapshot()
        files_before = snapshot.state.num_of_files
        first_seconds = time.perf_counter() - started

        update_seconds, state_seconds = [], []
        for _ in range(args.updates):
            append_commit(log, snapshot.version + 1)
            started = time.perf_counter()
            snapshot = snapshot.update()
            update_seconds.append(time.perf_counter() - started)
            started = time.perf_counter()
            files_after = snapshot.state.num_of_files
            state_seconds.append(time.perf_counter() - started)

        started = time.perf_counter()
        fresh_files = table.snapshot().state.num_of_files
        fresh_seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "table": args.path,
                "first_snapshot_and_state_seconds": round(first_seconds, 3),
                "update_seconds": [round(s, 3) for s in update_seconds],
                "state_after_update_seconds": [round(s, 3) for s in state_seconds],
                "median_update_seconds": round(statistics.median(update_seconds), 3),
                "median_state_after_update_seconds": round(statistics.median(state_seconds), 3),
                "fresh_snapshot_and_state_seconds": round(fresh_seconds, 3),
                "files_before": files_before,
                "files_after": files_after,
                "fresh_files": fresh_files,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
