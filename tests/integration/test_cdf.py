"""Change data feed on a real server: conformance tables, delta-rs as the oracle, errors, stream.

delta-rs (``deltalake``) is the oracle for every column except ``_commit_timestamp``: delta-rs
takes it from ``commitInfo.timestamp`` (or the in-commit timestamp), delta-spark and we from the
in-commit timestamp, else the commit file's monotonized modification time. On the in-commit
timestamp table the two agree, so there it is compared too.

Where delta-rs cannot be the oracle (column-mapped CDF, which it refuses; the inline DV of
``kernel/cdf-table-with-dv``, which it decodes differently), the expected rows and error classes
below are delta-spark 4.3.1's (``readChangeFeed`` on pyspark 4.1, run by hand on the same
tables: the conformance copies and the hand-written ``column_mapped`` history).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_connect_py import DeltaTable
from delta_connect_py.cli import main
from delta_connect_py.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataFeedIncompatibleDataSchemaError,
    ChangeDataFeedIncompatibleSchemaChangeError,
    DifferentDeltaTableReadByStreamingSourceError,
    InvalidCdcRangeError,
    MissingChangeDataError,
    MissingFilesUnexpectedVersionError,
    NoStartForCdcReadError,
    StreamingIncompatibleSchemaChangeError,
    StreamSchemaChangedError,
    StreamSchemaChangedWithStartingOptionsError,
    TimestampGreaterThanCommitError,
    UnsupportedFeaturesForReadError,
    VersionNotFoundError,
)
from delta_connect_py.protocol.cdf import (
    BASE_INDEX,
    METADATA_CHANGE_INDEX,
    DeltaSourceOffset,
    next_offset,
)
from delta_connect_py.protocol.filenames import commit_name

CDF_ON = {"delta.enableChangeDataFeed": "true"}
CDF_NAMES = ["_change_type", "_commit_version", "_commit_timestamp"]
T0 = 1_700_000_000  # seconds


def _rows(frame: Any, *, with_timestamp: bool = False) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of (column, value) pairs, without _commit_timestamp by default."""
    result = []
    for row in frame.collect():
        values = row.asDict()
        if not with_timestamp:
            values.pop("_commit_timestamp")
        result.append(tuple(sorted((k, _plain(v)) for k, v in values.items())))
    return sorted(result, key=repr)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.astimezone()
        return int(stamp.timestamp() * 1000)
    return value


def _rs_rows(path: Path, start: int = 0, *, with_timestamp: bool = False) -> list[tuple[Any, ...]]:
    table = pa.table(RsDeltaTable(str(path)).load_cdf(starting_version=start).read_all())
    result = []
    for values in table.to_pylist():
        if not with_timestamp:
            values.pop("_commit_timestamp")
        result.append(tuple(sorted((k, _plain(v)) for k, v in values.items())))
    return sorted(result, key=repr)


def _batch(ids: list[int], names: list[str], parts: list[str]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names, pa.string()),
            "part": pa.array(parts, pa.string()),
        }
    )


