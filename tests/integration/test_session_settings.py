"""A session (or a server's defaults) with other SQL settings reads and writes tables alike.

Managed Connect servers and users' notebooks set what they like: Arrow's large string types,
ANSI off, case-sensitive names, tiny Arrow batches and file splits, no adaptive execution, no
broadcast joins, the row-based parquet reader, legacy parquet output, other codecs and
timestamp types. In a session of its own with all of them, every read of a set of conformance
tables (checkpoints of every kind, deletion vectors, column mapping, partitions, the change data
feed) gives what the default session gives, and a checkpoint written there is read back by
delta-rs and by the default session with the same files. (The session time zone is left out:
``add.stats`` rebuilt from a checkpoint's ``stats_parsed`` is rendered in it, as delta-spark's
``to_json`` does; ``test_snapshot.py`` covers time zones.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from delta_connect_py import DeltaTable
from delta_connect_py.errors import DeltaError
from tests.conftest import sorted_rows

OTHER_SETTINGS = {
    "spark.sql.execution.arrow.useLargeVarTypes": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "3",
    "spark.sql.ansi.enabled": "false",
    "spark.sql.caseSensitive": "true",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.shuffle.partitions": "3",
    "spark.sql.files.maxPartitionBytes": "2048",
    "spark.sql.parquet.enableVectorizedReader": "false",
    "spark.sql.parquet.binaryAsString": "true",
    "spark.sql.parquet.writeLegacyFormat": "true",
    "spark.sql.parquet.compression.codec": "gzip",
    "spark.sql.parquet.outputTimestampType": "INT96",
    "spark.sql.timestampType": "TIMESTAMP_NTZ",
    "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
    "spark.sql.legacy.timeParserPolicy": "LEGACY",
    "spark.sql.ansi.doubleQuotedIdentifiers": "true",
}

TABLES = [
    "golden/multi-part-checkpoint",
    "golden/kernel-basic-dv-with-checkpoint",
    "golden/type-widening",
    "kernel/v2-checkpoints-parquet-with-sidecars",
    "kernel/app-txn-checkpoint",
    "kernel/cdf-table-with-dv",
    "kernel/timestamp-partitioned-table",
    "delta-rs/checkpoint-v2-table",
    "delta-rs/table-with-domain-metadata",
    "delta-rs/table_with_column_mapping",
    "dat/multi_partitioned",
]


@pytest.fixture(scope="module")
def other_spark(spark_remote: str) -> Iterator[Any]:
    """A session of its own (``connect`` would share the module's) with ``OTHER_SETTINGS``."""
    session = SparkSession.builder.remote(spark_remote).create()
    for key, value in OTHER_SETTINGS.items():
        session.conf.set(key, value)
    yield session
    session.stop()


def _outcome(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except DeltaError as error:
        return type(error).__name__


def _reads(session: Any, table: Path) -> dict[str, Any]:
    def delta_table() -> DeltaTable:
        return DeltaTable.for_path(session, str(table), snapshot_cache=False)

    def state() -> Any:
        snapshot = delta_table().snapshot()
        computed = snapshot.state
        return (
            snapshot.version,
            computed.num_of_files,
            computed.size_in_bytes,
            sorted(snapshot.transactions.items()),
            sorted_rows(snapshot.all_files()),
        )

    return {
        "state": _outcome(state),
        "history": _outcome(
            lambda: [(r["version"], r["operation"]) for r in delta_table().history().collect()]
        ),
        "rows": _outcome(lambda: sorted_rows(delta_table().snapshot().to_df())),
        "change data": _outcome(lambda: sorted_rows(delta_table().load_cdf(0))),
    }


@pytest.mark.parametrize("relative", TABLES)
def test_reads_in_a_session_of_other_settings_equal_the_default_sessions(
    spark: Any, other_spark: Any, conformance_table: Any, relative: str
) -> None:
    table = conformance_table(f"{relative}/delta")
    assert _reads(other_spark, table) == _reads(spark, table)


#: Tables whose latest version has no checkpoint yet.
UNCHECKPOINTED_LATEST = [
    "golden/kernel-basic-dv-with-checkpoint",
    "golden/type-widening",
    "kernel/cdf-table-with-dv",
    "kernel/timestamp-partitioned-table",
    "delta-rs/table_with_column_mapping",
    "dat/multi_partitioned",
]


@pytest.mark.parametrize("relative", UNCHECKPOINTED_LATEST)
def test_a_checkpoint_written_in_a_session_of_other_settings_reads_back_alike(
    spark: Any, other_spark: Any, conformance_table: Any, relative: str
) -> None:
    deltalake = pytest.importorskip("deltalake")
    table = conformance_table(f"{relative}/delta")
    before = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot()
    assert not (table / "_delta_log" / f"{before.version:020d}.checkpoint.parquet").exists()
    expected = sorted_rows(before.all_files())
    DeltaTable.for_path(other_spark, str(table), snapshot_cache=False).create_checkpoint()
    for commit in (table / "_delta_log").glob("*.json"):
        if int(commit.name[:20]) < before.version:
            commit.unlink()  # the new checkpoint alone must carry the state
    after = DeltaTable.for_path(spark, str(table), snapshot_cache=False).snapshot()
    assert after.segment.checkpoint is not None
    assert after.segment.checkpoint_version == before.version
    assert sorted_rows(after.all_files()) == expected
    theirs = deltalake.DeltaTable(str(table))
    assert theirs.version() == before.version
    assert sorted(Path(uri).name for uri in theirs.file_uris()) == sorted(
        Path(row["path"]).name for row in before.all_files().collect()
    )
