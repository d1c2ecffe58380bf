"""The ``delta-connect`` command line without a server: arguments, output, errors, exit codes."""

from __future__ import annotations

import argparse
import json
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from delta_connect_py import __version__
from delta_connect_py.cli import (
    EXIT_DELTA_ERROR,
    build_parser,
    describe_summary,
    error_line,
    filter_predicate,
    iso_timestamp,
    main,
    plain,
    render_rows,
    render_table,
)
from delta_connect_py.errors import MissingDeltaTableError


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == f"delta-connect {__version__}"


def test_at_version_and_its_alias_set_the_table_version() -> None:
    parser = build_parser()
    assert parser.parse_args(["describe", "t", "--at-version", "3"]).version == 3
    assert parser.parse_args(["show", "t", "--version", "4"]).version == 4
    args = parser.parse_args(["files", "t", "--timestamp", "2024-01-01"])
    assert (args.version, args.timestamp) == (None, "2024-01-01")


@pytest.mark.parametrize(
    "argv",
    [
        ["describe", "t", "--at-version", "1", "--timestamp", "2024-01-01"],
        ["describe", "t", "--at-version", "-1"],
        ["describe", "t", "--at-version", "one"],
        ["show", "t", "--limit", "0"],
        ["show", "t", "--filter", "id"],
        ["cdf", "t"],
        ["cdf", "t", "--from", "1", "--from-timestamp", "2024-01-01"],
        ["describe", "t", "--format", "yaml"],
        ["checkpoint", "t", "--timestamp", "2024-01-01"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    assert "usage: delta-connect" in capsys.readouterr().err


def test_cdf_takes_versions_or_timestamps() -> None:
    parser = build_parser()
    args = parser.parse_args(["cdf", "t", "--from", "2", "--to-timestamp", "2024-01-02"])
    assert (args.start, args.end, args.start_timestamp, args.end_timestamp) == (
        2,
        None,
        None,
        "2024-01-02",
    )


@pytest.mark.parametrize(
    ("text", "predicate"),
    [
        ("id > 5", ("id", ">", 5)),
        ("id>=5", ("id", ">=", 5)),
        ("price < 1.5", ("price", "<", 1.5)),
        ("region = eu", ("region", "=", "eu")),
        ("region == 'eu west'", ("region", "==", "eu west")),
        ('code != "007"', ("code", "!=", "007")),
        ("flag = true", ("flag", "=", True)),
        ("address.city = Oslo", ("address.city", "=", "Oslo")),
        ("id in 1, 2,3", ("id", "in", [1, 2, 3])),
        ("region NOT  IN eu,us", ("region", "not in", ["eu", "us"])),
        ("index = 4", ("index", "=", 4)),
    ],
)
def test_filters_parse_to_to_df_predicates(text: str, predicate: tuple[str, str, object]) -> None:
    assert filter_predicate(text) == predicate


@pytest.mark.parametrize("text", ["id", "id >", "> 5", "id ~ 5", ""])
def test_malformed_filters_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="COLUMN OP VALUE"):
        filter_predicate(text)


def test_show_collects_filters_and_columns() -> None:
    args = build_parser().parse_args(
        ["show", "t", "--columns", "a, b", "--filter", "a > 1", "--filter", "b = x"]
    )
    assert args.columns == ["a", "b"]
    assert args.filter == [("a", ">", 1), ("b", "=", "x")]


def test_timestamps_print_as_iso_8601_utc() -> None:
    oslo = timezone(timedelta(hours=1))
    assert iso_timestamp(datetime(2026, 11, 25, 20, 44, 17, 337000, oslo)) == (
        "2026-11-25T19:44:17.337Z"
    )
    assert iso_timestamp(datetime(2026, 11, 25, 19, 44, 17, 337001, timezone.utc)) == (
        "2026-11-25T19:44:17.337001Z"
    )
    # A timestamp without a zone (TIMESTAMP_NTZ) is printed as it is, not claimed to be UTC.
    assert iso_timestamp(datetime(2026, 11, 25, 19, 44)) == "2026-11-25T19:44:00"


def test_plain_values_are_json_ready() -> None:
    value = {
        "when": datetime(2024, 1, 1, tzinfo=timezone.utc),
        "day": date(2024, 1, 2),
        "amount": Decimal("1.10"),
        "raw": b"\x00\x01",
        "nested": [{1: (datetime(2024, 1, 1, 1, tzinfo=timezone.utc),)}],
    }
    assert plain(value) == {
        "when": "2024-01-01T00:00:00.000Z",
        "day": "2024-01-02",
        "amount": "1.10",
        "raw": "AAE=",
        "nested": [{"1": ["2024-01-01T01:00:00.000Z"]}],
    }
    json.dumps(plain(value))


def test_rows_render_as_an_aligned_table_without_empty_columns() -> None:
    rows = [
        {"id": 1, "name": "a", "unset": None, "tags": {"k": "v"}},
        {"id": 22, "name": "bbb", "unset": None, "tags": None},
    ]
    assert render_rows(rows).splitlines() == [
        "id   name   tags",
        "─────────────────────",
        '1    a      {"k":"v"}',
        "22   bbb",
    ]
    assert render_rows([]) == "(no rows)"


def test_long_cells_are_cut() -> None:
    line = render_rows([{"text": "x" * 200}]).splitlines()[2]
    assert len(line) == 60
    assert line.endswith("…")


def test_table_output_shows_fields_then_rows() -> None:
    text = render_table("show", {"path": "/t", "version": 3, "rows": [{"id": 1}]})
    assert text.splitlines() == ["path     /t", "version  3", "", "id", "──", "1"]
    listed = render_table("cleanup", {"dry_run": True, "deleted": ["/t/_delta_log/0.json"]})
    assert listed.splitlines()[-2:] == ["deleted:", "  /t/_delta_log/0.json"]


def test_describe_summary_reads_like_a_summary() -> None:
    described = {
        "path": "file:/t",
        "version": 5,
        "timestamp": "2026-11-25T21:36:15.770Z",
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "appendOnly"],
        },
        "metadata": {"name": "orders", "description": None},
        "properties": {"delta.enableChangeDataFeed": "true"},
        "partitionColumns": ["region"],
        "schema": [{"name": "id", "type": "bigint"}, {"name": "region", "type": "string"}],
        "state": {
            "numOfFiles": 1234,
            "sizeInBytes": 3 * 1024 * 1024,
            "numOfRemoves": 2,
            "setTransactions": [{"appId": "app", "version": 7}],
        },
    }
    lines = describe_summary(described).splitlines()
    assert lines == [
        "path            file:/t",
        "version         5",
        "timestamp       2026-11-25T21:36:15.770Z",
        "name            orders",
        "schema          id bigint, region string",
        "partitioned by  region",
        "protocol        reader 3, writer 7; features: appendOnly, deletionVectors",
        "files           1,234 (3.0 MiB)",
        "tombstones      2 unexpired remove actions",
        "transactions    app=7",
        "properties      delta.enableChangeDataFeed=true",
    ]