def _write_history(root: Path) -> Path:
    """v0 create (CDF on, partitioned), v1 append, v2 update, v3 delete, v4 merge."""
    path = str(root)
    write_deltalake(
        path,
        _batch([1, 2, 3, 4], ["a", "b", "c", "d"], ["x", "y", "x", "y"]),
        partition_by=["part"],
        configuration=CDF_ON,
    )
    write_deltalake(path, _batch([5, 6], ["e", "f"], ["z", "x"]), mode="append")
    RsDeltaTable(path).update(updates={"name": "'B'"}, predicate="id = 2")
    RsDeltaTable(path).delete("id = 3")
    (
        RsDeltaTable(path)
        .merge(
            _batch([4, 7], ["D", "g"], ["y", "z"]),
            predicate="t.id = s.id",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return root


def _copy(spark: Any, history: Path, root: Path) -> DeltaTable:
    """A copy of ``history`` at ``root`` (tests that write commits write to a copy)."""
    shutil.copytree(history, root)
    return DeltaTable.for_path(spark, str(root))


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A table root with characters that need escaping in URIs (delta-rs rejects glob ones).
    return _write_history(tmp_path_factory.mktemp("cdf") / "rs t+%")


# ---------------------------------------------------------------------------- column mapping

_CM_IDS = {"id": ("col-id", 1), "name": ("col-name", 2), "part": ("col-part", 3)}
_CM_PHYSICAL = {"id": pa.int64(), "name": pa.string()}


def _cm_schema(names: dict[str, str]) -> str:
    """The schema with ``names`` (physical -> logical) for the columns still present."""
    types = {"col-id": "long", "col-name": "string", "col-part": "string"}
    ids = {physical: column_id for physical, column_id in _CM_IDS.values()}
    fields = [
        {
            "name": logical,
            "type": types[physical],
            "nullable": True,
            "metadata": {
                "delta.columnMapping.id": ids[physical],
                "delta.columnMapping.physicalName": physical,
            },
        }
        for physical, logical in names.items()
    ]
    return json.dumps({"type": "struct", "fields": fields})


def _cm_metadata(names: dict[str, str]) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "cm-table",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _cm_schema(names),
            "partitionColumns": [names["col-part"]],
            "configuration": {
                "delta.columnMapping.mode": "name",
                "delta.columnMapping.maxColumnId": "3",
                **CDF_ON,
            },
            "createdTime": T0 * 1000,
        }
    }


def _cm_file(root: Path, name: str, rows: list[tuple[int, str]], change: list[str] | None) -> int:
    """A parquet file with physical column names (and ``_change_type`` for cdc files)."""
    columns: dict[str, pa.Array] = {
        "col-id": pa.array([r[0] for r in rows], pa.int64()),
        "col-name": pa.array([r[1] for r in rows], pa.string()),
    }
    if change is not None:
        columns["_change_type"] = pa.array(change, pa.string())
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), target)
    return target.stat().st_size


def _cm_add(root: Path, name: str, part: str, rows: list[tuple[int, str]]) -> dict[str, Any]:
    size = _cm_file(root, name, rows, None)
    return {
        "add": {
            "path": name,
            "partitionValues": {"col-part": part},
            "size": size,
            "modificationTime": T0 * 1000,
            "dataChange": True,
        }
    }


def _commit(root: Path, version: int, operation: str, *actions: dict[str, Any]) -> None:
    info = {"commitInfo": {"timestamp": (T0 + version) * 1000, "operation": operation}}
    lines = [json.dumps(action) for action in (info, *actions)]
    (root / "_delta_log" / commit_name(version)).write_text("\n".join(lines) + "\n")


def _write_column_mapped_history(root: Path) -> Path:
    """A name-mode column-mapped CDF table, written by hand (delta-rs cannot write one):
    v0 create (partitioned by ``part``) + insert, v1 insert, v2 update (cdc files), v3 RENAME
    name -> label, v4 insert, v5 RENAME label -> title."""
    (root / "_delta_log").mkdir(parents=True)
    names = {"col-id": "id", "col-name": "name", "col-part": "part"}
    protocol = {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}}
    rows_x = [(1, "a"), (2, "b")]
    _commit(
        root, 0, "WRITE", protocol, _cm_metadata(names), _cm_add(root, "f0.parquet", "x", rows_x)
    )
    _commit(root, 1, "WRITE", _cm_add(root, "f1.parquet", "y", [(3, "c")]))
    cdc_size = _cm_file(
        root,
        "_change_data/c2.parquet",
        [(2, "b"), (2, "B")],
        ["update_preimage", "update_postimage"],
    )
    _commit(
        root,
        2,
        "UPDATE",
        {
            "remove": {
                "path": "f0.parquet",
                "partitionValues": {"col-part": "x"},
                "dataChange": True,
            }
        },
        _cm_add(root, "f2.parquet", "x", [(1, "a"), (2, "B")]),
        {
            "cdc": {
                "path": "_change_data/c2.parquet",
                "partitionValues": {"col-part": "x"},
                "size": cdc_size,
                "dataChange": False,
            }
        },
    )
    _commit(root, 3, "RENAME COLUMN", _cm_metadata({**names, "col-name": "label"}))
    _commit(root, 4, "WRITE", _cm_add(root, "f3.parquet", "y", [(4, "d")]))
    _commit(root, 5, "RENAME COLUMN", _cm_metadata({**names, "col-name": "title"}))
    return root


