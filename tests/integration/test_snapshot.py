"""Snapshot behaviour on copies of real tables: time travel, paths, hints and errors.

delta-rs (``deltalake``) is the oracle for file sets; file modification times are set with
``os.utime`` where a test needs commit timestamps (git checkouts do not preserve them).
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import shutil
import time
import weakref
from collections.abc import Iterator
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake

from delta_connect_py import DeltaTable
from delta_connect_py.errors import (
    CorruptLogFileError,
    InvalidTimestampError,
    LogFileOutsideTableError,
    MissingCommitInfoError,
    MissingCommitTimestampError,
    MissingPartFilesError,
    TimestampEarlierThanCommitRetentionError,
    TimestampGreaterThanCommitError,
    TimestampOutOfRangeError,
    VersionNotFoundError,
)
from delta_connect_py.protocol.filenames import commit_name
from tests.checkpoint_paths import checkpoint_files
from tests.conftest import log_bytes

T0 = 1_700_000_000  # seconds


def _files(snapshot: Any) -> set[str]:
    return {unquote(row["path"]) for row in snapshot.all_files().select("path").collect()}


def _rs_files(path: Path, version: int | None = None) -> set[str]:
    table = RsDeltaTable(str(path), version=version)
    return {unquote(p) for p in table.get_add_actions(flatten=True).column("path").to_pylist()}


def _set_commit_times(table: Path, seconds_by_version: dict[int, int]) -> None:
    for version, seconds in seconds_by_version.items():
        os.utime(table / "_delta_log" / commit_name(version), (seconds, seconds))


def test_time_travel_by_version_matches_delta_rs(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    table = DeltaTable.for_path(spark, str(root))
    assert table.latest_version() == 13
    for version in (0, 5, 10, 12, 13):
        snapshot = table.snapshot(version)
        assert snapshot.version == version
        assert _files(snapshot) == _rs_files(root, version)


def test_time_travel_by_timestamp_uses_monotonized_commit_times(
    spark: Any, conformance_table: Any
) -> None:
    root = conformance_table("dat/multi_partitioned/delta")
    # v2's file time goes backwards: delta-spark treats it as v1's time + 1 ms.
    _set_commit_times(root, {0: T0, 1: T0 + 100, 2: T0 + 50})
    table = DeltaTable.for_path(spark, str(root))
    at = datetime.fromtimestamp
    assert table.snapshot(timestamp=at(T0 + 10, tz=timezone.utc)).version == 0
    assert table.snapshot(timestamp=at(T0 + 100, tz=timezone.utc)).version == 1
    assert table.version_at(datetime.fromtimestamp(T0 + 100.001, tz=timezone.utc)) == 2
    latest = table.snapshot()
    assert latest.timestamp_ms == (T0 + 50) * 1000  # the commit file's own time
    with pytest.raises(TimestampEarlierThanCommitRetentionError):
        table.snapshot(timestamp=at(T0 - 1, tz=timezone.utc))
    with pytest.raises(TimestampGreaterThanCommitError):
        table.snapshot(timestamp="2100-01-01 00:00:00")


@pytest.fixture
def session_time_zone(spark: Any) -> Iterator[str]:
    """The session's time zone set to one far from UTC for a test, then restored."""
    zone = "America/Los_Angeles"  # UTC-8 in January
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        yield zone
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)


def test_timestamp_strings_are_read_as_spark_casts_them_in_the_session_time_zone(
    spark: Any, conformance_table: Any, session_time_zone: str
) -> None:
    """As delta-spark reads ``timestampAsOf`` and ``startingTimestamp`` (checked on its server:
    a zone-less time in the session's zone, Spark's forms, ISO week dates refused)."""
    root = conformance_table("dat/multi_partitioned/delta")
    hour = 3600
    t0 = 1_704_067_200  # 2024-01-01 00:00 UTC
    _set_commit_times(root, {0: t0, 1: t0 + 6 * hour, 2: t0 + 12 * hour})
    table = DeltaTable.for_path(spark, str(root))
    # 2023-12-31 20:00 in Los Angeles is 2024-01-01 04:00 UTC (v0); read as UTC it would be
    # before the first commit. 22:00 there is 06:00 UTC, exactly v1's time.
    assert table.version_at("2023-12-31 20:00:00") == 0
    assert table.version_at("2023-12-31 22:00:00") == 1
    assert table.version_at(datetime(2023, 12, 31, 22)) == 1  # a naive datetime likewise
    assert table.version_at("2024-01-01 05:59:59 UTC") == 0
    assert table.version_at("2024-01-01T06:00:00Z") == 1
    assert table.version_at("2024-01-01 12:59:59 Europe/Paris") == 1  # 11:59:59 UTC
    assert table.version_at("2024-01-01T12:00:00.000999Z") == 2  # sub-millisecond dropped
    assert table.snapshot(timestamp="2024-01-01 04:00").version == 2  # 12:00 UTC
    cdf_root = conformance_table("kernel/cdf-table/delta")
    _set_commit_times(cdf_root, {v: t0 + 6 * hour * v for v in range(4)})
    cdf_table = DeltaTable.for_path(spark, str(cdf_root))
    changes = cdf_table.load_cdf(
        starting_timestamp="2023-12-31 20:00:00", ending_timestamp="2024-01-01 04:00:00"
    )
    assert {row["_commit_version"] for row in changes.collect()} == {1, 2}
    for text in ("2024-W01", "20240101T000000", "noon", ""):
        with pytest.raises(InvalidTimestampError) as info:
            table.version_at(text)
        assert info.value.error_class == "DELTA_TIMESTAMP_INVALID", text
        assert f"('{text}')" in str(info.value)
    with pytest.raises(InvalidTimestampError):
        table.load_cdf(starting_timestamp="2024-W01")


