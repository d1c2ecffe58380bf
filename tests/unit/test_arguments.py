"""Arguments of the public API refused on the client, before any Spark job, and short reprs.

The tables here have no session (``spark=None``): a check that came after a Spark call would
fail with an AttributeError instead of the error asserted, so these tests would catch it.
"""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import arguments, data
from delta_connect_py.checkpoints import CheckpointResult
from delta_connect_py.errors import (
    CheckpointNonExistTableError,
    DeltaError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    InvalidStorageOptionsError,
)
from delta_connect_py.plans.protocol_metadata import ProtocolAndMetadata
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.file_filters import parse_filter, predicates_of
from delta_connect_py.protocol.filenames import (
    checkpoint_name,
    commit_name,
    parse_log_file,
)
from delta_connect_py.protocol.segment import build_log_segment
from delta_connect_py.session import connect
from delta_connect_py.snapshot import Snapshot
from delta_connect_py.table import DeltaTable
from delta_connect_py.worker.stores import StorageOptions

ROOT = "s3a://bucket/events"
LOG = f"{ROOT}/_delta_log"
SECRET = "wJalrXUtnFEMI-very-secret"
SCHEMA = {
    "type": "struct",
    "fields": [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        {"name": "flag", "type": "boolean", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
        {"name": "at", "type": "timestamp", "nullable": True, "metadata": {}},
        {"name": "local", "type": "timestamp_ntz", "nullable": True, "metadata": {}},
        {"name": "v", "type": "variant", "nullable": True, "metadata": {}},
    ],
}


def table(storage_options: dict[str, str] | None = None) -> DeltaTable:
    return DeltaTable(None, ROOT, StorageOptions.of(storage_options))  # type: ignore[arg-type]


def snapshot(version: int = 12) -> Snapshot:
    names = [checkpoint_name(10), *(commit_name(v) for v in range(version + 1))]
    files = [parse_log_file(f"{LOG}/{name}", 100, 1_000 + i) for i, name in enumerate(names)]
    segment = build_log_segment(ROOT, LOG, [f for f in files if f is not None], version=version)
    pm = ProtocolAndMetadata(
        protocol=Protocol(1, 2),
        metadata=Metadata(id="table-id", schema_string=json.dumps(SCHEMA)),
        in_commit_timestamp=None,
        source="test",
    )
    return Snapshot(table=table(), segment=segment, protocol_and_metadata=pm)


def raised(call: Any, *args: Any, **kwargs: Any) -> InvalidArgumentError:
    with pytest.raises(InvalidArgumentError) as info:
        call(*args, **kwargs)
    return info.value


def assert_names(error: DeltaError, function: str, argument: str, value: str) -> None:
    """The message names the call, the argument, the value received and what is expected."""
    message = str(error)
    assert message.startswith("[DELTA_CONNECT_INVALID_ARGUMENT] "), message
    assert error.getErrorClass() == "DELTA_CONNECT_INVALID_ARGUMENT"
    parameters = error.getMessageParameters()
    assert parameters["function"] == function and parameters["argument"] == argument
    assert parameters["value"] == value and parameters["expected"]
    assert f"{argument}={value}" in message and "expected" in message


# --- versions and timestamps of a snapshot ---


@pytest.mark.parametrize(
    ("version", "shown"), [("2", "'2'"), (1.5, "1.5"), (True, "True"), ([2], "[2]")]
)
def test_snapshot_version_of_a_wrong_type(version: object, shown: str) -> None:
    error = raised(table().snapshot, version)
    assert isinstance(error, InvalidArgumentTypeError) and isinstance(error, TypeError)
    assert_names(error, "snapshot", "version", shown)
    assert "an int" in str(error)


def test_snapshot_version_both_with_timestamp() -> None:
    error = raised(table().snapshot, 3, timestamp="2024-01-01")
    assert isinstance(error, ValueError) and not isinstance(error, TypeError)
    assert "either version or timestamp, not both" in str(error)


@pytest.mark.parametrize("timestamp", [1_700_000_000, 1.5, date(2024, 1, 1), b"2024-01-01"])
def test_snapshot_timestamp_of_a_wrong_type(timestamp: object) -> None:
    error = raised(table().snapshot, timestamp=timestamp)
    assert_names(error, "snapshot", "timestamp", repr(timestamp))
    assert "datetime" in str(error)
    error = raised(table().version_at, timestamp)
    assert_names(error, "version_at", "timestamp", repr(timestamp))


def test_snapshot_partitions_must_be_positive() -> None:
    assert_names(
        raised(table().snapshot, snapshot_partitions=0), "snapshot", "snapshot_partitions", "0"
    )


def test_integer_types_other_than_int_are_versions() -> None:
    """numpy-style integers (anything with ``__index__``) are accepted, as ints."""

    class Index:
        def __index__(self) -> int:
            return 7

    assert arguments.version("snapshot", Index()) == 7
    assert arguments.version("snapshot", None) is None
    # Negative versions are left to the Delta error that lists the available versions.
    assert arguments.version("snapshot", -1) == -1


# --- table paths ---


@pytest.mark.parametrize(
    ("path", "kind"), [(None, TypeError), (b"/tmp/t", TypeError), (3, TypeError)]
)
def test_for_path_refuses_a_path_that_is_not_text(path: object, kind: type) -> None:
    error = raised(DeltaTable.for_path, None, path)
    assert isinstance(error, kind)
    assert_names(error, "DeltaTable.for_path", "path", repr(path))


@pytest.mark.parametrize("path", ["", "   ", Path("")])
def test_for_path_refuses_an_empty_path(path: object) -> None:
    if isinstance(path, Path):
        # Path("") is "." (the working directory), a real path: only str can be empty.
        assert arguments.table_path("DeltaTable.for_path", path) == "."
        return
    error = raised(DeltaTable.for_path, None, path)
    assert not isinstance(error, TypeError)
    assert_names(error, "DeltaTable.for_path", "path", repr(path))


def test_path_like_is_a_path() -> None:
    assert arguments.table_path("DeltaTable.for_path", Path("/data/events")) == "/data/events"


def test_storage_options_are_checked_before_the_session_is_used() -> None:
    with pytest.raises(InvalidStorageOptionsError):
        DeltaTable.for_path(None, "/data/events", {"NOT_AN_OPTION": "x"})  # type: ignore[arg-type]


# --- to_df: filter and columns ---


def test_to_df_refuses_a_filter_string() -> None:
    error = raised(snapshot().to_df, filter="id > 5")
    assert isinstance(error, TypeError)
    assert_names(error, "to_df", "filter", "'id > 5'")
    assert "[('id', '>', 5)]" in str(error)


@pytest.mark.parametrize(
    "bad",
    [
        ("id", ">"),
        ("id", "~", 1),
        (5, "=", 1),
        ("id", "=", None),
        ("id", "in", []),
        ("id", "in", "xy"),
        ["id > 5"],
        [[("id", "=", 1)], ("name", "=", "a")],
    ],
)
def test_to_df_refuses_malformed_filters(bad: Any) -> None:
    error = raised(snapshot().to_df, filter=bad)
    assert isinstance(error, ValueError)
    parameters = error.getMessageParameters()
    assert parameters["function"] == "to_df" and parameters["argument"] == "filter"
    assert parameters["expected"]


@pytest.mark.parametrize("bad", [3, {"id": 5}, "id > 5"])
def test_filter_containers_other_than_tuple_or_list(bad: object) -> None:
    assert isinstance(raised(parse_filter, bad), TypeError)


@pytest.mark.parametrize("columns", ["id", ("id", 1), [None], {"id"}, 3])
def test_to_df_refuses_columns_that_are_not_a_list_of_names(columns: object) -> None:
    error = raised(snapshot().to_df, columns=columns)
    assert isinstance(error, TypeError)
    assert_names(error, "to_df", "columns", repr(columns))


@pytest.mark.parametrize(
    ("kwargs", "argument", "unknown"),
    [
        ({"columns": ["nope"]}, "columns", "['nope']"),
        ({"columns": ["ID"]}, "columns", "['ID']"),  # names are case-sensitive
        ({"filter": [("nope", "=", 1)]}, "filter", "['nope']"),
    ],
)
def test_to_df_names_unknown_columns(kwargs: dict[str, Any], argument: str, unknown: str) -> None:
    error = raised(snapshot().to_df, **kwargs)
    assert isinstance(error, ValueError)  # also a ValueError, as before
    assert_names(error, "to_df", argument, unknown)
    assert "['at', 'day', 'flag', 'id', 'local', 'name', 'v']" in str(error)


@pytest.mark.parametrize(
    "bad",
    [
        ("name", "=", 5),
        ("name", "in", ["a", 5]),
        ("id", "=", datetime(2020, 1, 1)),
        ("id", "=", [1, 2]),
        ("id", "=", 2**70),
        ("id", "=", True),
        ("id", "<", "abc"),
        ("flag", "=", 1),
        ("day", "=", 5),
        ("day", "in", [date(2020, 1, 1), 3]),
        ("at", "<", 5),
        ("local", "=", 1.5),
        ("v", "=", 1),
        ("v", "=", "1"),
    ],
)
def test_to_df_refuses_filter_values_the_column_cannot_compare(bad: Any) -> None:
    """Spark would refuse them when the rows are read, with a JVM trace."""
    error = raised(snapshot().to_df, filter=[bad])
    parameters = error.getMessageParameters()
    assert parameters["function"] == "to_df" and parameters["argument"] == "filter"
    assert parameters["value"].startswith(repr(bad[:2])[:-1])
    assert repr(bad[0]) in parameters["expected"]


@pytest.mark.parametrize(
    "good",
    [
        ("name", "=", "5"),
        ("id", "=", 5),
        ("id", ">", "5"),
        ("id", "in", [1, 2.5]),
        ("flag", "=", False),
        ("day", "=", date(2020, 1, 1)),
        ("day", "<", datetime(2020, 1, 1, 12)),
        ("at", ">", datetime(2020, 1, 1, tzinfo=timezone.utc)),
        ("local", "in", [date(2020, 1, 1), datetime(2020, 1, 2)]),
    ],
)
def test_filter_values_the_column_compares_pass(good: Any) -> None:
    predicates = predicates_of(parse_filter([good], "to_df"))
    assert set(data._filter_paths(snapshot(), predicates)) == {good[0]}


# --- change data feed, history, checkpoints ---


@pytest.mark.parametrize(
    ("kwargs", "argument", "shown"),
    [
        ({"starting_version": "1"}, "starting_version", "'1'"),
        ({"starting_version": -1}, "starting_version", "-1"),
        ({"starting_version": 0, "ending_version": 2.0}, "ending_version", "2.0"),
        ({"starting_timestamp": 17}, "starting_timestamp", "17"),
        ({"starting_version": 0, "ending_timestamp": 1.5}, "ending_timestamp", "1.5"),
    ],
)
def test_load_cdf_arguments(kwargs: dict[str, Any], argument: str, shown: str) -> None:
    assert_names(raised(table().load_cdf, **kwargs), "load_cdf", argument, shown)


def test_load_cdf_version_and_timestamp_not_both() -> None:
    for kwargs in [
        {"starting_version": 0, "starting_timestamp": datetime(2024, 1, 1, tzinfo=timezone.utc)},
        {"starting_version": 0, "ending_version": 3, "ending_timestamp": "2024-01-01"},
    ]:
        assert "not both" in str(raised(table().load_cdf, **kwargs))


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"starting_version": "0"}, "starting_version"),
        ({"starting_version": -2}, "starting_version"),
        ({"offset": 5}, "offset"),
        ({"max_files_per_trigger": 0}, "max_files_per_trigger"),
        ({"max_files_per_trigger": 1.5}, "max_files_per_trigger"),
        ({"poll_seconds": "1"}, "poll_seconds"),
        ({"poll_seconds": -1}, "poll_seconds"),
        ({"max_bytes_per_trigger": "lots"}, "max_bytes_per_trigger"),
        ({"max_bytes_per_trigger": 0}, "max_bytes_per_trigger"),
        ({"max_bytes_per_trigger": 1.5}, "max_bytes_per_trigger"),
    ],
)
def test_stream_cdf_arguments_are_checked_when_called(
    kwargs: dict[str, Any], argument: str
) -> None:
    """Raised by the call itself, not on the first ``next()`` of the stream."""
    error = raised(table().stream_cdf, **kwargs)
    assert error.getMessageParameters()["argument"] == argument