@pytest.fixture(scope="module")
def column_mapped(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _write_column_mapped_history(tmp_path_factory.mktemp("cdf") / "cm")


# ---------------------------------------------------------------------------- conformance

CONFORMANCE_CDF = [
    ("kernel/cdf-table/delta", 0, 23),
    ("delta-rs/simple_table_with_cdc/delta", 0, 3),
    ("delta-rs/checkpoint-cdf-table/delta", 3, 13),
    ("delta-rs/cdc_ict_table/delta", 0, 10),
    # Deletion vectors: a path removed and re-added with a new DV yields only the DV's diff.
    ("kernel/cdf-table-with-cdc-and-dvs/delta", 0, 43),
]


@pytest.mark.cluster
@pytest.mark.parametrize(("relative", "start", "count"), CONFORMANCE_CDF)
def test_conformance_tables_match_expected_counts_and_delta_rs(
    spark: Any, conformance_table: Any, relative: str, start: int, count: int
) -> None:
    root = conformance_table(relative)
    ict = "cdc_ict" in relative
    frame = DeltaTable.for_path(spark, str(root)).load_cdf(start)
    ours = _rows(frame, with_timestamp=ict)
    assert len(ours) == count
    assert ours == _rs_rows(root, start, with_timestamp=ict)


def _plain_rows(frame: Any) -> list[tuple[Any, ...]]:
    """Rows as tuples in column order, without _commit_timestamp, sorted."""
    columns = [c for c in frame.columns if c != "_commit_timestamp"]
    return sorted(tuple(row[c] for c in columns) for row in frame.collect())


def test_column_mapped_conformance_table_equals_delta_spark(
    spark: Any, conformance_table: Any
) -> None:
    # delta-rs refuses column-mapped CDF; these are delta-spark 4.3.1's rows (CDF on from v1).
    root = conformance_table("kernel/cdf-column-mapping-name-mode/delta")
    table = DeltaTable.for_path(spark, str(root))
    frame = table.load_cdf(1)
    assert frame.columns == ["id", "name", "value", *CDF_NAMES]
    assert _plain_rows(frame) == [
        (1, "Alice", 100.0, "delete", 4),
        (2, "Bob", 200.0, "update_preimage", 2),
        (2, "Bob", 250.0, "update_postimage", 2),
        (4, "David", 400.0, "insert", 3),
    ]
    with pytest.raises(MissingChangeDataError, match=r"range \[0 , 4\].*version \[0\]"):
        table.load_cdf(0)


def test_column_mapped_history_reads_physical_columns_and_refuses_renames_like_delta_spark(
    spark: Any, column_mapped: Path
) -> None:
    table = DeltaTable.for_path(spark, str(column_mapped))
    before = table.load_cdf(0, 2)  # read with v2's schema (column mapping: the end version's)
    assert before.columns == ["id", "name", "part", *CDF_NAMES]
    assert _plain_rows(before) == [
        (1, "a", "x", "insert", 0),
        (2, "B", "x", "update_postimage", 2),
        (2, "b", "x", "insert", 0),
        (2, "b", "x", "update_preimage", 2),
        (3, "c", "y", "insert", 1),
    ]
    between = table.load_cdf(3, 4)
    assert between.columns == ["id", "label", "part", *CDF_NAMES]
    assert _plain_rows(between) == [(4, "d", "y", "insert", 4)]
    # The v3 rename lies inside [2, 5] and differs from the read schema (v5's): a schema change.
    with pytest.raises(ChangeDataFeedIncompatibleSchemaChangeError) as change:
        table.load_cdf(2, 5)
    assert change.value.getMessageParameters()["incompatible_version"] == "3"
    assert "version 2 to 3 - 1, and from version 3 to 5" in str(change.value)
    # From v3 on, the range's own start schema (label) is what v5 renamed: a data-schema error.
    with pytest.raises(ChangeDataFeedIncompatibleDataSchemaError) as data:
        table.load_cdf(3)
    assert data.value.getMessageParameters()["incompatible_version"] == "3"


def test_a_stream_across_a_column_mapping_rename_is_refused_like_delta_spark(
    spark: Any, column_mapped: Path
) -> None:
    """delta-spark's stream without a schema tracking location reads with the latest schema
    when it starts and refuses, before any row, a version whose schema differs from it by a
    rename or drop under column mapping (checked on its server with the same kind of history);
    a stream starting after the last rename reads on."""
    table = DeltaTable.for_path(spark, str(column_mapped))
    for start in (0, 3, 4):
        with pytest.raises(StreamingIncompatibleSchemaChangeError) as info:
            next(table.stream_cdf(start, stop_when_caught_up=True, poll_seconds=0))
        assert info.value.getMessageParameters()["version"] == str(start)
        assert info.value.getMessageParameters()["read_version"] == "5"
    after_renames = list(table.stream_cdf(5, stop_when_caught_up=True, poll_seconds=0))
    assert [rows.count() for _, rows in after_renames] == [0]  # v5 renames, adds no file
    ((_, rows),) = list(table.stream_cdf(stop_when_caught_up=True, poll_seconds=0))
    assert rows.columns[:3] == ["id", "title", "part"]
    assert [row[:2] for row in _plain_rows(rows)] == [(1, "a"), (2, "B"), (3, "c"), (4, "d")]


def test_a_stream_reaching_a_replaced_table_is_refused_like_delta_spark(
    spark: Any, tmp_path: Path
) -> None:
    """A metaData with a new table id (``CREATE OR REPLACE``): delta-spark's stream, reading
    with the latest metadata, refuses the earlier table's versions before any row."""
    root = tmp_path / "replaced"
    write_deltalake(str(root), pa.table({"id": pa.array([1], pa.int64())}), configuration=CDF_ON)
    first = [
        json.loads(line) for line in (root / "_delta_log" / commit_name(0)).read_text().splitlines()
    ]
    metadata = next(action["metaData"] for action in first if "metaData" in action)
    _commit(root, 1, "CREATE OR REPLACE TABLE", {"metaData": {**metadata, "id": "another-table"}})
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(DifferentDeltaTableReadByStreamingSourceError) as info:
        next(table.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0))
    parameters = info.value.getMessageParameters()
    assert (parameters["version"], parameters["table_id"]) == ("0", metadata["id"])
    assert parameters["read_table_id"] == "another-table"
    after_replace = list(table.stream_cdf(1, stop_when_caught_up=True, poll_seconds=0))
    assert [rows.count() for _, rows in after_replace] == [0]  # v1 replaces, adds no file