def _ict_enabled_at_version_3(root: Path, ict_ms: dict[int, int]) -> None:
    """A delta-rs table (CDF on, v0-v2 appends) whose v3 turns in-commit timestamps on; v4 and
    v5 each add a copy of v1's data file; ``ict_ms``: the in-commit timestamps of v3-v5."""
    for value in range(3):
        write_deltalake(
            str(root),
            pa.table({"x": [value]}),
            mode="append",
            configuration={"delta.enableChangeDataFeed": "true"},
        )
    log = root / "_delta_log"
    first = [json.loads(line) for line in (log / commit_name(0)).read_text().splitlines()]
    metadata = next(action["metaData"] for action in first if "metaData" in action)
    configuration = {
        **metadata["configuration"],
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "3",
        "delta.inCommitTimestampEnablementTimestamp": str(ict_ms[3]),
    }
    features = ["appendOnly", "invariants", "changeDataFeed", "inCommitTimestamp"]
    added = next(
        json.loads(line)["add"]
        for line in (log / commit_name(1)).read_text().splitlines()
        if '"add"' in line
    )

    def commit(version: int, *actions: dict[str, Any]) -> None:
        info = {"commitInfo": {"inCommitTimestamp": ict_ms[version], "operation": "WRITE"}}
        lines = [info, *actions]
        (log / commit_name(version)).write_text("".join(json.dumps(a) + "\n" for a in lines))

    commit(
        3,
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}},
        {"metaData": {**metadata, "configuration": configuration}},
    )
    for version in (4, 5):
        copy = f"copy-{version}-{added['path']}"
        shutil.copy(root / added["path"], root / copy)
        commit(version, {"add": {**added, "path": copy, "modificationTime": ict_ms[version]}})


def test_a_copied_table_time_travels_by_in_commit_timestamps_where_they_begin(
    spark: Any, tmp_path: Path
) -> None:
    """A copy rewrites every commit's file time (``cp -r``): later than the in-commit
    timestamps of the versions after the enablement. delta-spark searches a time at or after
    the enablement among the in-commit timestamps only, an earlier one among the commits
    before them (checked on its server: it answers v4-v6 where we refused)."""
    root = tmp_path / "t"
    ict_ms = {3: T0 * 1000 + 10, 4: T0 * 1000 + 20, 5: T0 * 1000 + 30}
    _ict_enabled_at_version_3(root, ict_ms)
    _set_commit_times(root, {v: T0 + 3600 + v for v in range(6)})  # the copy, an hour later
    table = DeltaTable.for_path(spark, str(root))
    at = partial(datetime.fromtimestamp, tz=timezone.utc)
    assert table.version_at(at(ict_ms[3] / 1000)) == 3
    assert table.version_at(at((ict_ms[4] + 5) / 1000)) == 4
    assert table.snapshot(timestamp=at(ict_ms[5] / 1000)).version == 5
    with pytest.raises(TimestampEarlierThanCommitRetentionError):
        table.version_at(at(ict_ms[3] / 1000 - 1))  # before the enablement: v0's file time
    changes = table.load_cdf(starting_timestamp=at(ict_ms[4] / 1000))
    assert {row["_commit_version"] for row in changes.collect()} == {4, 5}
    between = table.load_cdf(starting_timestamp=at((ict_ms[3] + 1) / 1000))
    assert {row["_commit_version"] for row in between.collect()} == {4, 5}


def test_an_in_commit_timestamp_beyond_year_9999_is_a_clear_error_for_datetime_only(
    spark: Any, tmp_path: Path
) -> None:
    """Delta stores a long of milliseconds; a Python datetime ends with the year 9999."""
    root = tmp_path / "t"
    beyond = 10**15  # in the year 33658
    _ict_enabled_at_version_3(root, {3: T0 * 1000 + 10, 4: T0 * 1000 + 20, 5: beyond})
    table = DeltaTable.for_path(spark, str(root))
    latest = table.snapshot()
    assert latest.timestamp_ms == beyond
    with pytest.raises(TimestampOutOfRangeError, match=r"Version 5 of .* 1000000000000000 ms"):
        latest.timestamp  # noqa: B018 - the property raises
    at_4 = datetime.fromtimestamp((T0 * 1000 + 20) / 1000, tz=timezone.utc)
    assert table.snapshot(version=4).timestamp == at_4
    at = datetime.fromtimestamp((T0 * 1000 + 25) / 1000, tz=timezone.utc)
    assert table.version_at(at) == 4


def test_a_commit_file_time_after_2262_is_read_as_it_is(spark: Any, conformance_table: Any) -> None:
    """pyarrow's listing wraps such a time round to one before 1970; Hadoop's long does not."""
    root = conformance_table("delta-rs/simple_table/delta")
    latest = DeltaTable.for_path(spark, str(root)).latest_version()
    after_2262_ns = 10**19
    path = root / "_delta_log" / commit_name(latest)
    os.utime(path, ns=(after_2262_ns, after_2262_ns))
    if os.stat(path).st_mtime_ns != after_2262_ns:
        pytest.skip("this file system does not keep a time after 2262")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    assert snapshot.timestamp_ms == after_2262_ns // 1_000_000
    assert snapshot.timestamp.year == 2286


def test_in_commit_timestamps_drive_time_travel(spark: Any) -> None:
    from tests.conftest import CONFORMANCE

    table = DeltaTable.for_path(spark, str(CONFORMANCE / "delta-rs/cdc_ict_table/delta"))
    latest = table.snapshot()
    assert latest.properties.get("delta.enableInCommitTimestamps") == "true"
    ict = latest.protocol_and_metadata.in_commit_timestamp
    assert ict is not None and latest.timestamp_ms == ict
    at_latest = datetime.fromtimestamp(ict / 1000, tz=timezone.utc)
    assert table.version_at(at_latest) == latest.version


