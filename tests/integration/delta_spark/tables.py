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

    @property
    def latest(self) -> int:
        return len(self.operations) - 1


@dataclass
class OracleTables:
    partitioned: OracleTable
    features: OracleTable
    build_seconds: float

    def all(self) -> list[OracleTable]:
        return [self.partitioned, self.features]


def _run(spark: Any, table: OracleTable, operation: str, statement: str) -> None:
    spark.sql(statement).collect()
    table.operations.append(operation)


def build_tables(spark: Any, root: Path) -> OracleTables:
    """Two tables, each commit one delta-spark operation (``operations[v]`` is version v's).

    ``partitioned``: protocol (1, 4) with change data feed, partitioned by a string column
    holding spaces, ``%``, ``/``, ``=``, ``?``, ``#``, the empty string and null; an
    idempotent DataFrameWriter append
    (txnAppId/txnVersion); UPDATE, DELETE, MERGE; ``delta.checkpointInterval=2`` with
    ``checkpoint.partSize`` 3, so delta-spark writes multi-part checkpoints.

    ``features`` (a space in the table root, too): column mapping (name) with a space in a
    column name, deletion vectors,
    change data feed, the same checkpoint settings; DELETE / UPDATE / MERGE write DVs and CDC
    files.
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
    spark.conf.unset("spark.databricks.delta.checkpoint.partSize")
    return OracleTables(part, feat, time.monotonic() - started)