def test_error_lines_are_one_line() -> None:
    delta = MissingDeltaTableError(path="/t", log_path="/t/_delta_log")
    assert error_line(delta).startswith("[DELTA_MISSING_DELTA_TABLE] /t is not a Delta table")
    other = RuntimeError("first line\n\nJVM stacktrace:\n  at org.apache.spark...")
    assert error_line(other) == "RuntimeError: first line"
    assert error_line(KeyError()) == "KeyError"


def _full_pyspark() -> bool:
    import pyspark

    return (Path(pyspark.__file__).parent / "jars").is_dir()


@pytest.mark.skipif(_full_pyspark(), reason="needs the thin client: full pyspark starts a server")
@pytest.mark.parametrize("debug", [False, True])
def test_a_delta_error_exits_2_with_one_line(
    debug: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # No server and the thin client only: connect() cannot start the embedded server.
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert main([*(["--debug"] if debug else []), "describe", "/t"]) == EXIT_DELTA_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    last = captured.err.splitlines()[-1]
    assert last.startswith("error: [DELTA_CONNECT_EMBEDDED_SERVER] ")
    assert ("Traceback" in captured.err) is debug
    if not debug:
        assert captured.err.count("\n") == 1


def test_serve_takes_a_port_and_a_worker_python() -> None:
    args = build_parser().parse_args(["serve", "--port", "15010", "--worker-python", "/py"])
    assert (args.port, args.worker_python) == (15010, "/py")
    assert build_parser().parse_args(["serve"]).port == 15002


@pytest.mark.skipif(_full_pyspark(), reason="needs the thin client: full pyspark starts a server")
def test_serve_without_full_pyspark_is_one_delta_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--port", "1"]) == EXIT_DELTA_ERROR
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: [DELTA_CONNECT_EMBEDDED_SERVER] ")
    assert captured.err.count("\n") == 1
