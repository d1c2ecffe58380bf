"""delta_connect_py on the vanilla server against delta-spark itself as the oracle.

Tables are written by real delta-spark (``oracle_tables``, see tables.build_tables); our side
always runs on the ``spark`` fixture (the vanilla server), delta-spark's on ``delta_spark``.

Compared:
- ``DESCRIBE DETAIL`` (numFiles, sizeInBytes, properties, protocol versions, table features,
  partition columns, id, createdAt, lastModified) with our latest snapshot;
- the files delta-spark scans at every version (``inputFiles()`` with ``versionAsOf``) and the
  files it reads rows from (``input_file_name()``) with our ``all_files()`` paths, decoded and
  resolved against the table root;
- ``Snapshot.to_df`` with ``spark.read.format("delta")`` at every version;
- ``DeltaTable.load_cdf`` with ``readChangeFeed`` (every column, ``_commit_timestamp`` too);
- ``DeltaTable.history`` with ``DESCRIBE HISTORY`` (every column);
- interop: delta-spark reads a copy whose only log content is OUR checkpoint (classic and
  multi-part) plus the last commit, and honours the txn action in it; delta-spark time travel
  after OUR ``cleanup_metadata`` on a copy with aged log files.

Known differences (kept visible as xfail / comments, not hidden):
- ``load_cdf`` refuses column-mapping tables (DELTA_CDF_UNSUPPORTED): xfail on ``features``;
  TODO: drop the xfail when column mapping is supported for CDF.
- A version before the earliest retained checkpoint: delta-spark raises
  DELTA_VERSION_NOT_FOUND, we raise DELTA_TRUNCATED_TRANSACTION_LOG (strict xfail).
- ``history()``'s ``version`` column is non-nullable, delta-spark's is nullable (types compared
  without nullability).
- delta-spark 4.3 refuses time travel beyond ``delta.deletedFileRetentionDuration``; we do not
  (switched off in the cleanup test).
"""

from __future__ import annotations

import os
import re
import shutil
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyspark.sql.connect.functions as F
import pytest

from delta_connect_py.errors import (
    DeltaError,
    UnsupportedChangeDataError,
    VersionNotFoundError,
)
from delta_connect_py.history import HISTORY_COLUMNS
from delta_connect_py.table import DeltaTable
from tests.integration.delta_spark.tables import OracleTable, OracleTables

pytestmark = pytest.mark.delta_spark

_URI = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
TABLES = ["partitioned", "features"]
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


def delta_read(delta_spark: Any, path: Path, version: int | None = None) -> Any:
    reader = delta_spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(str(path))


def oracle_scanned_files(delta_spark: Any, path: Path, version: int | None = None) -> set[str]:
    """The files delta-spark's scan lists (Hadoop paths: decoded once already)."""
    return {local_path(f) for f in delta_read(delta_spark, path, version).inputFiles()}


def oracle_read_files(delta_spark: Any, path: Path, version: int | None = None) -> set[str]:
    """The files delta-spark reads rows from (``input_file_name`` is URI-encoded)."""
    frame = delta_read(delta_spark, path, version).select(F.input_file_name().alias("f"))
    return {local_path(unquote(row["f"])) for row in frame.distinct().collect()}


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


def ours(spark: Any, path: Path, version: int | None = None) -> Any:
    return DeltaTable.for_path(spark, str(path)).snapshot(version)


@pytest.fixture(scope="module")
def snapshots(spark: Any) -> Any:
    """Our snapshots of the (never changing) oracle tables, shared so each replays once."""
    cache: dict[tuple[Path, int | None], Any] = {}

    def get(path: Path, version: int | None = None) -> Any:
        if (path, version) not in cache:
            cache[path, version] = ours(spark, path, version)
        return cache[path, version]

    yield get
    # Release the server-side state now, while the server runs: a materialized DataFrame still
    # alive at interpreter exit makes pyspark retry its release against a stopped server for
    # ~10 minutes (15 retries, backoff up to 60 s).
    for snapshot in cache.values():
        snapshot.unpersist()
    cache.clear()


@pytest.fixture(scope="module")
def scanned(delta_spark: Any) -> Any:
    """delta-spark's scanned files of the oracle tables by version, shared."""
    cache: dict[tuple[Path, int | None], set[str]] = {}

    def get(path: Path, version: int | None = None) -> set[str]:
        if (path, version) not in cache:
            cache[path, version] = oracle_scanned_files(delta_spark, path, version)
        return cache[path, version]

    return get


# ----------------------------------------------------------------------------- snapshot state