def test_a_stream_from_the_latest_snapshot_stamps_its_rows_with_its_in_commit_timestamp(
    spark: Any, conformance_table: Any
) -> None:
    """delta-spark passes the snapshot's in-commit timestamp with its rows; the commit files'
    own times (here rewritten, as a copy does) are not the commit's time."""
    root = conformance_table("delta-rs/cdc_ict_table/delta")
    for commit in (root / "_delta_log").glob("*.json"):
        os.utime(commit, (T0, T0))
    table = DeltaTable.for_path(spark, str(root))
    latest = table.snapshot()
    assert latest.in_commit_timestamp_ms is not None
    ((_, rows),) = list(table.stream_cdf(stop_when_caught_up=True, poll_seconds=0))
    stamps = {_plain(row["_commit_timestamp"]) for row in rows.collect()}
    assert stamps == {latest.in_commit_timestamp_ms}


def test_added_column_reads_with_the_latest_schema_and_ends_stream_batches(
    spark: Any, tmp_path: Path
) -> None:
    root = str(tmp_path / "evolve")
    write_deltalake(root, pa.table({"id": pa.array([1], pa.int64())}), configuration=CDF_ON)
    wider = pa.table({"id": pa.array([2], pa.int64()), "extra": pa.array(["e"], pa.string())})
    write_deltalake(root, wider, mode="append", schema_mode="merge")
    table = DeltaTable.for_path(spark, root)
    # delta-spark's legacy mode (no column mapping): the latest schema, even for v0 alone.
    assert _plain_rows(table.load_cdf(0, 0)) == [(1, None, "insert", 0)]
    batches = list(table.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0))
    assert [offset.position for offset, _ in batches] == [
        (1, METADATA_CHANGE_INDEX),
        (2, BASE_INDEX),
    ]
    assert json.loads(batches[0][0].to_json())["sourceVersion"] == 3
    # Every batch up to the version the stream started at has that version's schema, as
    # delta-spark's stream reads them (checked on its server): v0's row has the later column.
    assert [frame.columns for _, frame in batches] == [
        ["id", "extra", "_change_type", "_commit_version", "_commit_timestamp"]
    ] * 2
    assert [_plain_rows(frame) for _, frame in batches] == [
        [(1, None, "insert", 0)],
        [(2, "e", "insert", 1)],
    ]
    # Resuming from the barrier reads on with the new schema.
    _, resumed = next(table.stream_cdf(offset=batches[0][0].to_json()))
    assert _plain_rows(resumed) == [(2, "e", "insert", 1)]
    # A column added after the stream started (delta-spark's stream stops there, to be
    # restarted): the batch of that version has it.
    stream = table.stream_cdf(1, stop_when_caught_up=True, poll_seconds=0)
    offset, first = next(stream)
    assert (offset.position, _plain_rows(first)) == ((2, BASE_INDEX), [(2, "e", "insert", 1)])
    widest = pa.table({"id": [3], "extra": ["f"], "more": [True]})
    write_deltalake(root, widest, mode="append", schema_mode="merge")
    ((offset, after),) = list(stream)
    assert offset.position == (3, BASE_INDEX)
    assert after.columns[:3] == ["id", "extra", "more"]
    assert _plain_rows(after) == [(3, "f", True, "insert", 2)]


