"""The ``delta-connect`` command line.

Responsibility: thin argparse front end over the public API; every subcommand prints plain JSON
or text and exits non-zero with the error class on a DeltaError.

Invariants: ``--remote`` (else ``SPARK_REMOTE``, else the embedded server) picks the server; no
subcommand writes anything unless its name says it does.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from delta_connect_py.errors import DeltaError


def _describe(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    snapshot = table.snapshot(args.version, timestamp=args.timestamp)
    return snapshot.describe()


def _checkpoint(args: argparse.Namespace) -> dict[str, Any]:
    from dataclasses import asdict

    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    result = table.create_checkpoint(args.version, part_size=args.part_size)
    return {key: value for key, value in asdict(result).items() if key != "last_checkpoint"}


def _cleanup(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    paths = table.cleanup_metadata(dry_run=args.dry_run)
    return {"dry_run": args.dry_run, "deleted": paths}


def _cdf(args: argparse.Namespace) -> list[dict[str, Any]]:
    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    frame = table.load_cdf(args.start, args.end).orderBy("_commit_version", "_change_type")
    if args.limit is not None:
        frame = frame.limit(args.limit)
    return [row.asDict(recursive=True) for row in frame.collect()]


def _show(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    snapshot = table.snapshot(args.version)
    # Arrow, not Row objects: pyspark's Row conversion fails on maps with non-string keys.
    rows = snapshot.to_df().limit(args.limit).toArrow().to_pylist()
    return {"version": snapshot.version, "rows": rows}


def _files(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import DeltaTable, connect
    from delta_connect_py.data import select_files

    table = DeltaTable.for_path(connect(args.remote), args.path)
    snapshot = table.snapshot(args.version)
    files = [
        {
            "path": f.path,
            "location": f.location,
            "size": f.size,
            "partitionValues": f.partition_values,
            "deletionVector": None if f.deletion_vector is None else f.deletion_vector.unique_id,
        }
        for f in select_files(snapshot)
    ]
    return {"version": snapshot.version, "files": files}


def _history(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import DeltaTable, connect

    table = DeltaTable.for_path(connect(args.remote), args.path)
    rows = table.history(limit=args.limit).collect()
    return {"history": [row.asDict(recursive=True) for row in rows]}


def _server(args: argparse.Namespace) -> dict[str, Any]:
    from delta_connect_py import connect

    spark = connect(args.remote)
    return {"spark_version": spark.version}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delta-connect",
        description="Delta Lake table state over Spark Connect, with nothing on the server.",
    )
    parser.add_argument(
        "--remote", default=None, help="sc://host:port (default: $SPARK_REMOTE, else embedded)"
    )
    commands = parser.add_subparsers(dest="command", required=True)
    describe = commands.add_parser("describe", help="version, protocol, metadata, computed state")
    describe.add_argument("path")
    when = describe.add_mutually_exclusive_group()
    when.add_argument("--version", type=int, default=None)
    when.add_argument("--timestamp", default=None, help="e.g. '2024-01-01 00:00:00' (UTC)")
    describe.set_defaults(run=_describe)
    checkpoint = commands.add_parser(
        "checkpoint", help="write a checkpoint and _last_checkpoint (writes to _delta_log)"
    )
    checkpoint.add_argument("path")
    checkpoint.add_argument("--version", type=int, default=None)
    checkpoint.add_argument("--part-size", type=int, default=None, help="actions per part")
    checkpoint.set_defaults(run=_checkpoint)
    cleanup = commands.add_parser(
        "cleanup", help="delete expired log files (writes to _delta_log unless --dry-run)"
    )
    cleanup.add_argument("path")
    cleanup.add_argument("--dry-run", action="store_true", help="only list what would go")
    cleanup.set_defaults(run=_cleanup)
    cdf = commands.add_parser("cdf", help="print the change data feed between two versions")
    cdf.add_argument("path")
    cdf.add_argument("--from", dest="start", type=int, required=True, help="first version")
    cdf.add_argument("--to", dest="end", type=int, default=None, help="last version (latest)")
    cdf.add_argument("--limit", type=int, default=None, help="print at most this many rows")
    cdf.set_defaults(run=_cdf)
    show = commands.add_parser("show", help="the table's rows (the first --limit of them)")
    show.add_argument("path")
    show.add_argument("--version", type=int, default=None)
    show.add_argument("--limit", type=int, default=20)
    show.set_defaults(run=_show)
    files = commands.add_parser("files", help="the live data files a read scans")
    files.add_argument("path")
    files.add_argument("--version", type=int, default=None)
    files.set_defaults(run=_files)
    history = commands.add_parser("history", help="commit history, newest first")
    history.add_argument("path")
    history.add_argument("--limit", type=int, default=None)
    history.set_defaults(run=_history)
    server = commands.add_parser("server", help="connect and print the server's Spark version")
    server.set_defaults(run=_server)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result = args.run(args)
    except DeltaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
