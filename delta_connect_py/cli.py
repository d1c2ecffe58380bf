"""The ``delta-connect`` command line.

Responsibility: a thin argparse front end over the public API. It parses the arguments, runs one
command, prints the command's result (a JSON object) as JSON or as a text table, and turns every
failure into one line on stderr.

Invariants:
- ``--remote`` (else ``SPARK_REMOTE``, else the embedded server) picks the server; no command
  writes anything unless its name says it does (``checkpoint``, ``cleanup``). ``serve`` runs
  the embedded server in the foreground (needs the ``[local]`` extra) and prints no result.
- Output goes to stdout: a text table when stdout is a terminal, JSON otherwise, unless
  ``--format`` says which. Every command prints one JSON object (never a bare list), and every
  timestamp is ISO 8601 in UTC (``2026-11-25T19:44:17.337Z``) in both formats.
- Exit status: 0 on success; 2 on a ``DeltaError`` or bad arguments; 1 on any other failure;
  130 when interrupted. An error is one line on stderr (``error: ...``): the DeltaError's
  message, or the exception's class and the first line of its message. A traceback is printed
  only with ``--debug``.
- While a command runs, its Spark jobs' progress is drawn on stderr when stderr is a terminal
  (``cli_progress``); it is gone before the result is printed. Tables are drawn with ``rich``.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import functools
import io
import json
import logging
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from datetime import date, datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TextIO

from rich import box
from rich.console import Console
from rich.table import Table

from delta_connect_py.errors import DeltaError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.snapshot import Snapshot
    from delta_connect_py.table import DeltaTable

#: Exit statuses (see the module docstring).
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_DELTA_ERROR = 2
EXIT_INTERRUPTED = 130

#: A table cell longer than this is cut, with an ellipsis (JSON output is never cut).
MAX_CELL_WIDTH = 60
#: Wider than any table we draw: ``rich`` then sizes a table to its content, never wrapping it.
RENDER_WIDTH = 100_000

Payload = dict[str, Any]

# --- argument types ---------------------------------------------------------------------------

_FILTER = re.compile(
    r"^\s*(?P<column>[^\s=!<>]+)\s*(?P<op>not\s+in\b|in\b|==|=|!=|<=|>=|<|>)\s*(?P<value>.*?)\s*$",
    re.IGNORECASE,
)


def _int_at_least(text: str, minimum: int, noun: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {noun}: {text!r}") from None
    if number < minimum:
        raise argparse.ArgumentTypeError(f"must be {minimum} or more, got {number}")
    return number


def version_number(text: str) -> int:
    """A table version: a non-negative integer."""
    return _int_at_least(text, 0, "a version number")


def positive_int(text: str) -> int:
    return _int_at_least(text, 1, "an integer")


def column_list(text: str) -> list[str]:
    """``a,b,c`` as a list of column names."""
    columns = [name.strip() for name in text.split(",") if name.strip()]
    if not columns:
        raise argparse.ArgumentTypeError("no column names given")
    return columns


def literal(text: str) -> object:
    """A filter value: a quoted string, else an integer, a float, true/false, else the text."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    return text


def filter_predicate(text: str) -> tuple[str, str, object]:
    """``COLUMN OP VALUE`` as the ``(column, op, value)`` tuple ``Snapshot.to_df`` takes.

    ``in`` and ``not in`` take a comma-separated list of values.
    """
    match = _FILTER.match(text)
    if match is None or not match["value"]:
        raise argparse.ArgumentTypeError(
            f"not a filter: {text!r}; expected COLUMN OP VALUE, e.g. 'id > 5', "
            "'region = eu' or 'id in 1,2,3'"
        )
    op = " ".join(match["op"].lower().split())
    if op in ("in", "not in"):
        values = [literal(item.strip()) for item in match["value"].split(",") if item.strip()]
        return match["column"], op, values
    return match["column"], op, literal(match["value"])


# --- plain values -----------------------------------------------------------------------------


def iso_timestamp(value: datetime) -> str:
    """ISO 8601: in UTC with a ``Z`` when ``value`` knows its zone, else as it is."""
    if value.tzinfo is None:
        return value.isoformat()
    utc = value.astimezone(timezone.utc).replace(tzinfo=None)
    spec = "milliseconds" if utc.microsecond % 1000 == 0 else "microseconds"
    return utc.isoformat(timespec=spec) + "Z"