def test_a_stream_backfilling_across_a_type_change_is_refused_like_delta_spark(
    spark: Any, tmp_path: Path
) -> None:
    """An overwrite that changes a column's type: a stream starting before it would read the
    older files with the new type. delta-spark's stream refuses at the first such version
    (``DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS`` when given a starting version, else
    ``..._WITH_VERSION``; checked on its server with the same history)."""
    root = str(tmp_path / "retyped")
    write_deltalake(root, pa.table({"id": pa.array([1], pa.int32())}), configuration=CDF_ON)
    write_deltalake(
        root,
        pa.table({"id": pa.array(["a"], pa.string())}),
        mode="overwrite",
        schema_mode="overwrite",
    )
    table = DeltaTable.for_path(spark, root)
    with pytest.raises(StreamSchemaChangedWithStartingOptionsError) as started:
        next(table.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0))
    parameters = started.value.getMessageParameters()
    assert (parameters["version"], parameters["read_version"]) == ("0", "1")
    assert (parameters["data_schema"], parameters["read_schema"]) == (
        "struct<id:int>",
        "struct<id:string>",
    )
    assert "start a new stream after version 0" in str(started.value)
    offset = DeltaSourceOffset(table.snapshot().metadata.id, 0, BASE_INDEX, False)
    with pytest.raises(StreamSchemaChangedError) as resumed:
        next(table.stream_cdf(offset=offset, stop_when_caught_up=True, poll_seconds=0))
    assert resumed.value.getErrorClass() == "DELTA_SCHEMA_CHANGED_WITH_VERSION"
    ((_, latest),) = list(table.stream_cdf(stop_when_caught_up=True, poll_seconds=0))
    assert _plain_rows(latest) == [("a", "insert", 1)]


