"""Frames whose schema the client states: a ``mapInArrow`` over them asks the server nothing.

Spark Connect's ``mapInArrow`` needs its input's column names; for a frame the client has no
schema of, pyspark sends an ``AnalyzePlan`` request for them before the job. The commit line
readers and the one-task jobs state their input's schema instead, and must still read right.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark.sql.connect.functions as F
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from delta_connect_py import DeltaTable
from delta_connect_py.plans import loading
from delta_connect_py.plans.spark import (
    all_nullable,
    map_in_arrow,
    one_row,
    spark_schema,
    with_stated_schema,
)
from delta_connect_py.protocol.filenames import LogFile, parse_log_file
from delta_connect_py.worker.log_files import (
    COMMIT_LINES_SCHEMA,
    CommitLinesRead,
    read_assigned_commit_lines,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def schema_requests(spark: Any, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The schema analysis requests the client sends, in order."""
    sent: list[object] = []
    real = spark.client.schema

    def counting(plan: object) -> Any:
        sent.append(plan)
        return real(plan)

    monkeypatch.setattr(spark.client, "schema", counting)
    return sent


def _commits(log: Path, texts: list[str]) -> list[LogFile]:
    log.mkdir()
    files = []
    for version, text in enumerate(texts):
        path = log / f"{version:020d}.json"
        path.write_text(text)
        log_file = parse_log_file(path.as_uri(), size=len(text), modification_time=0)
        assert log_file is not None
        files.append(log_file)
    return files


def test_a_one_task_job_needs_no_analysis(
    spark: Any, schema_requests: list[object], tmp_path: Path
) -> None:
    (commit,) = _commits(tmp_path / "_delta_log", ['{"add":{"path":"a"}}\n'])
    request = CommitLinesRead(table_path=commit.path)
    body = partial(read_assigned_commit_lines, request, [[(commit.version, commit.path)]])
    job = map_in_arrow(one_row(spark), body, spark_schema(COMMIT_LINES_SCHEMA))
    assert schema_requests == []
    assert [row["value"] for row in job.collect()] == ['{"add":{"path":"a"}}']


@pytest.mark.parametrize("bytes_per_task", [1 << 20, 1])
def test_commit_lines_read_by_workers_need_no_analysis(
    spark: Any,
    schema_requests: list[object],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bytes_per_task: int,
) -> None:
    monkeypatch.setattr(loading, "BYTES_PER_READ_TASK", bytes_per_task)  # 1: a task per file
    texts = ['{"commitInfo":{}}\n{"add":{"path":"a"}}\n', '{"remove":{"path":"a"}}\n'] * 3
    files = _commits(tmp_path / "_delta_log", texts)
    lines = loading._worker_commit_lines(spark, files, CommitLinesRead(table_path=files[0].path))
    assert schema_requests == []
    tasks = lines.select(F.spark_partition_id().alias("task")).distinct().count()
    assert tasks == (1 if bytes_per_task > 1 else len(files))
    rows = sorted((row["version"], row["value"]) for row in lines.collect())
    expected = [(v, line) for v, text in enumerate(texts) for line in text.splitlines()]
    assert rows == sorted(expected)


@pytest.mark.parametrize("commits", [3, loading.MAX_FILES_FOR_JSON_SOURCE + 2])
def test_a_fresh_state_without_a_checkpoint_needs_no_analysis(
    spark: Any, schema_requests: list[object], tmp_path: Path, commits: int
) -> None:
    """The listing, the P&M and the replay's input all state their schemas (read by Spark's
    JSON source, or by workers)."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [0]}))
    for version in range(1, commits):
        write_deltalake(str(path), pa.table({"id": [version]}), mode="append")
    state = DeltaTable.for_path(spark, str(path), snapshot_cache=False).snapshot().state
    assert schema_requests == []
    assert state.num_of_files == commits


def test_a_fresh_state_of_a_checkpointed_table_needs_no_analysis(
    spark: Any, schema_requests: list[object], tmp_path: Path
) -> None:
    """The listing's worker tells the checkpoint's schema from its footers: no request, and no
    job, infers it (``worker.parquet_schema``)."""
    path = tmp_path / "t"
    for version in range(3):
        write_deltalake(str(path), pa.table({"id": [version]}), mode="append")
    RsTable(str(path)).create_checkpoint()
    write_deltalake(str(path), pa.table({"id": [3]}), mode="append")
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    state = table.snapshot().state
    assert schema_requests == []
    assert state.num_of_files == 4
    assert table.snapshot().all_files().count() == 4


def test_a_stated_schema_leaves_nested_values_as_they_are(
    spark: Any, schema_requests: list[object]
) -> None:
    """``with_stated_schema`` is a selection of the columns: no ``to_schema`` relation, whose
    projection would rebuild every struct and map of every row on the server. A worker reading
    the frame gets its values as they are, though the stated types differ in nullability."""
    frame = spark.range(2).select(
        F.struct(
            F.lit("a").alias("path"),
            F.create_map(F.lit("p"), F.lit(None).cast("string")).alias("partitionValues"),
        ).alias("add"),
        F.col("id").alias("version"),
    )
    schema = all_nullable(
        spark_schema(
            pa.schema(
                [
                    ("version", pa.int64()),
                    (
                        "add",
                        pa.struct(
                            [
                                ("path", pa.string()),
                                ("partitionValues", pa.map_(pa.string(), pa.string())),
                            ]
                        ),
                    ),
                ]
            )
        )
    )
    stated = with_stated_schema(frame, schema)  # type: ignore[arg-type]
    assert stated.columns == ["version", "add"]
    relation = stated._plan.to_proto(spark.client).root
    assert relation.WhichOneof("rel_type") == "project"
    echoed = map_in_arrow(stated, lambda batches: batches, schema)
    assert schema_requests == []
    rows = sorted(
        (row["version"], row["add"]["path"], row["add"]["partitionValues"])
        for row in echoed.collect()
    )
    assert rows == [(0, "a", {"p": None}), (1, "a", {"p": None})]