def plain(value: Any) -> Any:
    """``value`` as JSON-ready values: timestamps ISO 8601 UTC, decimals and bytes as text."""
    if isinstance(value, datetime):
        return iso_timestamp(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [plain(item) for item in value]
    return value


def frame_rows(frame: DataFrame) -> list[dict[str, Any]]:
    """The rows of ``frame`` through Arrow, maps as dicts where their keys allow it.

    Arrow rather than Row objects: pyspark's Row conversion fails on maps with non-string keys,
    and Arrow keeps the time zone of timestamps.
    """
    table = _variants_as_json(frame).toArrow()
    try:
        rows: list[dict[str, Any]] = table.to_pylist(maps_as_pydicts="lossy")
    except TypeError:  # a map key Python cannot hash (a struct): keep (key, value) pairs
        rows = table.to_pylist()
    return [plain(row) for row in rows]


def _variants_as_json(frame: DataFrame) -> DataFrame:
    """``frame`` with each column holding a variant (at any depth) as its JSON text.

    Arrow would give a variant as its binary encoding, and pyspark's ``toArrow`` fails on a
    nullable variant column holding a null."""
    import pyspark.sql.connect.functions as F

    fields = frame.schema.fields
    if not any(_holds_variant(field.dataType) for field in fields):
        return frame
    return frame.select(
        *[
            F.to_json(F.col(f"`{field.name}`")).alias(field.name)
            if _holds_variant(field.dataType)
            else F.col(f"`{field.name}`")
            for field in fields
        ]
    )


def _holds_variant(data_type: Any) -> bool:
    from delta_connect_py.protocol.feature_use import type_names

    return "variant" in set(type_names(data_type.jsonValue()))


# --- commands ---------------------------------------------------------------------------------


def _table(args: argparse.Namespace) -> DeltaTable:
    from delta_connect_py import DeltaTable, connect

    spark = connect(args.remote)
    show_progress = getattr(args, "show_progress", None)
    if show_progress is not None:
        show_progress(spark)
    return DeltaTable.for_path(spark, args.path)


def _progress_on(stack: contextlib.ExitStack, spark: SparkSession) -> None:
    """Show ``spark``'s job progress on stderr (a terminal only) until ``stack`` closes."""
    from delta_connect_py.cli_progress import spark_progress_shown

    stack.enter_context(spark_progress_shown(spark, sys.stderr))


def _snapshot(args: argparse.Namespace) -> Snapshot:
    return _table(args).snapshot(args.version, timestamp=args.timestamp)


def _describe(args: argparse.Namespace) -> Payload:
    snapshot = _snapshot(args)
    described = snapshot.describe()
    described["timestamp"] = snapshot.timestamp
    described["partitionColumns"] = list(snapshot.partition_columns)
    described["schema"] = [
        {"name": field.name, "type": field.dataType.simpleString(), "nullable": field.nullable}
        for field in snapshot.schema.fields
    ]
    return described


def _show(args: argparse.Namespace) -> Payload:
    snapshot = _snapshot(args)
    frame = snapshot.to_df(columns=args.columns, filter=args.filter or None)
    return {
        "path": snapshot.table.table_root,
        "version": snapshot.version,
        "rows": frame_rows(frame.limit(args.limit)),
    }


def _files(args: argparse.Namespace) -> Payload:
    from delta_connect_py.data import select_files

    snapshot = _snapshot(args)
    files = [
        {
            "path": f.path,
            "size": f.size,
            "partitionValues": f.partition_values,
            "deletionVector": None if f.deletion_vector is None else f.deletion_vector.unique_id,
            "location": f.location,
        }
        for f in select_files(snapshot)
    ]
    return {"path": snapshot.table.table_root, "version": snapshot.version, "files": files}


def _history(args: argparse.Namespace) -> Payload:
    table = _table(args)
    return {"path": table.table_root, "history": frame_rows(table.history(limit=args.limit))}


def _cdf(args: argparse.Namespace) -> Payload:
    table = _table(args)
    frame = table.load_cdf(
        args.start,
        args.end,
        starting_timestamp=args.start_timestamp,
        ending_timestamp=args.end_timestamp,
    ).orderBy("_commit_version", "_change_type")
    if args.limit is not None:
        frame = frame.limit(args.limit)
    return {"path": table.table_root, "rows": frame_rows(frame)}


def _checkpoint(args: argparse.Namespace) -> Payload:
    from dataclasses import asdict

    result = _table(args).create_checkpoint(args.version, part_size=args.part_size)
    return {key: value for key, value in asdict(result).items() if key != "last_checkpoint"}


def _cleanup(args: argparse.Namespace) -> Payload:
    table = _table(args)
    return {
        "path": table.table_root,
        "dry_run": args.dry_run,
        "deleted": table.cleanup_metadata(dry_run=args.dry_run),
    }


def _server(args: argparse.Namespace) -> Payload:
    from delta_connect_py import connect

    return {"spark_version": connect(args.remote).version}


def _serve(args: argparse.Namespace) -> None:
    """Run the embedded server in the foreground until Ctrl-C or SIGTERM."""
    from delta_connect_py.embedded import EmbeddedServer

    worker_python = args.worker_python or os.environ.get(
        "DELTA_CONNECT_WORKER_PYTHON", sys.executable
    )
    server = EmbeddedServer(port=args.port, worker_python=worker_python)
    status = server.serve("Spark Connect")
    if status != 0:
        raise RuntimeError(f"the Spark Connect server exited with status {status}")


# --- the parser -------------------------------------------------------------------------------


def _package_version() -> str:
    from delta_connect_py import __version__

    return __version__


def _add_when(command: argparse.ArgumentParser, *, timestamp: bool = True) -> None:
    """``--at-version N`` (alias ``--version``) and, where reading, ``--timestamp T``."""
    when = command.add_mutually_exclusive_group()
    when.add_argument(
        "--at-version", dest="version", type=version_number, metavar="N", help="table version"
    )
    when.add_argument("--version", dest="version", type=version_number, help=argparse.SUPPRESS)
    if timestamp:
        when.add_argument(
            "--timestamp",
            metavar="T",
            help="the version active at T, e.g. '2024-01-01 12:00:00' (in the session's time "
            "zone unless T names one)",
        )
    command.set_defaults(version=None, timestamp=None)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="delta-connect",
        description="Read Delta Lake tables through a Spark Connect server, with nothing "
        "installed on the server.",
        epilog="Exit status: 0 ok, 2 a Delta error or bad arguments, 1 any other failure.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_package_version()}")
    parser.add_argument(
        "--remote", default=None, help="sc://host:port (default: $SPARK_REMOTE, else embedded)"
    )
    parser.add_argument(
        "--format",
        choices=("table", "json"),
        default=None,
        help="output format (default: table on a terminal, json otherwise)",
    )
    parser.add_argument("--debug", action="store_true", help="print tracebacks of errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, run: Callable[[argparse.Namespace], Payload | None], help: str) -> Any:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(run=run)
        return sub

    describe = command("describe", _describe, "summary: version, schema, protocol, files, size")
    describe.add_argument("path")
    _add_when(describe)

    show = command("show", _show, "the table's rows (the first --limit of them)")
    show.add_argument("path")
    _add_when(show)
    show.add_argument(
        "--columns", type=column_list, default=None, metavar="A,B", help="columns to show"
    )
    show.add_argument(
        "--filter",
        type=filter_predicate,
        action="append",
        default=[],
        metavar="'COL OP VALUE'",
        help="keep rows where COL OP VALUE (ops = != < <= > >= in 'not in'); repeat to AND",
    )
    show.add_argument("--limit", type=positive_int, default=20, help="rows to show (20)")

    files = command("files", _files, "the live data files a read of the table scans")
    files.add_argument("path")
    _add_when(files)

    history = command("history", _history, "commit history, newest first")
    history.add_argument("path")
    history.add_argument("--limit", type=positive_int, default=None, help="newest N commits")

    cdf = command("cdf", _cdf, "the change data feed between two versions or timestamps")
    cdf.add_argument("path")
    start = cdf.add_mutually_exclusive_group(required=True)
    start.add_argument("--from", dest="start", type=version_number, metavar="N")
    start.add_argument("--from-timestamp", dest="start_timestamp", metavar="T")
    end = cdf.add_mutually_exclusive_group()
    end.add_argument("--to", dest="end", type=version_number, metavar="M", help="(latest)")
    end.add_argument("--to-timestamp", dest="end_timestamp", metavar="T")
    cdf.add_argument("--limit", type=positive_int, default=None, help="print at most N rows")

    checkpoint = command(
        "checkpoint", _checkpoint, "write a checkpoint and _last_checkpoint (writes to _delta_log)"
    )
    checkpoint.add_argument("path")
    _add_when(checkpoint, timestamp=False)
    checkpoint.add_argument("--part-size", type=positive_int, default=None, help="actions per part")

    cleanup = command(
        "cleanup", _cleanup, "delete expired log files (writes to _delta_log unless --dry-run)"
    )
    cleanup.add_argument("path")
    cleanup.add_argument("--dry-run", action="store_true", help="only list what would go")

    command("server", _server, "connect and print the server's Spark version")

    serve = command(
        "serve",
        _serve,
        "run a local Spark Connect server on 127.0.0.1 in the foreground (needs the [local] "
        "extra and Java 17)",
    )
    serve.add_argument("--port", type=positive_int, default=15002, help="port (15002)")
    serve.add_argument(
        "--worker-python",
        default=None,
        metavar="PYTHON",
        help="the workers' Python: the client's minor version with pyarrow and pandas "
        "(default: $DELTA_CONNECT_WORKER_PYTHON, else this Python)",
    )
    return parser


# --- output -----------------------------------------------------------------------------------


def _cell(value: Any) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    text = " ".join(text.split())
    return text if len(text) <= MAX_CELL_WIDTH else text[: MAX_CELL_WIDTH - 1] + "…"


def render_rows(rows: Sequence[dict[str, Any]]) -> str:
    """Rows (dicts) as an aligned text table with a header; columns in first-seen order,
    those empty in every row left out."""
    if not rows:
        return "(no rows)"
    columns: list[str] = []
    for row in rows:
        columns.extend(key for key in row if key not in columns)
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    # Columns empty in every row (history's many unset fields) only widen the table.
    shown = [i for i in range(len(columns)) if any(line[i] for line in cells)]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, header_style="")
    for i in shown:
        table.add_column(columns[i], no_wrap=True)
    for line in cells:
        table.add_row(*(line[i] for i in shown))
    return _rendered(table)