def test_inline_dv_with_an_overflowing_z85_group_is_decoded_as_delta_spark_does(
    spark: Any, conformance_table: Any
) -> None:
    """The v5 inline DV's last Z85 group ("##093") exceeds 2**32. delta-spark's
    ``Codec.Base85Codec.decodeBlocks`` sums the group in a Long and writes ``sum.toInt`` (the
    low 32 bits), so the DV names row 28168 of a 10-row file: v5 deletes no visible row and v6
    (which drops the DV) restores none. delta-spark 4.3.1 returns exactly our 22 rows; delta-rs
    decodes the group differently (row 3) and reports two more: v5 delete 3, v6 insert 3."""
    root = conformance_table("kernel/cdf-table-with-dv/delta")
    ours = _rows(DeltaTable.for_path(spark, str(root)).load_cdf(0))
    theirs = _rs_rows(root)
    assert len(ours) == 22
    assert Counter(ours) - Counter(theirs) == Counter()
    only_delta_rs = Counter(theirs) - Counter(ours)
    assert sorted(only_delta_rs.elements()) == [
        (("_change_type", "delete"), ("_commit_version", 5), ("value", 3)),
        (("_change_type", "insert"), ("_commit_version", 6), ("value", 3)),
    ]


def test_commit_timestamps_are_monotonized_file_times(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("delta-rs/simple_table_with_cdc/delta")
    # v1's file time goes backwards: delta-spark uses v0's time + 1 ms for it.
    times = {0: T0, 1: T0 - 50, 2: T0 + 100}
    for version, seconds in times.items():
        os.utime(root / "_delta_log" / commit_name(version), (seconds, seconds))
    table = DeltaTable.for_path(spark, str(root))
    stamps = {
        row["_commit_version"]: _plain(row["_commit_timestamp"])
        for row in table.load_cdf(0).select("_commit_version", "_commit_timestamp").collect()
    }
    assert stamps == {1: T0 * 1000 + 1, 2: (T0 + 100) * 1000}
    between = datetime.fromtimestamp(T0 + 50, tz=timezone.utc)
    assert {r["_commit_version"] for r in table.load_cdf(starting_timestamp=between).collect()} == {
        2
    }
    assert {
        r["_commit_version"] for r in table.load_cdf(0, ending_timestamp=between).collect()
    } == {1}


# ---------------------------------------------------------------------------- delta-rs oracle


def test_delta_rs_written_history_matches_delta_rs(spark: Any, history: Path) -> None:
    table = DeltaTable.for_path(spark, str(history))
    ours = _rows(table.load_cdf(0))
    assert ours == _rs_rows(history)
    kinds = Counter(dict(row)["_change_type"] for row in ours)
    assert kinds == {"insert": 7, "update_preimage": 2, "update_postimage": 2, "delete": 1}


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_range_splits_concatenate(spark: Any, history: Path, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, 3))
    b = data.draw(st.integers(a, 3))
    c = data.draw(st.integers(b + 1, 4))
    table = DeltaTable.for_path(spark, str(history))
    whole = _rows(table.load_cdf(a, c))
    split = _rows(table.load_cdf(a, b).unionByName(table.load_cdf(b + 1, c)))
    assert whole == split


# ---------------------------------------------------------------------------- errors


