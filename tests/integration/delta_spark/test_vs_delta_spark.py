"""delta_connect_py on the vanilla server against delta-spark itself as the oracle.

Tables are written by real delta-spark (``oracle_tables``, see tables.build_tables); our side
always runs on the ``spark`` fixture (the vanilla server), delta-spark's on ``delta_spark``.

Compared (each at least once; ``make test-delta-spark`` runs them all in CI):
- ``DESCRIBE DETAIL`` (numFiles, sizeInBytes, properties, protocol versions, table features,
  partition columns, id, createdAt, lastModified) with our latest snapshot, on every table
  (legacy protocol, table features with column mapping and deletion vectors, V2 checkpoints);
- at a version before the first checkpoint, at the exact commit timestamp of a version, at a
  timestamp between two commits, and at the latest version (see ``points_of``; chosen so
  that each kind of log segment and time travel is read once, not every version of every
  table, to keep the phase within its time budget): the files delta-spark scans
  (``inputFiles()``) with our ``all_files()`` paths (decoded and resolved against the table
  root), our ``to_df`` rows with ``spark.read.format("delta")``'s, and our resolved version
  (``snapshot(timestamp=...)``, ``version_at``) with ``timestampAsOf``'s; at the latest version
  also the files delta-spark reads rows from (``input_file_name()``);
- ``DeltaTable.load_cdf`` with ``readChangeFeed`` (every column, ``_commit_timestamp`` too);
- ``DeltaTable.stream_cdf`` from version 0 with delta-spark's ``readChangeFeed`` stream across
  an added column and a widened type (rows and schema), and across a type or partitioning
  change it cannot read (the same error class and version);
- column mapping mode id read by parquet field id: rows and change data feed of a copy whose
  data and cdc files have their columns renamed (ids kept);
- ``DeltaTable.history`` with ``DESCRIBE HISTORY`` (every column);
- interop: delta-spark reads a copy whose only log content is OUR checkpoint (classic and
  multi-part) plus the last commit, and honours the txn action in it; delta-spark time travel
  (by version and by timestamp) after OUR ``cleanup_metadata`` on a copy with aged log files,
  with the same error classes on both sides for what the cleanup removed.

Known differences (kept visible, not hidden):
- ``history()``'s ``version`` column is non-nullable, delta-spark's is nullable (types compared
  without nullability).
- delta-spark 4.3 refuses time travel beyond ``delta.deletedFileRetentionDuration``; we do not
  (switched off in the cleanup test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyspark.sql.connect.functions as F
import pytest

from delta_connect_py.errors import (
    FeaturesProtocolMetadataMismatchError,
    StreamSchemaChangedWithStartingOptionsError,
    TimestampEarlierThanCommitRetentionError,
    VersionNotFoundError,
)
from delta_connect_py.history import HISTORY_COLUMNS
from delta_connect_py.protocol.timestamps import format_timestamp_ms
from delta_connect_py.table import DeltaTable
from tests.conftest import CONFORMANCE
from tests.integration.delta_spark.tables import OracleTable, OracleTables
from tests.integration.feature_mismatch import write_table
from tests.parquet_renaming import rewrite_with_renamed_columns

pytestmark = pytest.mark.delta_spark

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
ALL_TABLES = ["partitioned", "features", "v2_checkpoint"]
CDF_TABLES = ["partitioned", "features"]
DAY_SECONDS = 24 * 3600
ENFORCE_RETENTION_CONF = (
    "spark.databricks.delta.vacuum.enforceTimeTravelWithinDeletedFileRetentionDuration"
)


def table_of(tables: OracleTables, name: str) -> OracleTable:
    return getattr(tables, name)  # type: ignore[no-any-return]


def local_path(uri: str) -> str:
    """``file:/a``, ``file:///a`` or ``/a`` (already decoded) -> ``/a``."""
    if uri.startswith("file:"):
        uri = "/" + uri[len("file:") :].lstrip("/")
    return os.path.normpath(uri)


def our_files(snapshot: Any) -> set[str]:
    """Our live add paths as local file names: URI-decoded, resolved against the table root."""
    root = local_path(snapshot.table.table_root)
    paths = set()
    for row in snapshot.all_files().select("path").collect():
        path = unquote(row["path"])
        paths.add(local_path(path) if _URI.match(path) else os.path.join(root, path))
    return {os.path.normpath(p) for p in paths}