def _commit_info(root: Path, version: int) -> dict[str, Any]:
    lines = (root / "_delta_log" / commit_name(version)).read_text().splitlines()
    return next(json.loads(line)["commitInfo"] for line in lines if '"commitInfo"' in line)


def test_a_checkpoint_versions_in_commit_timestamp_is_read_from_its_commit(
    spark: Any, conformance_table: Any
) -> None:
    """Without a version checksum, a snapshot whose segment ends at a checkpoint reads no
    commit: its in-commit timestamp comes from the version's own commit file, as delta-spark's
    ``Snapshot.getInCommitTimestampOpt`` reads it, never the file's time (which a copy or a
    slow writer moves away from it)."""
    root = conformance_table("delta-rs/cdc_ict_table/delta")
    for checksum in (root / "_delta_log").glob("*.crc"):
        checksum.unlink()
    _set_commit_times(root, {v: T0 + 3600 + v for v in range(4)})
    table = DeltaTable.for_path(spark, str(root))
    table.create_checkpoint()
    expected = _commit_info(root, 3)["inCommitTimestamp"]
    latest = table.snapshot()
    assert (latest.segment.checkpoint_version, latest.segment.commits) == (3, ())
    assert latest.timestamp_ms == latest.in_commit_timestamp_ms == expected
    assert latest.describe()["timestamp"] == latest.timestamp.isoformat()
    _, initial = next(iter(table.stream_cdf(stop_when_caught_up=True)))  # the snapshot's rows
    stamps = initial.selectExpr("unix_millis(_commit_timestamp) AS ms").collect()
    assert {row["ms"] for row in stamps} == {expected}
    # Time travel to the checkpoint's version takes the same path; a version with commits after
    # a checkpoint (or none at all) reads its in-commit timestamp with the P&M, as before.
    assert table.snapshot(3).timestamp_ms == expected
    assert table.snapshot(2).timestamp_ms == _commit_info(root, 2)["inCommitTimestamp"]


def test_a_missing_in_commit_timestamp_is_an_error_not_a_file_time(
    spark: Any, conformance_table: Any
) -> None:
    """A commit of an in-commit-timestamp table without its timestamp, or a checkpoint version
    whose commit file is gone: delta-spark's errors, where a file time would be a wrong
    answer."""
    root = conformance_table("delta-rs/cdc_ict_table/delta")
    log = root / "_delta_log"
    for checksum in log.glob("*.crc"):
        checksum.unlink()
    lines = (log / commit_name(3)).read_text().splitlines()
    without = []
    for line in lines:
        action = json.loads(line)
        action.get("commitInfo", {}).pop("inCommitTimestamp", None)
        without.append(json.dumps(action))
    (log / commit_name(3)).write_text("\n".join(without) + "\n")
    table = DeltaTable.for_path(spark, str(root), snapshot_cache=False)
    with pytest.raises(MissingCommitTimestampError, match="commit version 3 of"):
        _ = table.snapshot().timestamp
    assert table.snapshot(2).timestamp_ms == _commit_info(root, 2)["inCommitTimestamp"]

    table.create_checkpoint(2)
    (log / commit_name(2)).unlink()
    with pytest.raises(MissingCommitInfoError, match="its commit file is not in the log"):
        _ = table.snapshot(2).timestamp_ms


