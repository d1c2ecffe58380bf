"""Snapshot.update() benchmark: the snapshot after one new commit, built on the previous state.

Copies the table's ``_delta_log`` to a temporary directory (the input is never written), takes
the latest snapshot and its state, appends one commit (the last commit's adds under new file
names), then times ``update()`` (a snapshot ready to query: listing, P&M of the new commit,
replay of the new commit) and its computedState, next to a fresh ``snapshot()`` of the same
version. Prints one JSON line. A benchmark, not a test: it asserts nothing.

    python bench/update_bench.py /tmp/bench/L --remote sc://127.0.0.1:15002
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--remote", default=os.environ.get("SPARK_REMOTE", "sc://127.0.0.1:15002"))
    args = parser.parse_args()

    from delta_connect_py import DeltaTable, connect

    spark = connect(args.remote)
    with tempfile.TemporaryDirectory(prefix="update-bench-") as tmp:
        root = Path(tmp) / "table"
        shutil.copytree(Path(args.path) / "_delta_log", root / "_delta_log")
        table = DeltaTable.for_path(spark, str(root))
        started = time.perf_counter()
        snapshot = table.snapshot()
        files_before = snapshot.state.num_of_files
        first_seconds = time.perf_counter() - started

        commits = sorted((root / "_delta_log").glob("*.json"))
        version = snapshot.version + 1
        (root / "_delta_log" / f"{version:020d}.json").write_text(
            new_commit_from(commits[-1], version)
        )

        started = time.perf_counter()
        updated = snapshot.update()
        update_seconds = time.perf_counter() - started
        updated.state_df()
        update_replay_seconds = time.perf_counter() - started
        files_after = updated.state.num_of_files
        update_state_seconds = time.perf_counter() - started

        started = time.perf_counter()
        fresh = table.snapshot()
        fresh_files = fresh.state.num_of_files
        fresh_seconds = time.perf_counter() - started
    print(
        json.dumps(
            {
                "table": args.path,
                "first_snapshot_and_state_seconds": round(first_seconds, 3),
                "update_seconds": round(update_seconds, 3),
                "update_with_replay_seconds": round(update_replay_seconds, 3),
                "update_with_state_seconds": round(update_state_seconds, 3),
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