@pytest.mark.parametrize(("limit", "kind"), [(-1, ValueError), ("3", TypeError), (2.5, TypeError)])
def test_history_limit(limit: object, kind: type) -> None:
    error = raised(table().history, limit)
    assert isinstance(error, kind)
    assert_names(error, "history", "limit", repr(limit))


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [({"version": "3"}, "version"), ({"version": 1.5}, "version"), ({"part_size": 0}, "part_size")],
)
def test_create_checkpoint_arguments(kwargs: dict[str, Any], argument: str) -> None:
    error = raised(table().create_checkpoint, **kwargs)
    assert error.getMessageParameters()["argument"] == argument


def test_create_checkpoint_of_a_negative_version_is_delta_spark_error() -> None:
    with pytest.raises(CheckpointNonExistTableError):
        table().create_checkpoint(-1)


def test_long_values_are_shortened() -> None:
    error = raised(table().snapshot, "x" * 500)
    assert len(error.getMessageParameters()["value"]) == arguments.MAX_SHOWN


# --- reprs ---


def test_table_repr_shows_the_path_and_option_names_only() -> None:
    assert repr(table()) == f"DeltaTable('{ROOT}')"
    text = repr(table({"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": SECRET}))
    assert ROOT in text and "AWS_SECRET_ACCESS_KEY" in text
    assert SECRET not in text and "AKIA" not in text and "Session" not in text