def test_glob_and_escape_characters_in_table_path(spark: Any, tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[3] / "shared/conformance/dat/basic_partitioned/delta"
    weird = tmp_path / "we ird%25[ab]{c,d}*?"
    shutil.copytree(source, weird)
    # A sibling the glob "[ab]" would match: it must never be read.
    decoy = tmp_path / "we ird%25a{c,d}*?"
    shutil.copytree(
        Path(__file__).resolve().parents[3] / "shared/conformance/dat/basic_append/delta", decoy
    )
    snapshot = DeltaTable.for_path(spark, str(weird)).snapshot()
    assert _files(snapshot) == _rs_files(source)
    assert snapshot.state.num_of_files == 6


def test_version_out_of_range(spark: Any, conformance_table: Any) -> None:
    table = DeltaTable.for_path(spark, str(conformance_table("dat/basic_append/delta")))
    with pytest.raises(VersionNotFoundError) as info:
        table.snapshot(5)
    assert "[0, 1]" in str(info.value)


def test_truncated_log_before_checkpoint(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    for version in range(0, 5):
        (root / "_delta_log" / commit_name(version)).unlink()
    table = DeltaTable.for_path(spark, str(root))
    assert table.snapshot().version == 13  # the checkpoint at 10 still rebuilds the latest
    # time travel before the earliest rebuildable version (10): delta-spark's class
    with pytest.raises(VersionNotFoundError) as info:
        table.snapshot(7)
    assert "version 7" in str(info.value) and "[10, 13]" in str(info.value)


def test_a_zero_byte_commit_of_a_local_log_is_an_empty_version(
    spark: Any, conformance_table: Any
) -> None:
    """A commit file with no actions is a version that changes nothing, as delta-rs reads it.

    A local log is listed by a Python worker, which sees the file; Spark's ``binaryFile``
    source (the listing of other file systems) drops zero-byte files (README Status).
    """
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    table = DeltaTable.for_path(spark, str(root))
    before = table.snapshot()
    before.state  # noqa: B018 - update() builds on a computed state
    (root / "_delta_log" / commit_name(14)).write_bytes(b"")
    latest = table.snapshot()
    assert latest.version == 14 == RsDeltaTable(str(root)).version()
    assert latest.state == before.state
    assert _files(latest) == _files(before) == _rs_files(root, 14)
    updated = before.update()
    assert updated.version == 14 and updated.state == before.state
    assert table.history().where("version = 14").count() == 1


@pytest.mark.worker_errors
def test_corrupt_last_checkpoint_falls_back_to_listing(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    (root / "_delta_log" / "_last_checkpoint").write_text('{"version": 10, "size": ')
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    assert snapshot.segment.checkpoint is not None and snapshot.segment.checkpoint.version == 10
    assert _files(snapshot) == _rs_files(root)


@pytest.mark.worker_errors
def test_a_checkpoint_that_is_not_parquet_is_a_corrupt_log_file(
    spark: Any, conformance_table: Any
) -> None:
    """Spark's failure to read a checkpoint raises ``DELTA_CORRUPT_LOG_FILE`` naming it when no
    earlier checkpoint or commit 0 rebuilds the version, and the log is left as it was."""
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    log = root / "_delta_log"
    checkpoint = log / "00000000000000000010.checkpoint.parquet"
    checkpoint.write_text("not parquet")
    for version in range(10):
        (log / commit_name(version)).unlink()
    before = log_bytes(log)
    with pytest.raises(CorruptLogFileError, match=checkpoint.name) as info:
        DeltaTable.for_path(spark, str(root)).snapshot()
    assert "FAILED_READ_FILE" in str(info.value)
    assert log_bytes(log) == before


@pytest.mark.worker_errors
def test_an_unreadable_checkpoint_falls_back_to_commit_zero(
    spark: Any, conformance_table: Any
) -> None:
    """delta-spark's snapshot-loading retry: the version is rebuilt from the commits."""
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    expected = _rs_files(root)
    log = root / "_delta_log"
    (log / "00000000000000000010.checkpoint.parquet").write_text("not parquet")
    before = log_bytes(log)
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    assert snapshot.segment.checkpoint is None and snapshot.version == 13
    assert _files(snapshot) == expected
    assert snapshot.state.num_of_files == len(expected)
    assert log_bytes(log) == before


@pytest.mark.worker_errors
def test_an_unreadable_checkpoint_falls_back_to_an_earlier_checkpoint(
    spark: Any, conformance_table: Any
) -> None:
    """The newest checkpoint (named by ``_last_checkpoint``) is damaged: the earlier one and
    the commits after it rebuild the version; so does time travel to the damaged version, by
    version or timestamp, and the history and cleanup, which read the latest protocol and
    metadata."""
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    table = DeltaTable.for_path(spark, str(root))
    table.create_checkpoint(12)
    expected = {version: _rs_files(root, version) for version in (12, 13)}
    log = root / "_delta_log"
    for version in range(10):
        (log / commit_name(version)).unlink()
    _set_commit_times(root, {version: 1_700_000_000 + version for version in range(10, 14)})
    newest = log / "00000000000000000012.checkpoint.parquet"
    newest.write_bytes(newest.read_bytes()[: newest.stat().st_size // 2])
    before = log_bytes(log)
    for version in (None, 12):
        snapshot = table.snapshot(version)
        assert snapshot.segment.checkpoint is not None
        assert snapshot.segment.checkpoint.version == 10
        assert _files(snapshot) == expected[snapshot.version]
        snapshot.unpersist()
    by_time = table.snapshot(timestamp=datetime.fromtimestamp(1_700_000_013, timezone.utc))
    assert by_time.version == 13 and by_time.segment.checkpoint is not None
    assert by_time.segment.checkpoint.version == 10
    assert [row["version"] for row in table.history().collect()] == [13, 12, 11, 10]
    assert table.cleanup_metadata(dry_run=True) == []
    assert log_bytes(log) == before


def test_missing_checkpoint_part_without_earlier_commits(
    spark: Any, conformance_table: Any
) -> None:
    root = conformance_table("golden/multi-part-checkpoint/delta")
    log = root / "_delta_log"
    next(log.glob("*.checkpoint.0000000001.0000000002.parquet")).unlink()
    (log / commit_name(0)).unlink()
    with pytest.raises(MissingPartFilesError):
        DeltaTable.for_path(spark, str(root)).snapshot()


def test_tombstones_and_transactions(spark: Any) -> None:
    from tests.conftest import CONFORMANCE

    snapshot = DeltaTable.for_path(
        spark, str(CONFORMANCE / "golden/deltalog-getChanges/delta")
    ).snapshot()
    assert snapshot.transactions == {"fakeAppId": 3}
    # the tombstone's deletionTimestamp is years old: expired under the 1-week default
    assert snapshot.tombstones().count() == snapshot.state.num_of_removes == 0


@pytest.mark.worker_errors
def test_checkpoint_rows_from_outside_the_log_are_refused(
    spark: Any, conformance_table: Any, tmp_path: Path
) -> None:
    """Checkpoint file actions reach the state without replay; their files are still checked.

    The moved part holds only add actions, so no replayed row comes from it.
    """
    root = conformance_table("golden/multi-part-checkpoint/delta")
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot(1)
    checkpoint = snapshot.segment.checkpoint
    assert checkpoint is not None and len(checkpoint.files) == 2
    adds_only = checkpoint.files[1]
    foreign = tmp_path / "elsewhere" / adds_only.name
    foreign.parent.mkdir()
    shutil.copyfile(unquote(adds_only.path.removeprefix("file:")), foreign)
    moved = dataclasses.replace(adds_only, path=f"file:{foreign}")
    segment = dataclasses.replace(
        snapshot.segment,
        checkpoint=dataclasses.replace(checkpoint, files=(checkpoint.files[0], moved)),
    )
    tampered = dataclasses.replace(snapshot, segment=segment)
    with pytest.raises(LogFileOutsideTableError, match="elsewhere"):
        tampered.state  # noqa: B018


def _state_view(snapshot: Any) -> tuple[Any, ...]:
    state = snapshot.state
    files = {
        (row["path"], row["size"], row["dataChange"])
        for row in snapshot.all_files().select("path", "size", "dataChange").collect()
    }
    removes = {row["path"] for row in snapshot.tombstones().select("path").collect()}
    return (
        snapshot.version,
        state.num_of_files,
        state.size_in_bytes,
        state.num_of_removes,
        state.metadata,
        files,
        removes,
    )


@pytest.mark.cluster
def test_update_builds_on_the_previous_state(spark: Any, tmp_path: Path) -> None:
    """update() after appends, a delete and a schema change equals a fresh snapshot and
    delta-rs; after a new checkpoint it falls back to a fresh snapshot."""
    import pyarrow as pa
    from deltalake import write_deltalake

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    table = DeltaTable.for_path(spark, str(root))
    first = table.snapshot()
    assert first.state.num_of_files == 2
    assert first.update() is first

    write_deltalake(str(root), pa.table({"id": [3], "p": ["c"]}), mode="append")
    RsDeltaTable(str(root)).delete("p = 'a'")
    wider = pa.table({"id": [4], "p": ["a"], "x": [1.5]})
    write_deltalake(str(root), wider, mode="append", schema_mode="merge")
    updated = first.update()
    assert updated.previous is first and updated.version == 3
    assert _state_view(updated) == _state_view(table.snapshot())
    # Its state built, the update lets go of the earlier snapshot and its server-side state.
    assert updated.previous is None
    first_ref = weakref.ref(first)
    del first
    gc.collect()
    assert first_ref() is None
    assert {unquote(p) for p, _, _ in _state_view(updated)[5]} == _rs_files(root)
    assert "x" in updated.schema.fieldNames()

    write_deltalake(str(root), pa.table({"id": [5], "p": ["d"], "x": [2.0]}), mode="append")
    RsDeltaTable(str(root)).create_checkpoint()
    again = updated.update()
    assert again.previous is None  # a checkpoint newer than `updated`: rebuilt from it
    assert _state_view(again) == _state_view(table.snapshot())
    assert {unquote(p) for p, _, _ in _state_view(again)[5]} == _rs_files(root)


@pytest.mark.parametrize("checkpointed", [True, False])
def test_a_polling_loop_over_a_delta_rs_table_matches_delta_rs(
    spark: Any, tmp_path: Path, checkpointed: bool
) -> None:
    """update() over a table delta-rs writes, with or without a checkpoint: the appends' states
    need no state query (the earlier rows counted by the last one, the checkpoint not read
    again), a delete and a compaction of earlier files run it; every state equals a fresh
    snapshot's, and its files delta-rs's."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from tests.histories import state_counting_queries

    root = tmp_path / "t"
    for number in range(3):
        rows = pa.table({"id": [number, number + 10], "p": ["a", "b"]})
        write_deltalake(str(root), rows, partition_by=["p"], mode="append")
    if checkpointed:
        RsDeltaTable(str(root)).create_checkpoint()
    table = DeltaTable.for_path(spark, str(root))
    snapshot = table.snapshot()
    assert (snapshot.segment.checkpoint is not None) is checkpointed
    assert snapshot.state.num_of_files == 6

    def append() -> None:
        write_deltalake(str(root), pa.table({"id": [7], "p": ["c"]}), mode="append")

    steps = [
        (append, False),
        (append, False),
        (lambda: RsDeltaTable(str(root)).delete("p = 'a'"), True),
        (lambda: RsDeltaTable(str(root)).optimize.compact(), True),
    ]
    for change, runs_query in steps:
        change()
        snapshot = snapshot.update()
        assert snapshot.previous is not None  # built on the earlier state
        _, queried = state_counting_queries(snapshot)
        assert queried is runs_query
        assert _state_view(snapshot) == _state_view(table.snapshot())
        assert {unquote(p) for p, _, _ in _state_view(snapshot)[5]} == _rs_files(root)


@pytest.mark.parametrize("max_update_bytes", [0, 1 << 20])
def test_a_chain_of_updates_keeps_one_small_replay_beside_the_first(
    spark: Any, tmp_path: Path, max_update_bytes: int
) -> None:
    """A polling loop's state stays two replays: the first one as it was, and the replay of
    every commit since, until that outgrows ``MAX_UPDATE_BYTES``; then it is folded into the
    first, with as many partitions as a new snapshot's replay of the same commits (one, for a
    small log)."""
    import pyarrow as pa
    import pyspark.sql.connect.functions as F
    from deltalake import write_deltalake

    from delta_connect_py.plans import replay

    def partitions(replayed: Any) -> int:
        return replayed.select(F.spark_partition_id().alias("id")).distinct().count()

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [0]}))
    table = DeltaTable.for_path(spark, str(root))
    snapshot = table.snapshot()
    snapshot.state  # noqa: B018 - its state on the server, for update() to build on
    first_replay = snapshot._reconstructed.replayed
    with mock.patch.object(replay, "MAX_UPDATE_BYTES", max_update_bytes):
        for number in range(1, 4):
            write_deltalake(str(root), pa.table({"id": [number]}), mode="append")
            snapshot = snapshot.update()
            assert snapshot.state.num_of_files == number + 1
            assert _state_view(snapshot) == _state_view(table.snapshot())
            state = snapshot._reconstructed
            if max_update_bytes:
                assert state.replayed is first_replay and state.updates is not None
            else:
                assert state.updates is None
                assert (
                    partitions(state.replayed)
                    == partitions(table.snapshot()._reconstructed.replayed)
                    == 1
                )


def _commit_with_txn_retention(days: int, txn_updated_ms: int | None = None) -> str:
    """A commit setting the table's transaction retention (and recording one txn)."""
    schema = (
        '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'
    )
    metadata = {
        "id": "txn-retention",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": schema,
        "partitionColumns": [],
        "configuration": {"delta.setTransactionRetentionDuration": f"interval {days} days"},
    }
    actions: list[dict[str, Any]] = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": metadata},
    ]
    if txn_updated_ms is not None:
        actions.append({"txn": {"appId": "app", "version": 3, "lastUpdated": txn_updated_ms}})
    return "".join(json.dumps(action) + "\n" for action in actions)


def test_update_after_a_longer_transaction_retention_keeps_the_transaction(
    spark: Any, tmp_path: Path
) -> None:
    """A transaction the earlier state dropped as expired is kept again once a new commit
    lengthens the retention, also when update() builds on that state (retention is applied
    to the replayed rows, never inside the replay)."""
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    three_days_ago = int(time.time() * 1000) - 3 * 86_400_000
    (log / commit_name(0)).write_text(_commit_with_txn_retention(1, three_days_ago))
    table = DeltaTable.for_path(spark, str(log.parent))
    first = table.snapshot()
    assert first.transactions == {}

    (log / commit_name(1)).write_text(_commit_with_txn_retention(7))
    updated = first.update()
    assert updated.version == 1 and updated.previous is first
    assert updated.transactions == table.snapshot().transactions == {"app": 3}


MALFORMED_LINES = {
    "not JSON": '{"add":{"path":"broken.parquet","size":1,BROKEN',
    "wrong type": '{"add":{"path":"broken.parquet","partitionValues":{},"size":"big",'
    '"modificationTime":1,"dataChange":true}}',
}


def _corrupt_commit(log: Path, version: int, line: str) -> Path:
    """Commit ``version`` with its first line replaced by ``line``."""
    commit = log / commit_name(version)
    lines = commit.read_text().splitlines()
    commit.write_text("\n".join([line, *lines[1:]]) + "\n")
    return commit


@pytest.mark.worker_errors
@pytest.mark.parametrize("reader", ["json source", "worker lines", "few large commits"])
@pytest.mark.parametrize("kind", sorted(MALFORMED_LINES))
def test_malformed_commit_line_names_the_file(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch, reader: str, kind: str
) -> None:
    """A commit line that is not Delta action JSON fails the state with the file and the line,
    whichever reader parsed it; nothing partial is returned."""
    import delta_connect_py.plans.loading as loading

    if reader == "worker lines":
        monkeypatch.setattr(loading, "MAX_FILES_FOR_JSON_SOURCE", 0)
    if reader == "few large commits":  # more bytes than one worker task reads
        monkeypatch.setattr(loading, "MAX_BYTES_FOR_JSON_SOURCE", 0)
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    commit = _corrupt_commit(root / "_delta_log", 12, MALFORMED_LINES[kind])
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(CorruptLogFileError) as info:
        table.snapshot().state  # noqa: B018
    message = str(info.value)
    assert commit.name in message and "broken.parquet" in message
    with pytest.raises(CorruptLogFileError, match=commit.name):
        table.cdf_file_changes(11)
    assert table.snapshot(11).state.num_of_files == len(_rs_files(root, 11))


@pytest.mark.worker_errors
def test_malformed_metadata_line_fails_the_snapshot(spark: Any, conformance_table: Any) -> None:
    """The protocol/metadata fast path must not fall back to an older metaData silently."""
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    commit = root / "_delta_log" / commit_name(14)
    commit.write_text('{"metaData":{"id":"x","format":{"provider":"parquet"},BROKEN\n')
    with pytest.raises(CorruptLogFileError, match=commit.name):
        DeltaTable.for_path(spark, str(root)).snapshot()


#: A setting every vanilla server refuses to change from a client (a Spark core setting), in the
#: role of an internal one a managed server would refuse.
REFUSED_SETTING = {"spark.executor.memory": "1g"}


def test_a_refused_hint_is_skipped_and_settings_are_restored(spark: Any) -> None:
    from pyspark.errors import PySparkException

    from delta_connect_py.plans.spark import session_conf

    before = spark.conf.get("spark.sql.shuffle.partitions")
    required = {"spark.sql.shuffle.partitions": "5", **REFUSED_SETTING}
    with pytest.raises(PySparkException), session_conf(spark, required):
        pass  # as a required setting it fails: the server really refuses it
    assert spark.conf.get("spark.sql.shuffle.partitions") == before  # what was set is undone
    with session_conf(spark, {}, hints={**REFUSED_SETTING, "spark.sql.shuffle.partitions": "3"}):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "3"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before


def test_settings_with_a_refused_hint_are_set_and_restored(spark: Any) -> None:
    """Settings and hints go in one request; when the server refuses a hint of that batch, the
    settings and the accepted hints are still set, and every one is restored after."""
    from delta_connect_py.plans.spark import session_conf

    before = spark.conf.get("spark.sql.shuffle.partitions")
    zone_before = spark.conf.get("spark.sql.session.timeZone")
    settings = {"spark.sql.shuffle.partitions": "7"}
    hints = {**REFUSED_SETTING, "spark.sql.session.timeZone": "Asia/Kathmandu"}
    with session_conf(spark, settings, hints):
        assert spark.conf.get("spark.sql.shuffle.partitions") == "7"
        assert spark.conf.get("spark.sql.session.timeZone") == "Asia/Kathmandu"
    assert spark.conf.get("spark.sql.shuffle.partitions") == before
    assert spark.conf.get("spark.sql.session.timeZone") == zone_before
    with session_conf(spark, settings, {"spark.sql.session.timeZone": "Asia/Kathmandu"}):
        assert spark.conf.get("spark.sql.session.timeZone") == "Asia/Kathmandu"
    assert spark.conf.get("spark.sql.session.timeZone") == zone_before


def test_settings_the_session_has_already_cost_one_request(spark: Any) -> None:
    """A setting (or hint) whose value the session has is neither set nor restored: the
    request that read the values is the only one (a replay on a server configured so)."""
    import delta_connect_py.plans.spark as plans_spark
    from delta_connect_py.plans.spark import session_conf

    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    zone = spark.conf.get("spark.sql.session.timeZone")
    requests: list[Any] = []
    config = plans_spark._config

    def counted(session: Any, operation: Any) -> Any:
        requests.append(operation.WhichOneof("op_type"))
        return config(session, operation)

    with mock.patch.object(plans_spark, "_config", counted):
        with session_conf(
            spark,
            {"spark.sql.shuffle.partitions": partitions},
            {"spark.sql.session.timeZone": zone},
        ):
            pass
        assert requests == ["get_with_default"]
        with session_conf(spark, {"spark.sql.shuffle.partitions": str(int(partitions) + 1)}):
            assert spark.conf.get("spark.sql.shuffle.partitions") == str(int(partitions) + 1)
    assert spark.conf.get("spark.sql.shuffle.partitions") == partitions


def test_a_refused_hint_is_not_asked_for_again_in_the_session(spark_remote: str) -> None:
    """The first refusal costs a request per hint; later blocks of the same session leave the
    refused hint out (a session of its own: the memory is per session)."""
    from pyspark.sql import SparkSession

    import delta_connect_py.plans.spark as plans_spark
    from delta_connect_py.plans.spark import session_conf

    session = SparkSession.builder.remote(spark_remote).create()
    try:
        before = session.conf.get("spark.sql.shuffle.partitions")
        hints = {**REFUSED_SETTING, "spark.sql.shuffle.partitions": "3"}
        refused_key = next(iter(REFUSED_SETTING))
        requests: list[tuple[str, list[str]]] = []
        config = plans_spark._config

        def counted(spark: Any, operation: Any) -> Any:
            kind = operation.WhichOneof("op_type")
            pairs = getattr(getattr(operation, kind), "pairs", [])
            requests.append((kind, [getattr(pair, "key", pair) for pair in pairs]))
            return config(spark, operation)

        blocks = []
        with mock.patch.object(plans_spark, "_config", counted):
            for block_hints in (hints, hints, REFUSED_SETTING):
                requests.clear()
                with session_conf(session, {}, unconditional_hints=block_hints):
                    if block_hints is hints:
                        assert session.conf.get("spark.sql.shuffle.partitions") == "3"
                assert session.conf.get("spark.sql.shuffle.partitions") == before
                blocks.append(list(requests))
        first, second, only_refused = blocks
        assert any(refused_key in keys for _, keys in first)  # asked, refused, remembered
        assert not any(refused_key in keys for _, keys in second)
        assert len(second) < len(first)  # no request per hint after the refusal
        assert only_refused == []  # nothing left to ask: no request at all
    finally:
        session.stop()


def test_the_log_is_read_where_the_server_refuses_the_read_settings(
    spark_remote: str, conformance_table: Any
) -> None:
    """The read, listing and Arrow batch settings are speed-only: a server refusing one of
    them (a managed server's allow-list) still reads a checkpointed table, equal to delta-rs."""
    from pyspark.sql import SparkSession

    import delta_connect_py.plans.listing as listing
    import delta_connect_py.plans.spark as plans_spark

    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    session = SparkSession.builder.remote(spark_remote).create()
    try:
        with (
            mock.patch.dict(plans_spark.LOG_READ_CONF, REFUSED_SETTING),
            mock.patch.dict(plans_spark.ARROW_BATCH_CONF, REFUSED_SETTING),
            mock.patch.dict(listing.LISTING_CONF, REFUSED_SETTING),
        ):
            snapshot = DeltaTable.for_path(session, str(root)).snapshot()
            assert _files(snapshot) == _rs_files(root)
            assert snapshot.state.num_of_files == len(_rs_files(root))
            rows = RsDeltaTable(str(root)).to_pyarrow_dataset().count_rows()
            assert snapshot.to_df().count() == rows
    finally:
        session.stop()


#: A setting no server has, set true in a test's session: hints conditional on it apply there.
TRUE_IN_SESSION = "spark.sql.test.deltaConnectPyHintCondition"


def test_hints_apply_only_where_their_condition_holds(spark: Any) -> None:
    """The replay's hints are for servers with a class loader per session: with a condition
    the session does not have true, they are not set."""
    from delta_connect_py.plans.spark import session_conf

    zone = spark.conf.get("spark.sql.session.timeZone")
    hints = {"spark.sql.session.timeZone": "Asia/Kathmandu"}
    with session_conf(spark, {}, hints, hints_where="spark.sql.test.deltaConnectPyUnset"):
        assert spark.conf.get("spark.sql.session.timeZone") == zone
    spark.conf.set(TRUE_IN_SESSION, "true")
    try:
        with session_conf(spark, {}, hints, hints_where=TRUE_IN_SESSION):
            assert spark.conf.get("spark.sql.session.timeZone") == "Asia/Kathmandu"
    finally:
        spark.conf.unset(TRUE_IN_SESSION)
    assert spark.conf.get("spark.sql.session.timeZone") == zone


def test_the_replay_runs_where_the_server_refuses_its_hints(spark: Any, tmp_path: Path) -> None:
    """A server refusing the replay's speed-only settings still reconstructs the state."""
    import pyarrow as pa
    from deltalake import write_deltalake

    import delta_connect_py.plans.replay as replay
    from delta_connect_py.plans.spark import INTERPRETED_CONF, Hints

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1, 2], "p": ["a", "b"]}), partition_by=["p"])
    write_deltalake(str(root), pa.table({"id": [3], "p": ["c"]}), mode="append")
    expected = _state_view(DeltaTable.for_path(spark, str(root)).snapshot())
    spark.conf.set(TRUE_IN_SESSION, "true")  # the hints apply here, as with a loader per session
    try:
        with (
            mock.patch.dict(INTERPRETED_CONF, REFUSED_SETTING),
            mock.patch.object(
                replay, "INTERPRETED_HINTS", Hints(INTERPRETED_CONF, TRUE_IN_SESSION)
            ),
        ):
            snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
            assert _state_view(snapshot) == expected
    finally:
        spark.conf.unset(TRUE_IN_SESSION)
    assert snapshot.state.num_of_files == 3