def delta_read(
    delta_spark: Any, path: Path, version: int | None = None, timestamp: str | None = None
) -> Any:
    reader = delta_spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    if timestamp is not None:
        reader = reader.option("timestampAsOf", timestamp)
    return reader.load(str(path))


def oracle_scanned_files(delta_spark: Any, path: Path, **at: Any) -> set[str]:
    """The files delta-spark's scan lists (Hadoop paths: decoded once already)."""
    return {local_path(f) for f in delta_read(delta_spark, path, **at).inputFiles()}


def oracle_read_files(delta_spark: Any, path: Path) -> set[str]:
    """The files delta-spark reads rows from (``input_file_name`` is URI-encoded)."""
    frame = delta_read(delta_spark, path).select(F.input_file_name().alias("f"))
    return {local_path(unquote(row["f"])) for row in frame.distinct().collect()}


def oracle_commit_times(delta_spark: Any, path: Path) -> dict[int, int]:
    """delta-spark's commit timestamps (ms) by version, from ``DESCRIBE HISTORY``."""
    frame = delta_spark.sql(f"DESCRIBE HISTORY delta.`{path}`").select(
        "version", F.unix_millis("timestamp").alias("ms")
    )
    return {row["version"]: row["ms"] for row in frame.collect()}


def rows_of(frame: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(row) for row in frame.collect()), key=repr)


def fields_of(frame: Any) -> list[tuple[str, Any]]:
    """Column names and types, nullability ignored."""
    return [(f.name, f.dataType) for f in frame.schema.fields]


def implied_features(reader: int, writer: int) -> set[str]:
    """Features a legacy protocol implies (PROTOCOL.md, "Table Features")."""
    by_writer = {
        2: {"appendOnly", "invariants"},
        3: {"checkConstraints"},
        4: {"changeDataFeed", "generatedColumns"},
        5: {"columnMapping"},
        6: {"identityColumns"},
    }
    features = set().union(*(f for v, f in by_writer.items() if writer >= v))
    if reader >= 2:
        features.add("columnMapping")
    return features