def test_snapshot_repr_is_short() -> None:
    snap = snapshot(12)
    text = repr(snap)
    assert text == (f"Snapshot('{ROOT}', version=12, checkpoint=10, commits_after_checkpoint=2)")
    assert commit_name(11) not in text


def test_checkpoint_result_repr_names_the_files_not_the_hint() -> None:
    hint = json.dumps({"version": 10, "size": 4, "checksum": "x" * 5000})
    paths = tuple(f"{LOG}/_sidecars/{i:04d}.parquet" for i in range(5))
    result = CheckpointResult(
        version=10,
        parts=1,
        paths=(f"{LOG}/{checkpoint_name(10)}", *paths),
        num_actions=40,
        size_in_bytes=123,
        num_of_add_files=30,
        last_checkpoint=hint,
    )
    text = repr(result)
    assert "version=10" in text and checkpoint_name(10) in text and "0001.parquet" in text
    assert "0004.parquet" not in text and "(3 more)" in text
    assert hint not in text and "x" * 20 not in text and LOG not in text
    assert len(text) < 300


# --- sessions, options, flags, counts ---


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: DeltaTable.for_path(None, "/t"), "spark"),  # type: ignore[arg-type]
        (lambda: DeltaTable.for_path("sc://h:1", "/t"), "spark"),  # type: ignore[arg-type]
        (lambda: DeltaTable.for_path(None, "/t", "x"), "storage_options"),  # type: ignore[arg-type]
        (lambda: DeltaTable.for_path(None, "/t", snapshot_cache="no"), "snapshot_cache"),  # type: ignore[arg-type]
        (lambda: table().cleanup_metadata(dry_run="no"), "dry_run"),  # type: ignore[arg-type]
        (lambda: table().load_cdf(0, allow_out_of_range="no"), "allow_out_of_range"),  # type: ignore[arg-type]
        (lambda: table().stream_cdf(0, stop_when_caught_up="no"), "stop_when_caught_up"),  # type: ignore[arg-type]
        (lambda: table().cdf_file_changes(-3), "from_version"),
        (lambda: table().cdf_file_changes(0, from_index="-1"), "from_index"),
        (lambda: table().cdf_file_changes(0, max_files=0), "max_files"),
        (lambda: table().snapshot(snapshot_partitions=10**6), "snapshot_partitions"),
        (lambda: connect("http://h:15002"), "remote"),
        (lambda: connect(""), "remote"),
        (lambda: connect(15002), "remote"),  # type: ignore[arg-type]
    ],
)
def test_arguments_of_the_wrong_kind_are_named(call: Any, argument: str) -> None:
    """Before any request: never an AttributeError, a truthy string read as True, a job of a
    million tasks, or an embedded server started for an empty address."""
    error = raised(call)
    assert error.getMessageParameters()["argument"] == argument