def test_errors(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "late"
    write_deltalake(str(root), _batch([1], ["a"], ["x"]))  # v0: no CDF
    RsDeltaTable(str(root)).alter.set_table_properties(CDF_ON)  # v1
    write_deltalake(str(root), _batch([2], ["b"], ["y"]), mode="append")  # v2
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(MissingChangeDataError) as info:
        table.load_cdf(0)
    assert "range [0 , 2]" in str(info.value) and "version [0]" in str(info.value)
    assert [r["id"] for r in table.load_cdf(1).collect()] == [2]
    with pytest.raises(CdcStartVersionAfterLatestError, match=r"Start version 5 .* latest table"):
        table.load_cdf(5)
    assert table.load_cdf(5, allow_out_of_range=True).count() == 0
    with pytest.raises(InvalidCdcRangeError):
        table.load_cdf(2, 1)
    with pytest.raises(NoStartForCdcReadError):  # delta-spark has no default start either
        table.load_cdf()
    offset = DeltaSourceOffset("another-table", 1, BASE_INDEX, False)
    with pytest.raises(DifferentDeltaTableReadByStreamingSourceError, match="another-table"):
        next(table.stream_cdf(offset=offset))


def test_a_gap_in_the_log_is_a_data_loss_error(spark: Any, history: Path, tmp_path: Path) -> None:
    root = tmp_path / "gap"
    shutil.copytree(history, root)
    RsDeltaTable(str(root)).create_checkpoint()
    (root / "_delta_log" / commit_name(1)).unlink()
    table = DeltaTable.for_path(spark, str(root))
    # delta-spark's batch reader would skip v1 silently; we refuse, as its streams do.
    with pytest.raises(MissingFilesUnexpectedVersionError) as info:
        table.load_cdf(0)
    assert info.value.getMessageParameters()["expected_version"] == "1"
    assert info.value.getMessageParameters()["seen_version"] == "2"
    with pytest.raises(MissingFilesUnexpectedVersionError):
        next(table.stream_cdf(0))
    assert len(_rows(table.load_cdf(4))) == 3  # v4 rebuilds from the checkpoint


def test_a_range_crossing_an_unreadable_protocol_fails_naming_its_version(
    spark: Any, history: Path, tmp_path: Path
) -> None:
    root = tmp_path / "upgraded"
    table = _copy(spark, history, root)
    stream = table.stream_cdf(0, poll_seconds=0)
    offset, _ = next(stream)
    assert offset.position == (5, BASE_INDEX)
    log = root / "_delta_log"
    created = [json.loads(line) for line in (log / commit_name(0)).read_text().splitlines()]
    metadata = next(action["metaData"] for action in created if "metaData" in action)
    future = ["futureFeature"]
    upgrade = {"minReaderVersion": 3, "minWriterVersion": 7}
    _commit(root, 5, "UPGRADE", {"protocol": {**upgrade, "readerFeatures": future}})
    _commit(root, 6, "SET TBLPROPERTIES", {"metaData": {**metadata, "description": "later"}})

    def failed_version(read: Any) -> str:
        with pytest.raises(UnsupportedFeaturesForReadError) as info:
            read()
        assert info.value.getMessageParameters()["features"] == "futureFeature"
        return info.value.getMessageParameters()["version"]

    # The running stream reaches the upgrade; batch ranges cross it or start after it.
    assert failed_version(lambda: next(stream)) == "5"
    assert failed_version(lambda: table.load_cdf(0)) == "5"
    # v6 has a metaData but no protocol action: the protocol in force there is still checked.
    assert failed_version(lambda: table.load_cdf(6)) == "6"
    assert failed_version(lambda: table.load_cdf(0, 4)) == "6"  # the latest schema's snapshot


# ---------------------------------------------------------------------------- streaming


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(max_files=st.sampled_from([1, 2, 3]), max_bytes=st.sampled_from([None, 1500]))
def test_stream_batches_concatenate_to_load_cdf_and_resume_exactly(
    spark: Any, history: Path, max_files: int, max_bytes: int | None
) -> None:
    table = DeltaTable.for_path(spark, str(history))
    limits = {"max_files_per_trigger": max_files, "max_bytes_per_trigger": max_bytes}
    batches = list(table.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0, **limits))
    assert len(batches) >= 3
    offsets = [offset for offset, _ in batches]
    assert offsets == sorted(offsets)
    assert offsets[-1].position == (5, BASE_INDEX)
    union = batches[0][1]
    for _, frame in batches[1:]:
        union = union.unionByName(frame)
    assert _rows(union) == _rows(table.load_cdf(0))
    # Restarting from any yielded offset (as JSON) gives exactly the batch that followed it.
    for (offset, _), (_, expected) in itertools.pairwise(batches):
        resumed = table.stream_cdf(offset=offset.to_json(), **limits)
        _, frame = next(resumed)
        assert _rows(frame) == _rows(expected)