def copy_table(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def relocate(files: set[str], source: Path, target: Path) -> set[str]:
    return {f.replace(str(source), str(target), 1) for f in files}


def ours(spark: Any, path: Path, version: int | None = None) -> Any:
    return DeltaTable.for_path(spark, str(path)).snapshot(version)


class Snapshots:
    """Our snapshots of the (never changing) oracle tables by version, shared so each replays
    once; ``add`` stores one made otherwise (by timestamp)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.cache: dict[tuple[Path, int | None], Any] = {}

    def __call__(self, path: Path, version: int | None = None) -> Any:
        if (path, version) not in self.cache:
            self.cache[path, version] = ours(self.spark, path, version)
        return self.cache[path, version]

    def __contains__(self, key: tuple[Path, int]) -> bool:
        return key in self.cache

    def add(self, path: Path, snapshot: Any) -> Any:
        return self.cache.setdefault((path, snapshot.version), snapshot)


@pytest.fixture(scope="module")
def snapshots(spark: Any) -> Iterator[Snapshots]:
    cache = Snapshots(spark)
    yield cache
    # Release the server-side state now, while the server runs: a materialized DataFrame still
    # alive at interpreter exit makes pyspark retry its release against a stopped server for
    # ~10 minutes (15 retries, backoff up to 60 s).
    for snapshot in cache.cache.values():
        snapshot.unpersist()
    cache.cache.clear()


@pytest.fixture(scope="module")
def scanned(delta_spark: Any) -> Any:
    """delta-spark's scanned files of the oracle tables by version, shared."""
    cache: dict[tuple[Path, int | None], set[str]] = {}

    def get(path: Path, version: int | None = None) -> set[str]:
        if (path, version) not in cache:
            cache[path, version] = oracle_scanned_files(delta_spark, path, version=version)
        return cache[path, version]

    return get


# ----------------------------------------------------------------------------- snapshot state


@pytest.mark.parametrize("name", ALL_TABLES)
def test_describe_detail_matches_snapshot(
    delta_spark: Any, snapshots: Snapshots, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    detail = (
        delta_spark.sql(f"DESCRIBE DETAIL delta.`{table.path}`")
        .select(
            "*",
            F.unix_millis("createdAt").alias("createdAtMs"),
            F.unix_millis("lastModified").alias("lastModifiedMs"),
        )
        .collect()[0]
    )
    snapshot = snapshots(table.path, table.latest)
    state = snapshot.state
    protocol = snapshot.protocol

    assert snapshot.version == table.latest
    assert (state.num_of_files, state.size_in_bytes) == (detail.numFiles, detail.sizeInBytes)
    assert dict(snapshot.metadata.configuration) == detail.properties
    assert (protocol.min_reader_version, protocol.min_writer_version) == (
        detail.minReaderVersion,
        detail.minWriterVersion,
    )
    if protocol.writer_features is None:
        features = implied_features(protocol.min_reader_version, protocol.min_writer_version)
    else:
        features = {*protocol.writer_features, *(protocol.reader_features or ())}
    assert features == set(detail.tableFeatures)
    assert list(snapshot.partition_columns) == detail.partitionColumns
    assert snapshot.metadata.id == detail.id
    assert snapshot.metadata.created_time == detail.createdAtMs
    assert snapshot.timestamp_ms == detail.lastModifiedMs
    # DESCRIBE DETAIL has no transactions; delta-spark wrote exactly this one (conftest).
    expected_txns = {"app-1": 3} if name == "partitioned" else {}
    assert snapshot.transactions == expected_txns
    if name == "v2_checkpoint":  # the state came from a UUID-named V2 checkpoint + sidecars
        checkpoint = snapshot.segment.checkpoint
        assert checkpoint is not None and checkpoint.version == table.latest
        assert ".checkpoint." in checkpoint.files[0].name and checkpoint.num_parts == 1
        assert os.listdir(table.path / "_delta_log" / "_sidecars")


@dataclass(frozen=True)
class Point:
    """Where both sides read a table: a version or a timestamp, resolving to ``version``."""

    label: str
    version: int
    by_version: bool = True
    timestamp: str | None = None
    rows: bool = True  # compare the rows too (not only the files)


def points_of(delta_spark: Any, table: OracleTable) -> list[Point]:
    """``partitioned`` and ``features`` (versions 0-4, checkpoints at 2 and 4): the exact commit
    timestamp of version 3 and a timestamp between versions 3 and 4 (checkpoint 2 + commit 3;
    files only there, its rows are those of the point before), and the latest (a multi-part
    checkpoint) by version; ``partitioned`` also version 1 (commits only, before the first
    checkpoint). ``v2_checkpoint``: the latest (the V2 checkpoint and its sidecars)."""
    points = [Point("version 1", 1)] if table.name == "partitioned" else []
    if table.latest >= 3:
        times = oracle_commit_times(delta_spark, table.path)
        v = table.latest - 1
        points.append(Point(f"commit {v}'s timestamp", v, False, format_timestamp_ms(times[v])))
        if times[v + 1] - times[v] >= 2:
            between = format_timestamp_ms((times[v] + times[v + 1]) // 2)
            points.append(Point(f"between commits {v} and {v + 1}", v, False, between, False))
    points.append(Point("latest", table.latest))
    return points


@pytest.mark.parametrize("name", ALL_TABLES)
def test_files_and_rows_match_at_versions_and_timestamps(
    spark: Any, delta_spark: Any, snapshots: Snapshots, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    dt = DeltaTable.for_path(spark, str(table.path))
    files: dict[int, set[str]] = {}
    for point in points_of(delta_spark, table):
        where = f"{point.label}: version {point.version} ({table.operations[point.version]})"
        if point.by_version:
            snapshot = snapshots(table.path, point.version)
            oracle = delta_read(delta_spark, table.path, version=point.version)
        else:
            assert point.timestamp is not None
            if (table.path, point.version) in snapshots:
                assert dt.version_at(point.timestamp) == point.version, where
                snapshot = snapshots(table.path, point.version)
            else:
                snapshot = snapshots.add(table.path, dt.snapshot(timestamp=point.timestamp))
                assert snapshot.version == point.version, where
            oracle = delta_read(delta_spark, table.path, timestamp=point.timestamp)
        files.setdefault(point.version, our_files(snapshot))
        assert files[point.version] == {local_path(f) for f in oracle.inputFiles()}, where
        if point.rows:
            actual = snapshot.to_df()
            assert actual.columns == oracle.columns, where
            assert rows_of(actual) == rows_of(oracle), where
    # Every live file of these tables holds live rows: the files read equal the files scanned.
    assert files[table.latest] == oracle_read_files(delta_spark, table.path)


# ----------------------------------------------------------------------------- CDF, history


@pytest.mark.parametrize("name", CDF_TABLES)
def test_load_cdf_matches_read_change_feed(
    spark: Any, delta_spark: Any, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    expected = (
        delta_spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(str(table.path))
    )
    actual = DeltaTable.for_path(spark, str(table.path)).load_cdf(0)
    assert actual.columns == expected.columns
    assert actual.schema == expected.schema
    assert rows_of(actual) == rows_of(expected)


def test_id_mode_reads_columns_by_field_id_like_delta_spark(
    spark: Any, delta_spark: Any, oracle_tables: OracleTables, tmp_path: Path
) -> None:
    """Column mapping mode id, in a copy whose data and cdc files were rewritten with their
    columns renamed (field ids kept): rows and change data feed as delta-spark reads them, by
    field id."""
    table = oracle_tables.id_mapping
    copy = copy_table(table.path, tmp_path / "id_mapping")
    renamed = [
        rewrite_with_renamed_columns(path)
        for path in copy.rglob("*.parquet")
        if "_delta_log" not in path.parts
    ]
    assert len(renamed) >= 3 and all(renamed)  # data files and cdc files, each renamed
    expected = delta_read(delta_spark, copy)
    actual = ours(spark, copy).to_df()
    assert actual.columns == expected.columns == ["id", "my col", "s"]
    assert rows_of(actual) == rows_of(expected)
    assert all(row["my col"] is not None and row["s"] is not None for row in actual.collect())
    expected_changes = (
        delta_spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(str(copy))
    )
    changes = DeltaTable.for_path(spark, str(copy)).load_cdf(0)
    assert rows_of(changes) == rows_of(expected_changes)
    assert {row["_change_type"] for row in changes.collect()} == {
        "insert",
        "update_preimage",
        "update_postimage",
    }


@pytest.mark.parametrize("name", CDF_TABLES)
def test_history_matches_describe_history(
    spark: Any, delta_spark: Any, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    expected = delta_spark.sql(f"DESCRIBE HISTORY delta.`{table.path}`")
    actual = DeltaTable.for_path(spark, str(table.path)).history()
    assert tuple(expected.columns) == HISTORY_COLUMNS
    assert actual.columns == expected.columns
    # Nullability differs: our ``version`` is non-nullable, delta-spark's is nullable.
    assert fields_of(actual) == fields_of(expected)
    expected_rows = [tuple(r) for r in expected.collect()]
    actual_rows = [tuple(r) for r in actual.collect()]
    assert [r[0] for r in actual_rows] == list(range(table.latest, -1, -1))
    assert actual_rows == expected_rows


# ----------------------------------------------------------------------------- interop


def _keep_only_our_checkpoint(spark: Any, root: Path, part_size: int | None) -> Any:
    """Replace delta-spark's checkpoints by ours at the latest version, then delete every
    earlier log file (commits, checkpoints, checksums), so only ours can rebuild the state."""
    log = root / "_delta_log"
    for name in os.listdir(log):
        if ".checkpoint." in name or name.startswith("_last_checkpoint"):
            (log / name).unlink()
    result = DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=part_size)
    for name in os.listdir(log):
        match = re.match(r"^\.?(\d{20})\.", name)
        if match and int(match.group(1)) < result.version:
            (log / name).unlink()
    return result


@pytest.mark.parametrize(
    ("name", "part_size"),
    [("partitioned", None), ("features", 2), ("v2_checkpoint", None)],
    ids=["classic", "multipart", "uuid-named"],
)
def test_delta_spark_reads_our_checkpoint(
    spark: Any,
    delta_spark: Any,
    scanned: Any,
    oracle_tables: OracleTables,
    tmp_path: Path,
    name: str,
    part_size: int | None,
) -> None:
    table = table_of(oracle_tables, name)
    copy = copy_table(table.path, tmp_path / f"{name} copy")
    result = _keep_only_our_checkpoint(spark, copy, part_size)
    assert result.version == table.latest
    assert (result.parts > 1) == (part_size is not None)
    log_names = sorted(n for n in os.listdir(copy / "_delta_log") if not n.startswith("."))
    assert [n for n in log_names if re.fullmatch(r"\d{20}\.json", n)] == [
        f"{table.latest:020d}.json"
    ]
    if name == "v2_checkpoint":  # delta.checkpointPolicy=v2: ours is UUID-named, with sidecars
        assert re.fullmatch(r"\d{20}\.checkpoint\.[-\w]+\.json", result.paths[0].rsplit("/")[-1])
        assert len(result.paths) > 1

    relocated = relocate(scanned(table.path, table.latest), table.path, copy)
    assert oracle_scanned_files(delta_spark, copy) == relocated
    assert delta_read(delta_spark, copy).count() == delta_read(delta_spark, table.path).count()
    detail = delta_spark.sql(f"DESCRIBE DETAIL delta.`{copy}`").collect()[0]
    original = delta_spark.sql(f"DESCRIBE DETAIL delta.`{table.path}`").collect()[0]
    assert (detail.numFiles, detail.sizeInBytes, detail.properties) == (
        original.numFiles,
        original.sizeInBytes,
        original.properties,
    )
    if name == "partitioned":
        # The txn action survives only in our checkpoint: delta-spark must skip the replay.
        (
            delta_spark.createDataFrame([(99, "x", "dup")], "id bigint, p string, v string")
            .write.format("delta")
            .mode("append")
            .option("txnAppId", "app-1")
            .option("txnVersion", 3)
            .save(str(copy))
        )
        assert DeltaTable.for_path(spark, str(copy)).latest_version() == table.latest


def test_damaged_newest_checkpoint_falls_back_like_delta_spark(
    spark: Any, delta_spark: Any, scanned: Any, oracle_tables: OracleTables, tmp_path: Path
) -> None:
    """delta-spark's newest checkpoint with a part cut in half: delta-spark and we both
    rebuild the version from the earlier checkpoint and list the same files. Without the
    version checksums, from which either would take protocol and metadata without reading
    the checkpoint (the damage would then surface only when the files are listed)."""
    table = oracle_tables.partitioned
    copy = copy_table(table.path, tmp_path / "damaged copy")
    for checksum in (copy / "_delta_log").glob("*.crc"):
        checksum.unlink()
    damaged = DeltaTable.for_path(spark, str(copy)).log_segment().checkpoint
    assert damaged is not None
    part = Path(local_path(damaged.files[0].path))
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    snapshot = ours(spark, copy)
    assert snapshot.segment.checkpoint is not None
    assert snapshot.segment.checkpoint.version < damaged.version
    expected = relocate(scanned(table.path, table.latest), table.path, copy)
    assert our_files(snapshot) == expected
    assert oracle_scanned_files(delta_spark, copy) == expected


def test_metadata_turning_on_an_unlisted_feature_is_refused_like_delta_spark(
    spark: Any, delta_spark: Any, tmp_path: Path
) -> None:
    """Column mapping turned on by the metadata, not listed in the table-features protocol (as
    delta-rs 1.6 writes it): delta-spark refuses the snapshot, and so do we, with the same
    error class and feature; listed, both read the same rows."""
    refused = write_table(tmp_path / "unlisted")
    with pytest.raises(
        Exception, match=r"DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH.*columnMapping"
    ):
        delta_read(delta_spark, refused).collect()
    with pytest.raises(FeaturesProtocolMetadataMismatchError, match="columnMapping"):
        ours(spark, refused)
    listed = write_table(tmp_path / "listed", list_column_mapping=True)
    assert rows_of(ours(spark, listed).to_df()) == rows_of(delta_read(delta_spark, listed))


def age_log_files(log: Path, up_to: int | None = None) -> float:
    """Set the log files (and their ``.crc`` side files) of versions up to ``up_to`` (default:
    all) 40 days back, past the 30-day log retention; that time (s)."""
    old = float(int(time.time() - 40 * DAY_SECONDS))
    for name in os.listdir(log):
        match = re.match(r"^\.?(\d{20})\.", name)
        if match and (up_to is None or int(match.group(1)) <= up_to):
            os.utime(log / name, (old, old))
    return old


@pytest.fixture(scope="module")
def cleaned_copy(
    spark: Any, oracle_tables: OracleTables, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[str], float]:
    """A copy of ``partitioned`` with versions 0-3 aged past the 30-day log retention, after
    OUR ``cleanup_metadata``: it keeps delta-spark's checkpoint 2 (the newest one at or before
    the last expired version) and deletes everything before it. Also returns the age (s)."""
    table = oracle_tables.partitioned
    copy = copy_table(table.path, tmp_path_factory.mktemp("cleanup") / "cleanup copy")
    log = copy / "_delta_log"
    old = age_log_files(log, up_to=3)
    return copy, DeltaTable.for_path(spark, str(copy)).cleanup_metadata(), old


def test_delta_spark_time_travel_after_our_cleanup(
    spark: Any,
    delta_spark: Any,
    scanned: Any,
    oracle_tables: OracleTables,
    cleaned_copy: tuple[Path, list[str], float],
) -> None:
    """delta-spark reads the versions our cleanup kept, with the original's files; what it
    removed fails on both sides with the same error class.

    delta-spark 4.3 also refuses time travel to commits older than
    ``delta.deletedFileRetentionDuration`` (7 days; DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_
    FILE_RETENTION_DURATION), which would hide versions 2 and 3 for a reason unrelated to the
    log; that check is switched off here (we do not enforce it).
    """
    table = oracle_tables.partitioned
    copy, deleted, aged = cleaned_copy
    dt = DeltaTable.for_path(spark, str(copy))
    deleted_versions = {int(re.findall(r"(\d{20})", d)[-1]) for d in deleted}
    assert deleted_versions == {0, 1}

    delta_spark.conf.set(ENFORCE_RETENTION_CONF, "false")
    try:
        # Removed by the cleanup: DELTA_VERSION_NOT_FOUND, earliest 2 (checkpoint), both sides.
        for version in (0, 1):
            with pytest.raises(Exception, match=r"DELTA_VERSION_NOT_FOUND.*\[2, 4\]"):
                oracle_scanned_files(delta_spark, copy, version=version)
            with pytest.raises(VersionNotFoundError, match=r"\[2, 4\]"):
                dt.snapshot(version)
        # Kept: version 2 (checkpoint only) by version; version 3 (checkpoint + commit) by
        # version for us and by timestamp for both: commits 2 and 3 now share one aged file
        # time (3 is monotonized to 1 ms after 2), so one second later resolves to 3.
        relocated = relocate(scanned(table.path, 2), table.path, copy)
        assert oracle_scanned_files(delta_spark, copy, version=2) == relocated
        assert our_files(dt.snapshot(2)) == relocated
        relocated = relocate(scanned(table.path, 3), table.path, copy)
        assert our_files(dt.snapshot(3)) == relocated
        later = format_timestamp_ms(int(aged * 1000) + 1000)
        assert dt.version_at(later) == 3
        assert oracle_scanned_files(delta_spark, copy, timestamp=later) == relocated
        # One day before the oldest kept commit: nothing, on both sides.
        earlier = format_timestamp_ms(int(aged * 1000) - DAY_SECONDS * 1000)
        with pytest.raises(Exception, match="DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"):
            oracle_scanned_files(delta_spark, copy, timestamp=earlier)
        with pytest.raises(TimestampEarlierThanCommitRetentionError):
            dt.version_at(earlier)
    finally:
        delta_spark.conf.unset(ENFORCE_RETENTION_CONF)
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{copy}`").select("version").collect()
    ours_history = dt.history().select("version").collect()
    assert [r[0] for r in ours_history] == [r[0] for r in history] == [4, 3, 2]


def test_delta_spark_reads_the_compat_checkpoint_of_our_cleanup(
    spark: Any,
    delta_spark: Any,
    scanned: Any,
    oracle_tables: OracleTables,
    tmp_path: Path,
) -> None:
    """Our cleanup of ``v2_checkpoint`` (its log aged past retention) first copies
    delta-spark's UUID-named checkpoint to a classic name, as delta-spark's cleanup does; that
    copy is a checkpoint delta-spark loads the table from alone (the UUID-named file and the
    hint naming it removed), with the original's files."""
    table = oracle_tables.v2_checkpoint
    copy = copy_table(table.path, tmp_path / "v2 compat copy")
    log = copy / "_delta_log"
    age_log_files(log)
    deleted = DeltaTable.for_path(spark, str(copy)).cleanup_metadata()
    assert {int(re.findall(r"(\d{20})", d)[-1]) for d in deleted} == set(range(table.latest))
    uuid_named = [
        n for n in os.listdir(log) if re.fullmatch(r"\d{20}\.checkpoint\.[-\w]+\.json", n)
    ]
    assert [int(n[:20]) for n in uuid_named] == [table.latest]
    compat = log / f"{table.latest:020d}.checkpoint.parquet"
    assert compat.exists()

    (log / uuid_named[0]).unlink()
    (log / "_last_checkpoint").unlink()
    expected = relocate(scanned(table.path, table.latest), table.path, copy)
    assert oracle_scanned_files(delta_spark, copy) == expected
    assert our_files(ours(spark, copy)) == expected


def test_physical_names_without_column_mapping_mode_are_ignored_like_delta_spark(
    spark: Any, delta_spark: Any, tmp_path: Path
) -> None:
    """A column-mapped table whose metaData lost ``delta.columnMapping.mode`` (its schema keeps
    the physical names): without column mapping a column's physical name is its name, so
    delta-spark reads the data files' columns by the logical names (none there: nulls), and so
    do we; the files and row count are unchanged."""
    copy = copy_table(
        CONFORMANCE / "golden/table-with-columnmapping-mode-name/delta", tmp_path / "t"
    )
    commit = copy / "_delta_log" / f"{0:020d}.json"
    actions = [json.loads(line) for line in commit.read_text().splitlines()]
    for action in actions:
        if "metaData" in action:
            assert action["metaData"]["configuration"].pop("delta.columnMapping.mode") == "name"
    commit.write_text("".join(json.dumps(action) + "\n" for action in actions))
    expected = rows_of(delta_read(delta_spark, copy))
    got = rows_of(ours(spark, copy).to_df())
    assert got == expected
    assert len(got) > 0 and all(value is None for row in got for value in row[:2])


def test_clustering_columns_match_describe_detail(
    spark: Any, delta_spark: Any, tmp_path: Path
) -> None:
    """A table clustered by a column whose name needs quoting and by a nested field, with
    column mapping (the domain metadata lists physical names); then clustered by nothing."""
    path = tmp_path / "clustered"
    location = f"delta.`{path}`"
    delta_spark.sql(
        f"CREATE TABLE {location} (id BIGINT, `my col` STRING, s STRUCT<a: INT, `b c`: STRING>) "
        "USING delta CLUSTER BY (`my col`, s.a) TBLPROPERTIES (delta.columnMapping.mode = 'name')"
    ).collect()

    def detail() -> list[str]:
        row = delta_spark.sql(f"DESCRIBE DETAIL {location}").select("clusteringColumns").first()
        return list(row.clusteringColumns)

    clustered = ours(spark, path)
    assert clustered.clustering_columns == detail() == ["`my col`", "s.a"]
    assert clustered.describe()["clusteringColumns"] == ["`my col`", "s.a"]
    delta_spark.sql(f"ALTER TABLE {location} CLUSTER BY NONE").collect()
    assert ours(spark, path).clustering_columns == detail() == []


def test_change_data_across_a_repartitioning_without_column_mapping_like_delta_spark(
    spark: Any, delta_spark: Any, tmp_path: Path
) -> None:
    """An overwrite with ``overwriteSchema`` that partitions a table without column mapping by
    another column: delta-spark's batch change data feed reads across it (with the latest
    schema and partitioning), and so do we."""
    path = str(tmp_path / "repartitioned")
    writer = delta_spark.sql("SELECT 1L AS id, 'a' AS p").write.format("delta")
    writer.partitionBy("p").option("delta.enableChangeDataFeed", "true").save(path)
    overwrite = delta_spark.sql("SELECT 2L AS id, 'b' AS p").write.format("delta").mode("overwrite")
    overwrite.option("overwriteSchema", "true").partitionBy("id").save(path)
    delta_spark.sql("SELECT 3L AS id, 'c' AS p").write.format("delta").mode("append").save(path)
    expected = (
        delta_spark.read.format("delta")
        .option("readChangeFeed", "true")
        .option("startingVersion", 0)
        .load(path)
    )
    actual = DeltaTable.for_path(spark, path).load_cdf(0)
    assert actual.columns == expected.columns
    assert rows_of(actual) == rows_of(expected)


def delta_spark_stream_rows(delta_spark: Any, path: str, scratch: Path) -> Any:
    """delta-spark's change data stream of ``path`` from version 0, run to its end
    (``availableNow``) into parquet; the rows written, or its failure."""
    out, checkpoint = scratch / "out", scratch / "checkpoint"
    source = delta_spark.readStream.format("delta").option("readChangeFeed", "true")
    query = (
        source.option("startingVersion", 0)
        .load(path)
        .writeStream.format("parquet")
        .option("checkpointLocation", str(checkpoint))
        .option("path", str(out))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return delta_spark.read.parquet(str(out))


def ours_stream(spark: Any, path: str) -> list[Any]:
    return list(DeltaTable.for_path(spark, path).stream_cdf(0, stop_when_caught_up=True))


def test_a_stream_backfills_with_its_starting_schema_like_delta_spark(
    spark: Any, delta_spark: Any, tmp_path: Path
) -> None:
    """A change data stream started at version 0 reads every version up to the latest with
    the latest schema: a column added later is null in older rows, a widened type is read
    wide. Our batches, together, equal the rows delta-spark's stream writes."""
    path = str(tmp_path / "evolved")
    properties = "delta.enableChangeDataFeed = true, delta.enableTypeWidening = true"
    for statement in (
        f"CREATE TABLE delta.`{path}` (id INT, a STRING) USING delta TBLPROPERTIES ({properties})",
        f"INSERT INTO delta.`{path}` VALUES (1, 'x')",
        f"ALTER TABLE delta.`{path}` ADD COLUMNS (b STRING)",
        f"INSERT INTO delta.`{path}` VALUES (2, 'y', 'z')",
        f"ALTER TABLE delta.`{path}` CHANGE COLUMN id TYPE BIGINT",
        f"INSERT INTO delta.`{path}` VALUES (5000000000, 'w', NULL)",
    ):
        delta_spark.sql(statement).collect()
    expected = delta_spark_stream_rows(delta_spark, path, tmp_path / "theirs")
    batches = [rows for _, rows in ours_stream(spark, path)]
    assert len(batches) >= 2  # the schema changes end batches
    assert all(fields_of(rows) == fields_of(expected) for rows in batches)
    actual = batches[0]
    for rows in batches[1:]:
        actual = actual.unionByName(rows)
    assert rows_of(actual.select(*expected.columns)) == rows_of(expected)
    assert (1, "x", None) in [row[:3] for row in rows_of(actual)]


@pytest.mark.parametrize("change", ["type", "partitioning"])
def test_a_stream_backfilling_across_an_unreadable_schema_is_refused_like_delta_spark(
    spark: Any, delta_spark: Any, tmp_path: Path, change: str
) -> None:
    """An overwrite with ``overwriteSchema`` that changes a column's type or the partition
    columns (no column mapping): a stream from version 0 cannot read version 0's files with
    the latest schema. delta-spark's stream fails with
    ``DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS`` at version 0, and so do we, before any row."""
    path = str(tmp_path / change)
    first = delta_spark.sql("SELECT 1 AS id, 'a' AS p").write.format("delta")
    first.option("delta.enableChangeDataFeed", "true").save(path)
    replacement = "SELECT '2' AS id, 'b' AS p" if change == "type" else "SELECT 2 AS id, 'b' AS p"
    overwrite = delta_spark.sql(replacement).write.format("delta").mode("overwrite")
    if change == "partitioning":
        overwrite = overwrite.partitionBy("p")
    overwrite.option("overwriteSchema", "true").save(path)
    with pytest.raises(Exception, match="DELTA_SCHEMA_CHANGED_WITH_STARTING_OPTIONS") as theirs:
        delta_spark_stream_rows(delta_spark, path, tmp_path / "theirs")
    assert "Detected schema change in version 0" in str(theirs.value)
    with pytest.raises(StreamSchemaChangedWithStartingOptionsError) as mine:
        ours_stream(spark, path)
    assert mine.value.getMessageParameters()["version"] == "0"
