"""Which rows each file action contributes (no Spark): paths, change types, DV differences."""

from __future__ import annotations

from typing import Any

from delta_connect_py.cdf.commits import commit_timestamps_ms
from delta_connect_py.cdf.rows import entries_of
from delta_connect_py.data import data_file_location
from delta_connect_py.protocol.cdf import IndexedFile, filter_cdc_actions, index_commit
from delta_connect_py.protocol.filenames import LogFile, LogFileKind, commit_name

ROOT = "file:/t a"
OLD = {"storageType": "i", "pathOrInlineDv": "old", "sizeInBytes": 1, "cardinality": 1}
NEW = {"storageType": "i", "pathOrInlineDv": "new", "sizeInBytes": 1, "cardinality": 2}


def _files(version: int, lines: list[dict[str, Any]]) -> list[IndexedFile]:
    return index_commit(filter_cdc_actions(version, lines))


def _summary(lines: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    entries = entries_of(ROOT, _files(1, lines), {1: 1000})
    return [
        (
            e.location.rsplit("/", 1)[-1],
            e.change_type,
            None if e.include_dv is None else e.include_dv["pathOrInlineDv"],
            None if e.exclude_dv is None else e.exclude_dv["pathOrInlineDv"],
        )
        for e in entries
    ]


def test_file_locations_are_decoded_and_resolved_against_the_root() -> None:
    assert data_file_location("p=a%2520b/x%20y.parquet", ROOT) == "file:/t a/p=a%20b/x y.parquet"
    assert data_file_location("s3://bucket/a%20b.parquet", ROOT) == "s3://bucket/a b.parquet"
    assert data_file_location("/abs/f.parquet", ROOT) == "file:/abs/f.parquet"


def test_plain_adds_and_removes_are_inserts_and_deletes() -> None:
    lines = [
        {"add": {"path": "a", "dataChange": True}},
        {"remove": {"path": "b", "dataChange": True}},
    ]
    assert _summary(lines) == [("a", "insert", None, None), ("b", "delete", None, None)]


def test_cdc_files_keep_their_own_change_type() -> None:
    lines = [{"add": {"path": "a", "dataChange": True}}, {"cdc": {"path": "c"}}]
    assert _summary(lines) == [("c", None, None, None)]


def test_a_dv_added_to_a_live_file_deletes_exactly_its_rows() -> None:
    lines = [
        {"remove": {"path": "f", "dataChange": True}},
        {"add": {"path": "f", "dataChange": True, "deletionVector": NEW}},
    ]
    assert _summary(lines) == [("f", "delete", "new", None)]


def test_a_dv_replaced_yields_the_difference_both_ways() -> None:
    lines = [
        {"remove": {"path": "f", "dataChange": True, "deletionVector": OLD}},
        {"add": {"path": "f", "dataChange": True, "deletionVector": NEW}},
    ]
    assert _summary(lines) == [("f", "delete", "new", "old"), ("f", "insert", "old", "new")]


def test_a_dv_dropped_restores_its_rows() -> None:
    lines = [
        {"remove": {"path": "f", "dataChange": True, "deletionVector": OLD}},
        {"add": {"path": "f", "dataChange": True}},
    ]
    assert _summary(lines) == [("f", "insert", "old", None)]


def test_unpaired_actions_with_dvs_exclude_their_deleted_rows() -> None:
    lines = [
        {"remove": {"path": "g", "dataChange": True, "deletionVector": OLD}},
        {"add": {"path": "h", "dataChange": True, "deletionVector": NEW}},
    ]
    assert _summary(lines) == [("g", "delete", None, "old"), ("h", "insert", None, "new")]


def test_skipped_merges_contribute_nothing() -> None:
    metrics = {
        "numTargetRowsInserted": "0",
        "numTargetRowsUpdated": "0",
        "numTargetRowsDeleted": "0",
    }
    lines = [
        {"commitInfo": {"operation": "MERGE", "operationMetrics": metrics}},
        {"add": {"path": "a", "dataChange": True}},
    ]
    assert _summary(lines) == []


def _commit(version: int, mtime: int) -> LogFile:
    name = commit_name(version)
    return LogFile(f"/log/{name}", name, LogFileKind.COMMIT, version, 1, mtime)


def test_commit_timestamps_prefer_ict_else_monotonized_file_times() -> None:
    commits = {v: _commit(v, t) for v, t in enumerate([100, 90, 300, 50])}
    changes = [filter_cdc_actions(3, [{"commitInfo": {"inCommitTimestamp": 7}}])]
    assert commit_timestamps_ms(commits, changes, 0, 3) == {0: 100, 1: 101, 2: 300, 3: 7}
    # Monotonization starts 100 versions before the range, not at version 0.
    many = {v: _commit(v, 1000 if v == 0 else v) for v in range(150)}
    stamps = commit_timestamps_ms(many, [], 140, 149)
    assert stamps[140] == 140