def test_parquet_footer_schemas_are_inferred_once_per_file_identity(
    spark: Any, tmp_path: Path
) -> None:
    """``read_parquet`` keeps a footer schema by the files' identity: a file rewritten in place
    (another size and time) is inferred again, an unchanged one is not."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from delta_connect_py.plans.loading import read_parquet

    path = tmp_path / "part.parquet"
    pq.write_table(pa.table({"x": [1]}), path)
    first = (str(path), path.stat().st_size, path.stat().st_mtime_ns)
    assert read_parquet(spark, [str(path)], first).columns == ["x"]
    pq.write_table(pa.table({"y": ["a"], "z": [2.0]}), path)
    # The first identity names the schema already inferred: no inference, which would find y, z.
    assert read_parquet(spark, [str(path)], first).columns == ["x"]
    second = (str(path), path.stat().st_size, path.stat().st_mtime_ns)
    rewritten = read_parquet(spark, [str(path)], second)
    assert rewritten.columns == ["y", "z"]
    assert rewritten.collect()[0]["y"] == "a"


def _commit_actions(root: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    lines = [json.dumps(action) for action in (info, *actions)]
    (root / "_delta_log" / commit_name(version)).write_text("\n".join(lines) + "\n")


def _add(path: str) -> dict[str, Any]:
    now = int(time.time() * 1000)
    add = {"path": path, "partitionValues": {}, "size": 11, "modificationTime": now}
    return {"add": {**add, "dataChange": True}}


def test_a_new_commit_changing_protocol_and_metadata_is_seen_by_the_extended_snapshot(
    spark: Any, tmp_path: Path
) -> None:
    """One commit by another writer that upgrades the protocol and changes the metadata: the
    snapshot the cache extends from its state (only that commit replayed) has the new protocol
    and metadata, and its state equals a snapshot built afresh."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from delta_connect_py.snapshot import snapshot_of

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1, 2]}))
    table = DeltaTable.for_path(spark, str(root))
    cached = table.snapshot()
    assert cached.state.num_of_files == 1
    metadata = cached.metadata.to_action()
    metadata["configuration"] = {**metadata["configuration"], "owner.note": "extended"}
    protocol = {"minReaderVersion": 1, "minWriterVersion": 4}
    _commit_actions(root, 1, [{"protocol": protocol}, {"metaData": metadata}, _add("n.parquet")])

    extended = table.snapshot()
    assert extended.previous is cached and extended.version == 1
    assert extended.protocol.min_writer_version == 4
    assert extended.metadata.configuration["owner.note"] == "extended"
    fresh = snapshot_of(DeltaTable.for_path(spark, str(root), snapshot_cache=False))
    assert extended.state == fresh.state
    assert extended.state.protocol == extended.protocol and extended.state.num_of_files == 2