@pytest.mark.parametrize("name", TABLES)
def test_describe_detail_matches_snapshot(
    delta_spark: Any, snapshots: Any, oracle_tables: OracleTables, name: str
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


@pytest.mark.parametrize("name", TABLES)
def test_scanned_files_match_at_every_version(
    snapshots: Any, scanned: Any, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    for version in range(table.latest + 1):
        expected = scanned(table.path, version)
        assert our_files(snapshots(table.path, version)) == expected, (
            f"version {version} ({table.operations[version]})"
        )


@pytest.mark.parametrize("name", TABLES)
def test_files_read_match_input_file_name(
    delta_spark: Any, snapshots: Any, oracle_tables: OracleTables, name: str
) -> None:
    """Every live file of these tables holds live rows, so both sets must be equal."""
    table = table_of(oracle_tables, name)
    expected = oracle_read_files(delta_spark, table.path)
    assert our_files(snapshots(table.path, table.latest)) == expected


# ----------------------------------------------------------------------------- data, CDF, history


@pytest.mark.parametrize("name", TABLES)
def test_to_df_matches_delta_read_at_every_version(
    delta_spark: Any, snapshots: Any, oracle_tables: OracleTables, name: str
) -> None:
    table = table_of(oracle_tables, name)
    for version in range(table.latest + 1):
        expected = delta_read(delta_spark, table.path, version)
        actual = snapshots(table.path, version).to_df()
        assert actual.columns == expected.columns
        assert rows_of(actual) == rows_of(expected), (
            f"version {version} ({table.operations[version]})"
        )


@pytest.mark.parametrize("name", TABLES)
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
    try:
        actual = DeltaTable.for_path(spark, str(table.path)).load_cdf(0)
    except UnsupportedChangeDataError as exc:
        if "column mapping" not in str(exc):
            raise
        pytest.xfail(f"delta_connect_py: {exc}")
    assert actual.columns == expected.columns
    assert actual.schema == expected.schema
    assert rows_of(actual) == rows_of(expected)


@pytest.mark.parametrize("name", TABLES)
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
    ("name", "part_size"), [("partitioned", None), ("features", 2)], ids=["classic", "multipart"]
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
    assert [n for n in log_names if n.endswith(".json")] == [f"{table.latest:020d}.json"]

    original_files = scanned(table.path, table.latest)
    relocated = {f.replace(str(table.path), str(copy), 1) for f in original_files}
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


@pytest.fixture(scope="module")
def cleaned_copy(
    spark: Any, oracle_tables: OracleTables, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, list[str]]:
    """A copy of ``partitioned`` with versions 0-3 aged past the 30-day log retention, after
    OUR ``cleanup_metadata``: it keeps delta-spark's checkpoint 2 (the newest one at or before
    the last expired version) and deletes everything before it."""
    table = oracle_tables.partitioned
    copy = copy_table(table.path, tmp_path_factory.mktemp("cleanup") / "cleanup copy")
    log = copy / "_delta_log"
    old = time.time() - 40 * DAY_SECONDS
    for name in os.listdir(log):
        match = re.match(r"^\.?(\d{20})\.", name)
        if match and int(match.group(1)) <= 3:
            os.utime(log / name, (old, old))
    return copy, DeltaTable.for_path(spark, str(copy)).cleanup_metadata()


def test_delta_spark_time_travel_after_our_cleanup(
    spark: Any,
    delta_spark: Any,
    scanned: Any,
    oracle_tables: OracleTables,
    cleaned_copy: tuple[Path, list[str]],
) -> None:
    """delta-spark reads every version our cleanup kept, with the original's files.

    delta-spark 4.3 also refuses time travel to commits older than
    ``delta.deletedFileRetentionDuration`` (7 days; DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_
    FILE_RETENTION_DURATION), which would hide versions 2 and 3 for a reason unrelated to the
    log; that check is switched off here (we do not enforce it).
    """
    table = oracle_tables.partitioned
    copy, deleted = cleaned_copy
    deleted_versions = {int(re.findall(r"(\d{20})", d)[-1]) for d in deleted}
    assert deleted_versions == {0, 1}

    delta_spark.conf.set(ENFORCE_RETENTION_CONF, "false")
    try:
        for version in range(table.latest + 1):
            if version < 2:
                with pytest.raises(Exception, match=r"DELTA_VERSION_NOT_FOUND.*\[2, 4\]"):
                    oracle_scanned_files(delta_spark, copy, version)
                with pytest.raises(DeltaError):
                    ours(spark, copy, version)
                continue
            expected = scanned(table.path, version)
            relocated = {f.replace(str(table.path), str(copy), 1) for f in expected}
            assert oracle_scanned_files(delta_spark, copy, version) == relocated, version
            assert our_files(ours(spark, copy, version)) == relocated, version
    finally:
        delta_spark.conf.unset(ENFORCE_RETENTION_CONF)
    history = delta_spark.sql(f"DESCRIBE HISTORY delta.`{copy}`").select("version").collect()
    ours_history = DeltaTable.for_path(spark, str(copy)).history().select("version").collect()
    assert [r[0] for r in ours_history] == [r[0] for r in history] == [4, 3, 2]


@pytest.mark.xfail(
    strict=True,
    reason="difference: for a version before the earliest retained checkpoint delta-spark's "
    "versionAsOf raises DELTA_VERSION_NOT_FOUND (Available versions: [2, 4]); our "
    "snapshot(version) raises DELTA_TRUNCATED_TRANSACTION_LOG",
)
def test_cleaned_version_error_class_matches(
    spark: Any, cleaned_copy: tuple[Path, list[str]]
) -> None:
    with pytest.raises(VersionNotFoundError):
        ours(spark, cleaned_copy[0], 0)
