"""DeltaTable.history(): delta-spark's DESCRIBE HISTORY columns, newest first, timestamps.

Commit file modification times are set with ``os.utime`` (git checkouts do not keep them).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake

import delta_connect_py.plans.loading as loading
from delta_connect_py import DeltaTable
from delta_connect_py.errors import CorruptLogFileError, UnsupportedFeaturesForReadError
from delta_connect_py.history import HISTORY_COLUMNS
from delta_connect_py.protocol.filenames import commit_name
from tests.conftest import CONFORMANCE

T0 = 1_700_000_000


def _ms(value: dt.datetime) -> int:
    return int(value.replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def _rows(df: Any) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in df.collect()]


def test_history_columns_order_and_arbitrary_parameters(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/commit-info-containing-arbitrary-operationParams-types/delta")
    commits = sorted((root / "_delta_log").glob("*.json"))
    for version, path in enumerate(commits):
        os.utime(path, (T0 + 10 - version, T0 + 10 - version))  # decreasing: monotonized
    hist = DeltaTable.for_path(spark, str(root)).history()
    assert tuple(hist.columns) == HISTORY_COLUMNS
    rows = _rows(hist)
    assert [r["version"] for r in rows] == list(range(len(commits)))[::-1]
    first_file_time = (T0 + 10) * 1000
    assert [_ms(r["timestamp"]) for r in rows][::-1] == [
        first_file_time + i for i in range(len(commits))
    ]
    by_version = {r["version"]: r for r in rows}
    assert by_version[0]["operation"] == "CREATE TABLE AS SELECT"
    assert by_version[2]["operation"] == "OPTIMIZE"
    assert by_version[2]["operationParameters"]["auto"] == "false"
    assert by_version[2]["operationMetrics"]["numRemovedFiles"] == "2"
    assert by_version[1]["readVersion"] == 0
    assert by_version[1]["isBlindAppend"] is True
    assert by_version[0]["engineInfo"].startswith("Apache-Spark/3.5.3")


def test_history_limit_takes_the_newest(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    table = DeltaTable.for_path(spark, str(root))
    assert [r["version"] for r in _rows(table.history(limit=3))] == [13, 12, 11]
    assert _rows(table.history(limit=0)) == []


def test_history_reads_many_commits_by_worker_lines_alike(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above ``MAX_FILES_FOR_JSON_SOURCE`` commits, workers read only the commitInfo lines:
    the same rows as Spark's JSON source."""
    root = conformance_table("delta-rs/table_with_deletion_logs/delta")
    table = DeltaTable.for_path(spark, str(root))
    by_json_source = _rows(table.history())
    monkeypatch.setattr(loading, "MAX_FILES_FOR_JSON_SOURCE", 0)
    by_worker_lines = _rows(table.history())
    assert len(by_json_source) == 21
    assert by_worker_lines == by_json_source


#: commitInfo lines that do not parse as that action: not JSON, and a field of the wrong type.
MALFORMED_COMMIT_INFO = {
    "not JSON": '{"commitInfo":{"timestamp":1,"operation":"WRITE",BROKEN',
    "wrong type": '{"commitInfo":{"timestamp":1,"operation":"WRITE","readVersion":"old"}}',
}


@pytest.mark.worker_errors
@pytest.mark.parametrize("reader", ["json source", "worker lines"])
@pytest.mark.parametrize("kind", sorted(MALFORMED_COMMIT_INFO))
def test_malformed_commit_info_names_the_file(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch, reader: str, kind: str
) -> None:
    """history() reads eagerly: a bad commitInfo line fails the call itself with
    DELTA_CORRUPT_LOG_FILE naming the commit file, not a later collect with Spark's error."""
    if reader == "worker lines":
        monkeypatch.setattr(loading, "MAX_FILES_FOR_JSON_SOURCE", 0)
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    commit = root / "_delta_log" / commit_name(12)
    lines = commit.read_text().splitlines()
    commit.write_text(
        "\n".join(MALFORMED_COMMIT_INFO[kind] if '"commitInfo"' in line else line for line in lines)
        + "\n"
    )
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(CorruptLogFileError, match=commit.name):
        table.history()
    assert [r["version"] for r in _rows(table.history(limit=1))] == [13]


def test_history_of_a_table_with_an_unknown_reader_feature_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    """As delta-spark's DESCRIBE HISTORY, which loads the latest snapshot first."""
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"x": [1]}))
    upgrade = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["futureFeature"]}
    (root / "_delta_log" / commit_name(1)).write_text(
        json.dumps({"commitInfo": {"operation": "UPGRADE"}})
        + "\n"
        + json.dumps({"protocol": {**upgrade, "writerFeatures": ["futureFeature"]}})
        + "\n"
    )
    with pytest.raises(UnsupportedFeaturesForReadError) as info:
        DeltaTable.for_path(spark, str(root)).history()
    assert info.value.getMessageParameters()["features"] == "futureFeature"
    assert info.value.getMessageParameters()["version"] == "1"


def test_history_uses_in_commit_timestamps(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("delta-rs/cdc_ict_table/delta")
    expected = {}
    for path in sorted((root / "_delta_log").glob("*.json")):
        info = json.loads(path.read_text().splitlines()[0])["commitInfo"]
        expected[int(path.name.split(".")[0])] = info["inCommitTimestamp"]
    rows = _rows(DeltaTable.for_path(spark, str(root)).history())
    assert {r["version"]: _ms(r["timestamp"]) for r in rows} == expected


def test_history_matches_delta_rs(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"a": [1, 2, 3]}))
    write_deltalake(str(path), pa.table({"a": [4]}), mode="append")
    RsDeltaTable(str(path)).delete("a = 2")
    for version in range(3):
        os.utime(path / "_delta_log" / commit_name(version), (T0 + version, T0 + version))
    ours = _rows(DeltaTable.for_path(spark, str(path)).history())
    theirs = RsDeltaTable(str(path)).history()
    assert [r["version"] for r in ours] == [h["version"] for h in theirs]
    assert [r["operation"] for r in ours] == [h["operation"] for h in theirs]
    assert [r["readVersion"] for r in ours] == [h.get("readVersion") for h in theirs]
    assert [_ms(r["timestamp"]) for r in ours] == [(T0 + v) * 1000 for v in (2, 1, 0)]


def test_cli_history(spark_remote: str, capsys: pytest.CaptureFixture[str]) -> None:
    from delta_connect_py.cli import main

    table = str(CONFORMANCE / "delta-rs/table_with_deletion_logs/delta")
    assert main(["--remote", spark_remote, "history", table, "--limit", "2"]) == 0
    history = json.loads(capsys.readouterr().out)["history"]
    assert [h["version"] for h in history] == [20, 19]