@pytest.mark.parametrize("bound", [1, 1000])
def test_an_update_probes_the_earlier_rows_by_its_observed_file_names(
    spark: Any, tmp_path: Path, bound: int
) -> None:
    """An update's replay observes its file names' hashes (up to a bound: beyond it they are
    found by a join as before); an append that misses the earlier rows is counted on their
    sums, a commit removing an earlier file runs the state query; every state equals a
    snapshot built afresh."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from delta_connect_py.plans import replay
    from delta_connect_py.snapshot import snapshot_of

    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [1, 2]}))
    table = DeltaTable.for_path(spark, str(root), snapshot_cache=False)
    snapshot = table.snapshot()
    first_file = next(iter(_files(snapshot)))
    assert snapshot.state.num_of_files == 1
    deleted_at = int(time.time() * 1000)
    remove = {"remove": {"path": first_file, "deletionTimestamp": deleted_at, "dataChange": True}}
    steps = [[_add("a.parquet"), _add("b.parquet")], [remove], [_add("c.parquet")]]
    with mock.patch.object(replay, "MAX_OBSERVED_HASHES", bound):
        for version, actions in enumerate(steps, start=1):
            _commit_actions(root, version, actions)
            snapshot = snapshot.update()
            assert snapshot.previous is not None
            observed = snapshot._reconstructed.update_hashes
            assert (observed is None) is (bound == 1)
            # The first replay's names (one file) were observed as it ran: checked on the client.
            assert snapshot._reconstructed.replayed_hashes is not None
            assert snapshot.state == snapshot_of(table).state
    assert snapshot.state.num_of_files == 3 and snapshot.state.num_of_removes == 1


@pytest.mark.parametrize(
    ("name", "replayed_whole"),
    [
        ("golden/basic-with-inserts-deletes-checkpoint/delta", True),
        ("golden/multi-part-checkpoint/delta", True),
        ("golden/v2-checkpoint-json/delta", False),
        ("kernel/v2-checkpoints-parquet-with-sidecars/delta", False),
    ],
)
def test_a_small_checkpoint_is_replayed_with_its_commits_unless_it_has_sidecars(
    spark: Any,
    conformance_table: Any,
    name: str,
    replayed_whole: bool,
) -> None:
    """A small checkpoint's file actions go through the replay with the commits; a checkpoint
    with sidecars (whose top-level file's size says nothing of its file actions) is joined at
    query time. Either way the state and the rows equal the joined path's."""
    root = str(conformance_table(name))
    snapshot = DeltaTable.for_path(spark, root, snapshot_cache=False).snapshot()
    assert snapshot.segment.checkpoint is not None
    state = snapshot.state
    assert (snapshot._reconstructed.checkpoint is None) == replayed_whole
    rows = sorted(str(row.asDict(recursive=True)) for row in snapshot.state_df().collect())
    with checkpoint_files(joined=True):
        joined = DeltaTable.for_path(spark, root, snapshot_cache=False).snapshot()
        assert joined.state == state
    assert joined._reconstructed.checkpoint is not None
    assert sorted(str(row.asDict(recursive=True)) for row in joined.state_df().collect()) == rows
