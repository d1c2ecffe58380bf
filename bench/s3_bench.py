"""Benchmark (not a test): reading tables on S3 (moto on loopback, s3a) against delta-rs.

Usage::

    python /work/shared/bench/gen_log.py /tmp/bench/S --force --with-stats --files 10000 \\
        --commits 1000 --partitions 100 --txn-apps 4 --seed 1
    # checkpointed: 100k files, a checkpoint at version 100 and the 99 commits after it
    python /work/shared/bench/gen_log.py /tmp/bench/C --force --with-stats --files 100000 \\
        --commits 200 --checkpoint-every 100 --partitions 100 --txn-apps 4 --seed 1
    server/fetch-s3a-jars.sh && make moto-venv
    PYTHONPATH=. .venv/bin/python bench/s3_bench.py /tmp/bench/S \\
        ../shared/conformance/golden/basic-with-inserts-deletes-checkpoint/delta [--rounds 3] \\
        [--local]

Starts moto (``tests.object_store_server``) on a free loopback port and a Spark Connect
server reading it through s3a (credentials only in its Spark conf), uploads each table once,
then per round and table: ours, a fresh ``DeltaTable.for_path(...).snapshot().state`` (the
session's snapshot cache turned off: with it, every call after the first answers the unchanged
log from the cache, in one listing job), and
delta-rs, ``DeltaTable(s3://..., storage_options).get_add_actions()``, one right after the
other. Prints per table the median seconds of each, the median of the per-round ratios
(ours / delta-rs; the machine's drift moves both sides of a ratio alike), and the S3
requests per log file of one fresh snapshot of ours (GET, HEAD, LIST counted in moto's request
log over the keys under ``_delta_log``), against delta-rs's.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tests.object_store_server import (
    BUCKET,
    MotoServer,
    moto_server_binary,
    s3a_jars,
    s3a_spark_server,
    worker_storage_options,
)

ROOT = Path(__file__).resolve().parents[1]
#: A request line of moto's (werkzeug's) log; some are wrapped in terminal colour codes.
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(GET|HEAD|PUT|POST|DELETE) (/[^ ]*) HTTP')


def _requests(log: str, start: int, name: str) -> Counter[str]:
    """Requests since ``start`` (a log offset) naming ``name``'s log: GET/HEAD of its keys and
    LISTs (GET on the bucket with a prefix in the query)."""
    counts: Counter[str] = Counter()
    for method, target in _REQUEST.findall(log[start:]):
        if f"{name}/_delta_log" not in target and f"{name}%2F_delta_log" not in target:
            continue
        kind = (
            "LIST" if method == "GET" and ("list-type" in target or "prefix=" in target) else method
        )
        counts[kind] += 1
    return counts


def _timed(call: Any) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _time_local(spark: Any, local: Path, rounds: int) -> None:
    """Both readers on the local copy, in the same alternation as on S3."""
    from deltalake import DeltaTable as RsDeltaTable

    from delta_connect_py import DeltaTable

    def ours() -> None:
        DeltaTable.for_path(spark, str(local), snapshot_cache=False).snapshot().state  # noqa: B018

    def theirs() -> None:
        RsDeltaTable(str(local)).get_add_actions()

    ours()  # warm-up, untimed
    timed = [(_timed(ours), _timed(theirs)) for _ in range(rounds)]
    ratio = statistics.median(a / b for a, b in timed)
    print(
        f"  local disk: ours {statistics.median(a for a, _ in timed):.2f} s, "
        f"delta-rs {statistics.median(b for _, b in timed):.2f} s, median ratio {ratio:.2f}x"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tables", nargs="+", type=Path, help="local Delta tables to upload")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--local",
        action="store_true",
        help="also time both readers on the local copy (same server), to tell the store's "
        "share of the ratio from the compute's",
    )
    args = parser.parse_args()
    binary, jars = moto_server_binary(), s3a_jars()
    if binary is None or not jars:
        raise SystemExit("run server/fetch-s3a-jars.sh and make moto-venv first")
    from deltalake import DeltaTable as RsDeltaTable

    from delta_connect_py import DeltaTable, connect

    moto = MotoServer(binary).start()
    names = {f"t{i}_{table.name}": table for i, table in enumerate(args.tables)}
    moto.upload(names)
    server = s3a_spark_server(moto.endpoint, str(ROOT / ".venv-worker" / "bin" / "python"), jars)
    options = worker_storage_options(moto.endpoint)
    try:
        spark = connect(server.remote)
        for name, local in names.items():
            uri = f"s3a://{BUCKET}/{name}"
            log_files = [
                p for p in os.listdir(local / "_delta_log") if not p.startswith(("_", "."))
            ]

            def ours(uri: str = uri) -> None:
                DeltaTable.for_path(spark, uri, snapshot_cache=False).snapshot().state  # noqa: B018

            def theirs(name: str = name) -> None:
                RsDeltaTable(f"s3://{BUCKET}/{name}", storage_options=options).get_add_actions()

            ours()  # warm-up, untimed
            mark = len(moto.requests_log())
            ours()
            our_requests = _requests(moto.requests_log(), mark, name)
            mark = len(moto.requests_log())
            theirs()
            their_requests = _requests(moto.requests_log(), mark, name)
            rounds = [(_timed(ours), _timed(theirs)) for _ in range(args.rounds)]
            ratios = [a / b for a, b in rounds]
            print(
                f"{local} as {uri} ({len(log_files)} log files): "
                f"ours {statistics.median(a for a, _ in rounds):.2f} s, "
                f"delta-rs {statistics.median(b for _, b in rounds):.2f} s, "
                f"median ratio {statistics.median(ratios):.2f}x "
                f"(rounds: {', '.join(f'{a:.2f}/{b:.2f}' for a, b in rounds)})"
            )
            if args.local:
                _time_local(spark, local, args.rounds)
            for who, counts in (("ours", our_requests), ("delta-rs", their_requests)):
                per_file = {k: round(v / max(1, len(log_files)), 2) for k, v in counts.items()}
                print(
                    f"  {who}: requests on _delta_log per fresh snapshot {dict(counts)}, "
                    f"per log file {per_file}"
                )
        spark.stop()
    finally:
        server.stop()
        moto.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
