"""The one-task replay (commits parsed by pyarrow in the worker) against Spark's JSON reader.

Every state row must be the same whichever reads the commits, and where pyarrow cannot tell
what Spark would make of a line (a string map whose object lacks a key another object has, or
has a null value) the replay falls back to Spark rather than guess.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from delta_connect_py import DeltaTable
from delta_connect_py.errors import CommitParseFallbackError
from delta_connect_py.plans import replay
from tests.histories import first_commit

pytestmark = pytest.mark.integration


def _add(path: str, partition_values: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "add": {
            "path": path,
            "partitionValues": partition_values,
            "size": 10,
            "modificationTime": 1,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 1, "minValues": {"s": 'é\n"x"'}}),
            **extra,
        }
    }


def _write(table: Path, commits: list[list[dict[str, Any]]], newline: str = "\n") -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for version, actions in enumerate(commits):
        text = "".join(json.dumps(action) + newline for action in actions)
        (log / f"{version:020d}.json").write_bytes(text.encode())


def _rows(spark: Any, table: Path, one_task_bytes: int) -> list[str]:
    with mock.patch.object(replay, "ONE_TASK_COMMIT_BYTES", one_task_bytes):
        snapshot = DeltaTable.for_path(spark, str(table)).snapshot()
        rows = [row.asDict(recursive=True) for row in snapshot.state_df().collect()]
    return sorted(json.dumps(row, sort_keys=True) for row in rows)


def _one_task_used(spark: Any, table: Path) -> bool:
    """Whether the one-task replay succeeded (rather than falling back to Spark)."""
    outcome: list[bool] = []
    real = replay._replayed_in_one_task

    def spy(*args: Any) -> Any:
        try:
            result = real(*args)
        except CommitParseFallbackError:
            outcome.append(False)
            raise
        outcome.append(True)
        return result

    with mock.patch.object(replay, "_replayed_in_one_task", spy):
        DeltaTable.for_path(spark, str(table)).snapshot().state_df()
    return outcome == [True]


def _commits(second: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    metadata = {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {"o": "1"}},
            "schemaString": json.dumps({"type": "struct", "fields": []}),
            "partitionColumns": ["p", "q"],
            "configuration": {"delta.appendOnly": "false", "k": "v"},
            "createdTime": 1,
        }
    }
    return [[first_commit()[0], metadata], second]


EXACT = {
    "two keys, tags, crlf lines": (
        [
            _add("p=1/q=a/f1.parquet", {"p": "1", "q": "a"}, tags={"t": "x"}),
            _add("p=2/q=b/f2.parquet", {"q": "b", "p": "2"}, tags={"t": "y"}),
            {"remove": {"path": "p=0/f0.parquet", "partitionValues": {"p": "0", "q": "z"}}},
            {"txn": {"appId": "app", "version": 3, "lastUpdated": 5}},
        ],
        "\r\n",
    ),
    "empty maps": ([_add("f1.parquet", {}, tags={}), _add("f2.parquet", {})], "\n"),
}

FALLBACK = {
    "null partition value": [_add("f1.parquet", {"p": None, "q": "a"})],
    "a key only some objects have": [
        _add("f1.parquet", {"p": "1"}, tags={"a": "1"}),
        _add("f2.parquet", {"p": "2"}, tags={"b": "2"}),
    ],
    "a number where Spark reads a string": [{"add": {"path": 5, "size": 1}}],
    "a number as a map value": [_add("f1.parquet", {"p": 1, "q": "a"})],
}


@pytest.mark.parametrize("name", sorted(EXACT))
def test_one_task_replay_equals_spark_reader(spark: Any, tmp_path: Path, name: str) -> None:
    actions, newline = EXACT[name]
    _write(tmp_path, _commits(actions), newline)
    assert _one_task_used(spark, tmp_path)
    assert _rows(spark, tmp_path, replay.ONE_TASK_COMMIT_BYTES) == _rows(spark, tmp_path, 0)


@pytest.mark.parametrize("name", sorted(FALLBACK))
def test_ambiguous_commits_are_read_by_spark(spark: Any, tmp_path: Path, name: str) -> None:
    _write(tmp_path, _commits(FALLBACK[name]))
    assert not _one_task_used(spark, tmp_path)
    assert _rows(spark, tmp_path, replay.ONE_TASK_COMMIT_BYTES) == _rows(spark, tmp_path, 0)