def render_fields(fields: Sequence[tuple[str, Any]]) -> str:
    """``name  value`` lines, names aligned."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(no_wrap=True)
    for name, value in fields:
        grid.add_row(name, value if isinstance(value, str) else _cell(value))
    return _rendered(grid)


def _rendered(table: Table) -> str:
    """``table`` as plain text (no colour, no markup), as wide as its content."""
    buffer = io.StringIO()
    Console(file=buffer, width=RENDER_WIDTH, color_system=None, highlight=False).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().strip("\n").splitlines())


def _size(num_bytes: int) -> str:
    size = float(num_bytes)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{num_bytes:,} bytes" if unit == "bytes" else f"{size:,.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def describe_summary(described: Payload) -> str:
    """The ``describe`` result as a readable summary."""
    metadata = described.get("metadata", {})
    protocol = described.get("protocol", {})
    state = described.get("state", {})
    features = sorted(
        {*(protocol.get("readerFeatures") or ()), *(protocol.get("writerFeatures") or ())}
    )
    protocol_text = (
        f"reader {protocol.get('minReaderVersion')}, writer {protocol.get('minWriterVersion')}"
        + (f"; features: {', '.join(features)}" if features else "")
    )
    schema = ", ".join(f"{field['name']} {field['type']}" for field in described.get("schema", []))
    transactions = ", ".join(
        f"{txn.get('appId')}={txn.get('version')}" for txn in state.get("setTransactions", [])
    )
    properties = ", ".join(f"{key}={value}" for key, value in described["properties"].items())
    fields: list[tuple[str, Any]] = [
        ("path", described["path"]),
        ("version", str(described["version"])),
        ("timestamp", described["timestamp"]),
        ("name", metadata.get("name") or ""),
        ("description", metadata.get("description") or ""),
        ("schema", schema),
        ("partitioned by", ", ".join(described.get("partitionColumns", [])) or "(none)"),
        ("protocol", protocol_text),
        ("files", f"{state.get('numOfFiles', 0):,} ({_size(state.get('sizeInBytes', 0))})"),
        ("tombstones", f"{state.get('numOfRemoves', 0):,} unexpired remove actions"),
        ("transactions", transactions or "(none)"),
        ("properties", properties or "(none)"),
    ]
    return render_fields([(name, value) for name, value in fields if value != ""])


def render_table(command: str, payload: Payload) -> str:
    """``payload`` as text: the describe summary, else its fields then its list of rows."""
    if command == "describe":
        return describe_summary(payload)
    scalars = [(key, value) for key, value in payload.items() if not isinstance(value, list)]
    lists = [(key, value) for key, value in payload.items() if isinstance(value, list)]
    parts = [render_fields(scalars)] if scalars else []
    for key, items in lists:
        if items and all(isinstance(item, dict) for item in items):
            parts.append(render_rows(items))
        else:
            parts.append(f"{key}:" + "".join(f"\n  {_cell(item)}" for item in items))
    return "\n\n".join(parts)


def write_output(command: str, payload: Payload | None, output_format: str, out: TextIO) -> None:
    if payload is None:
        return
    plain_payload = plain(payload)
    if output_format == "json":
        out.write(json.dumps(plain_payload, indent=2, default=str) + "\n")
    else:
        out.write(render_table(command, plain_payload) + "\n")


def error_line(exc: BaseException) -> str:
    """One line for ``exc``: a DeltaError's message, else its class and first message line."""
    if isinstance(exc, DeltaError):
        return " ".join(str(exc).split())
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.debug:
        # pyspark logs a JSON record of the query context of some failures on stderr, on top of
        # the exception the error line already reports.
        logging.getLogger("DataFrameQueryContextLogger").setLevel(logging.CRITICAL)
    output_format = args.format or ("table" if sys.stdout.isatty() else "json")
    try:
        with contextlib.ExitStack() as progress:
            args.show_progress = functools.partial(_progress_on, progress)
            payload = args.run(args)
        write_output(args.command, payload, output_format, sys.stdout)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(f"error: {error_line(exc)}", file=sys.stderr)
        return EXIT_DELTA_ERROR if isinstance(exc, DeltaError) else EXIT_FAILURE
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
