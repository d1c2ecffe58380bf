"""Tables written by delta-spark itself, the oracle the delta_spark tests compare with."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Partition values delta-spark must escape in directory names and URI-encode in add.path.
SPECIAL_VALUES = ("a b", "50%", "c/d", "k=v", "q?#")
PART_SIZE = 3


@dataclass
class OracleTable:
    """A table written by delta-spark: where it is and what each version did."""

    name: str
    path: Path
    operations: list[str] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)  # each operation's, as delta-spark ran it

    @property
    def latest(self) -> int:
        return len(self.operations) - 1


@dataclass
class OracleTables:
    partitioned: OracleTable
    features: OracleTable
    v2_checkpoint: OracleTable
    id_mapping: OracleTable
    build_seconds: float


def _run(spark: Any, table: OracleTable, operation: str, statement: str) -> None:
    began = time.monotonic()
    spark.sql(statement).collect()
    table.operations.append(operation)
    table.seconds.append(time.monotonic() - began)


def build_tables(spark: Any, root: Path) -> OracleTables:
    """Four tables, each commit one delta-spark operation (``operations[v]`` is version v's),
    written with as few statements as cover what the comparisons need (each statement costs
    delta-spark several Spark jobs: the phase's largest share after the server starts).

    ``partitioned`` (versions 0-4): protocol (1, 4) with change data feed, partitioned by a
    string column holding spaces, ``%``, ``/``, ``=``, ``?``, ``#``, the empty string and null;
    an idempotent DataFrameWriter append (txnAppId/txnVersion); UPDATE, DELETE, MERGE;
    ``delta.checkpointInterval=2`` with ``checkpoint.partSize`` 3, so delta-spark writes
    multi-part checkpoints (versions 2 and 4).

    ``features`` (versions 0-4; a space in the table root, too): column mapping (name) with a
    space in a column name, deletion vectors, change data feed, the same checkpoint settings
    (multi-part checkpoints at versions 2 and 4); DELETE / UPDATE / MERGE write DVs and CDC
    files.

    ``v2_checkpoint``: ``delta.checkpointPolicy = v2`` and ``checkpointInterval`` 1: its
    checkpoint at version 1 is a UUID-named V2 checkpoint whose file actions lie in
    ``_sidecars/`` (``partSize`` 3 spreads them over several sidecars).

    ``id_mapping`` (versions 0-2): column mapping mode ``id`` with a nested struct and change
    data feed; an UPDATE writes cdc files.
    """
    started = time.monotonic()
    spark.conf.set("spark.databricks.delta.checkpoint.partSize", str(PART_SIZE))
    part = OracleTable("partitioned", root / "partitioned")
    location = f"delta.`{part.path}`"
    values = ", ".join(f"({i}, '{v}', 'v{i}')" for i, v in enumerate(SPECIAL_VALUES))
    _run(
        spark,
        part,
        "CREATE TABLE AS SELECT",
        f"CREATE TABLE {location} USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES (delta.checkpointInterval = 2, delta.enableChangeDataFeed = true) AS "
        f"SELECT CAST(id AS BIGINT) AS id, p, v FROM VALUES {values}, "
        "(10, '', 'empty'), (11, NULL, 'null') AS t(id, p, v)",
    )
    (
        spark.createDataFrame([(20, "a b", "txn")], "id bigint, p string, v string")
        .write.format("delta")
        .mode("append")
        .option("txnAppId", "app-1")
        .option("txnVersion", 3)
        .save(str(part.path))
    )
    part.operations.append("WRITE txn")
    part.seconds.append(time.monotonic() - started - sum(part.seconds))
    _run(spark, part, "UPDATE", f"UPDATE {location} SET v = 'updated' WHERE id IN (1, 2)")
    _run(spark, part, "DELETE", f"DELETE FROM {location} WHERE p = 'k=v'")
    _run(
        spark,
        part,
        "MERGE",
        f"MERGE INTO {location} t USING (SELECT 0L AS id, 'a b' AS p, 'merged' AS v "
        "UNION ALL SELECT 30L, 'new/%= x', 'inserted') s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *",
    )

    feat = OracleTable("features", root / "features table")
    location = f"delta.`{feat.path}`"
    _run(
        spark,
        feat,
        "CREATE TABLE",
        f"CREATE TABLE {location} (id BIGINT, `my col` STRING, part INT) USING delta "
        "PARTITIONED BY (part) TBLPROPERTIES (delta.checkpointInterval = 2, "
        "delta.enableDeletionVectors = true, delta.columnMapping.mode = 'name', "
        "delta.enableChangeDataFeed = true)",
    )
    # (CREATE TABLE AS SELECT is refused with column mapping and CDF together:
    # DELTA_BLOCK_COLUMN_MAPPING_AND_CDC_OPERATION.)
    _run(
        spark,
        feat,
        "WRITE",
        f"INSERT INTO {location} SELECT id, concat('r', id), CAST(id % 2 AS INT) FROM range(0, 20)",
    )
    _run(spark, feat, "DELETE", f"DELETE FROM {location} WHERE id % 5 = 0")
    _run(spark, feat, "UPDATE", f"UPDATE {location} SET `my col` = 'updated' WHERE id = 3")
    _run(
        spark,
        feat,
        "MERGE",
        f"MERGE INTO {location} t USING (SELECT 7L AS id, 'merged' AS c, 1 AS part "
        "UNION ALL SELECT 100L, 'inserted', 0) s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET `my col` = s.c "
        "WHEN NOT MATCHED THEN INSERT (id, `my col`, part) VALUES (s.id, s.c, s.part)",
    )

    v2 = OracleTable("v2_checkpoint", root / "v2_checkpoint")
    location = f"delta.`{v2.path}`"
    _run(
        spark,
        v2,
        "CREATE TABLE AS SELECT",
        f"CREATE TABLE {location} USING delta PARTITIONED BY (p) "
        "TBLPROPERTIES (delta.checkpointPolicy = 'v2', delta.checkpointInterval = 1) AS "
        "SELECT id, CAST(id % 3 AS STRING) AS p FROM range(0, 6)",
    )
    _run(spark, v2, "DELETE", f"DELETE FROM {location} WHERE p = '1'")
    spark.conf.unset("spark.databricks.delta.checkpoint.partSize")

    ids = OracleTable("id_mapping", root / "id_mapping")
    location = f"delta.`{ids.path}`"
    _run(
        spark,
        ids,
        "CREATE TABLE",
        f"CREATE TABLE {location} (id BIGINT, `my col` STRING, s STRUCT<a: INT, `b c`: STRING>) "
        "USING delta TBLPROPERTIES (delta.columnMapping.mode = 'id', "
        "delta.enableChangeDataFeed = true)",
    )
    _run(
        spark,
        ids,
        "WRITE",
        f"INSERT INTO {location} SELECT id, concat('r', id), "
        "named_struct('a', CAST(id AS INT), 'b c', concat('s', id)) FROM range(0, 8)",
    )
    _run(spark, ids, "UPDATE", f"UPDATE {location} SET `my col` = 'updated' WHERE id % 3 = 0")
    return OracleTables(part, feat, v2, ids, time.monotonic() - started)