def test_file_changes_respect_limits(spark: Any, history: Path) -> None:
    table = DeltaTable.for_path(spark, str(history))
    everything = table.cdf_file_changes(0, BASE_INDEX)
    files = [f for f in everything if not f.is_sentinel]
    offset = DeltaSourceOffset(everything.reservoir_id, 0, BASE_INDEX, False)
    seen = []
    while True:
        batch = table.cdf_file_changes(offset.reservoir_version, offset.index, max_files=2)
        admitted = [f for f in batch if not f.is_sentinel]
        assert len(admitted) <= 2 or len({f.version for f in admitted}) == 1
        seen.extend(admitted)
        following = next_offset(offset, batch.files)
        if following == offset:
            break
        offset = following
    assert seen == files
    end = DeltaSourceOffset(everything.reservoir_id, 2, BASE_INDEX, False)
    bounded = table.cdf_file_changes(0, BASE_INDEX, end_offset=end.to_json())
    assert {f.version for f in bounded} == {0, 1, 2}


def test_stream_starts_with_the_snapshot_then_polls(
    spark: Any, history: Path, tmp_path: Path
) -> None:
    root = tmp_path / "poll"
    table = _copy(spark, history, root)
    stream = table.stream_cdf(poll_seconds=0.2)
    offset, first = next(stream)
    snapshot_rows = _rows(first)
    assert {dict(r)["_change_type"] for r in snapshot_rows} == {"insert"}
    assert {dict(r)["_commit_version"] for r in snapshot_rows} == {4}
    assert sorted(dict(r)["id"] for r in snapshot_rows) == [1, 2, 4, 5, 6, 7]
    assert offset.position == (5, BASE_INDEX)
    assert json.loads(offset.to_json())["index"] == -1

    def append_later() -> None:
        time.sleep(1.0)
        write_deltalake(str(root), _batch([9], ["i"], ["x"]), mode="append")

    writer = threading.Thread(target=append_later)
    writer.start()
    offset, frame = next(stream)
    writer.join()
    assert [(dict(r)["id"], dict(r)["_commit_version"]) for r in _rows(frame)] == [(9, 5)]
    assert offset.position == (6, BASE_INDEX)


def test_cli_prints_change_rows(spark_remote: str, history: Path, capsys: Any) -> None:
    args = ["--remote", spark_remote, "cdf", str(history), "--from", "3", "--to", "3"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["id"], r["_change_type"], r["_commit_version"]) for r in rows] == [(3, "delete", 3)]


def test_out_of_range_ends_and_stream_starts_are_refused_like_delta_spark(
    spark: Any, conformance_table: Any
) -> None:
    """An ending timestamp after the last commit is delta-spark's time travel refusal
    (DELTA_TIMESTAMP_GREATER_THAN_COMMIT) unless out of range is allowed, which ends at the
    latest version; a stream starting after the latest version is DELTA_VERSION_NOT_FOUND."""
    table = DeltaTable.for_path(
        spark, str(conformance_table("delta-rs/simple_table_with_cdc/delta"))
    )
    later = "2100-01-01"
    with pytest.raises(TimestampGreaterThanCommitError):
        table.load_cdf(0, ending_timestamp=later)
    allowed = table.load_cdf(0, ending_timestamp=later, allow_out_of_range=True)
    assert _rows(allowed) == _rows(table.load_cdf(0))
    latest = table.snapshot().version
    with pytest.raises(VersionNotFoundError):
        next(table.stream_cdf(latest + 1, stop_when_caught_up=True))
