"""Writing checkpoints and cleaning up expired log files, on the server.

Responsibility: :func:`create_checkpoint` writes a snapshot's reconstructed state as a Delta
checkpoint (classic ``<v>.checkpoint.parquet`` or multi-part
``<v>.checkpoint.<p>.<n>.parquet``) plus ``_last_checkpoint``; :func:`cleanup_metadata`
deletes expired log files with delta-spark's semantics (decisions in
``protocol.cleanup``). Both run as Spark jobs: Spark's DataFrameWriter writes the parquet into a
staging folder inside ``_delta_log`` and a Python worker (``worker.checkpoint_files``) checks the
add count, renames the parts to their final names, writes the hint and removes the staging.

Invariants: the checkpoint holds exactly the snapshot's state (protocol, metaData, txn,
domainMetadata, live adds with ``dataChange=false``, unexpired removes without ``stats`` and
``tags``; ``add.stats`` only when ``delta.checkpoint.writeStatsAsJson``); multi-part parts are
Spark-hash-partitioned by ``coalesce(add.path, remove.path)`` exactly as delta-spark does; no
partial file is ever visible under a final name and ``_last_checkpoint`` is written only after
every part exists; any failure removes the staging folder. Tables supporting ``v2Checkpoint``
get a classic-named V2 checkpoint (one ``checkpointMetadata`` row, file actions inline); a
multi-part request on them raises ``DELTA_CHECKPOINT_UNSUPPORTED`` (PROTOCOL.md forbids it).
Not written yet: ``add.stats_parsed`` / ``add.partitionValues_parsed``
(``delta.checkpoint.writeStatsAsStruct``), UUID-named V2 checkpoints with sidecars.
"""

from __future__ import annotations

import json
import math
import uuid
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from delta_connect_py.errors import (
    CheckpointNonExistTableError,
    CheckpointUnsupportedError,
    MissingDeltaTableError,
)
from delta_connect_py.plans.protocol_metadata import protocol_and_metadata
from delta_connect_py.plans.spark import collect, session_conf, spark_schema
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.cleanup import CleanupPlan, cutoff_timestamp, plan_cleanup
from delta_connect_py.session import translate_server_error
from delta_connect_py.snapshot import now_ms
from delta_connect_py.worker.checkpoint_files import (
    DELETED_SCHEMA,
    PUBLISHED_SCHEMA,
    STAGING_PREFIX,
    DeleteRequest,
    PublishRequest,
    delete_log_files,
    discard_staging,
    publish_checkpoint,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.snapshot import Snapshot
    from delta_connect_py.table import DeltaTable

V2_CHECKPOINT_FEATURE = "v2Checkpoint"
#: delta-spark leaves ``checkpointSchema`` out of ``_last_checkpoint`` above this JSON length.
MAX_CHECKPOINT_SCHEMA_CHARS = 20_000
#: One file per Spark task, compressed like delta-spark's checkpoints.
WRITE_CONF = {
    "spark.sql.files.maxRecordsPerFile": "0",
    "spark.sql.parquet.compression.codec": "snappy",
}


@dataclass(frozen=True)
class CheckpointResult:
    """What :func:`create_checkpoint` published."""

    version: int
    parts: int
    paths: tuple[str, ...]
    num_actions: int
    size_in_bytes: int
    num_of_add_files: int
    #: The ``_last_checkpoint`` text written; None when a newer hint was kept.
    last_checkpoint: str | None


def _one_task(spark: SparkSession) -> DataFrame:
    """One row in one partition: drives a worker body exactly once."""
    return spark.range(0, 1, 1, 1)


def num_parts_for(num_actions: int, part_size: int | None) -> int:
    """delta-spark: ``max(1, ceil((numOfFiles + numOfRemoves) / partSize))``; 1 without size."""
    if part_size is None:
        return 1
    if part_size <= 0:
        raise ValueError(f"part_size must be positive, got {part_size}")
    return max(1, math.ceil(num_actions / part_size))


def supports_v2_checkpoints(snapshot: Snapshot) -> bool:
    """Whether the protocol lists the ``v2Checkpoint`` feature (then checkpoints are V2)."""
    features = set(snapshot.protocol.reader_features or ()) | set(
        snapshot.protocol.writer_features or ()
    )
    return V2_CHECKPOINT_FEATURE in features


def _checkpoint_metadata_row(snapshot: Snapshot, frame: DataFrame) -> DataFrame:
    """The one ``checkpointMetadata`` action a V2 checkpoint holds, shaped like ``frame``."""
    metadata = F.struct(
        F.lit(snapshot.version).cast("long").alias("version"),
        F.lit(None).cast("map<string,string>").alias("tags"),
    )
    columns = [F.lit(None).cast(field.dataType).alias(field.name) for field in frame.schema.fields]
    return snapshot.spark.range(1).select(*columns, metadata.alias("checkpointMetadata"))


def checkpoint_frame(snapshot: Snapshot, num_parts: int, v2: bool) -> DataFrame:
    """The checkpoint rows, hash-partitioned by file path into ``num_parts`` partitions."""
    add = F.col("add")
    if not props.write_stats_as_json(snapshot.metadata.configuration):
        add = add.dropFields("stats")
    frame = snapshot.state_df().select(
        "txn",
        add.alias("add"),
        F.col("remove").dropFields("stats", "tags").alias("remove"),
        "metaData",
        "protocol",
        "domainMetadata",
    )
    if v2:
        extra = _checkpoint_metadata_row(snapshot, frame)
        frame = frame.withColumn(
            "checkpointMetadata", F.lit(None).cast(extra.schema["checkpointMetadata"].dataType)
        ).unionByName(extra)
    return frame.repartition(num_parts, F.coalesce(F.col("add.path"), F.col("remove.path")))


def _nullable(data_type: DataType) -> DataType:
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(f.name, _nullable(f.dataType), True, f.metadata) for f in data_type]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(_nullable(data_type.keyType), _nullable(data_type.valueType), True)
    return data_type


def checkpoint_schema_json(frame: DataFrame) -> str | None:
    """The written (all-nullable) schema as Spark JSON, or None when delta-spark would omit it."""
    text = json.dumps(_nullable(frame.schema).jsonValue(), separators=(",", ":"))
    return text if len(text) <= MAX_CHECKPOINT_SCHEMA_CHARS else None


def _write_staging(snapshot: Snapshot, frame: DataFrame, staging: str) -> None:
    try:
        with session_conf(snapshot.spark, WRITE_CONF):
            frame.write.mode("error").parquet(staging)
    except Exception as exc:
        _discard(snapshot, staging)
        translated = translate_server_error(exc)
        if translated is exc:
            raise
        raise translated from exc


def _discard(snapshot: Snapshot, staging: str) -> None:
    """Best effort: a failed write's staging folder must not linger."""
    try:
        job = _one_task(snapshot.spark).mapInArrow(
            partial(discard_staging, staging), spark_schema(DELETED_SCHEMA)
        )
        collect(job)
    except Exception:  # the original failure matters more; cleanup_metadata can retry later
        pass


def _publish_request(snapshot: Snapshot, staging: str, num_parts: int, schema: str | None) -> Any:
    return PublishRequest(
        table_root=snapshot.table.table_root,
        log_dir=snapshot.table.log_dir,
        staging_dir=staging,
        version=snapshot.version,
        num_parts=num_parts,
        multi_part=num_parts > 1,
        expected_adds=snapshot.state.num_of_files,
        checkpoint_schema=schema,
    )


def write_checkpoint(snapshot: Snapshot, part_size: int | None = None) -> CheckpointResult:
    """Write ``snapshot`` as a checkpoint of its version and publish ``_last_checkpoint``."""
    state = snapshot.state
    num_parts = num_parts_for(state.num_of_files + state.num_of_removes, part_size)
    v2 = supports_v2_checkpoints(snapshot)
    if v2 and num_parts > 1:
        raise CheckpointUnsupportedError(
            path=snapshot.table.table_root,
            reason="the table supports v2Checkpoint, where multi-part checkpoints are "
            "forbidden; omit part_size to write a classic-named V2 checkpoint.",
        )
    frame = checkpoint_frame(snapshot, num_parts, v2)
    staging = f"{snapshot.table.log_dir}/{STAGING_PREFIX}{uuid.uuid4().hex}"
    request = _publish_request(snapshot, staging, num_parts, checkpoint_schema_json(frame))
    _write_staging(snapshot, frame, staging)
    job = _one_task(snapshot.spark).mapInArrow(
        partial(publish_checkpoint, request), spark_schema(PUBLISHED_SCHEMA)
    )
    rows = collect(job)
    return CheckpointResult(
        version=snapshot.version,
        parts=num_parts,
        paths=tuple(row["path"] for row in rows),
        num_actions=sum(row["rows"] for row in rows),
        size_in_bytes=sum(row["bytes"] for row in rows),
        num_of_add_files=sum(row["adds"] for row in rows),
        last_checkpoint=rows[0]["last_checkpoint"],
    )


def create_checkpoint(
    table: DeltaTable, version: int | None = None, *, part_size: int | None = None
) -> CheckpointResult:
    """Checkpoint ``version`` (default: latest) of ``table``; see the module docstring.

    Raises ``DELTA_CHECKPOINT_NON_EXIST_TABLE`` for a negative version,
    ``DELTA_MISSING_DELTA_TABLE`` when there is no table, ``DELTA_VERSION_NOT_FOUND`` for a
    version outside the log and ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` when the written add
    count differs from the snapshot's ``numOfFiles`` (then nothing is published).
    """
    if version is not None and version < 0:
        raise CheckpointNonExistTableError(path=table.table_root, version=version)
    num_parts_for(0, part_size)  # validates part_size before any Spark job
    snapshot = table.snapshot(version)
    try:
        return write_checkpoint(snapshot, part_size)
    finally:
        snapshot.unpersist()


def plan_table_cleanup(table: DeltaTable, now: int | None = None) -> tuple[CleanupPlan, int]:
    """The cleanup plan for ``table`` now, and the retention cutoff it used (ms)."""
    listing = table.list_log()
    if not listing.files:
        raise MissingDeltaTableError(path=table.table_root, log_path=table.log_dir)
    latest = table.log_segment(None, listing)
    configuration = protocol_and_metadata(table.spark, latest, table.log_dir).metadata.configuration
    now = now_ms() if now is None else now
    plan = plan_cleanup(
        listing.files,
        last_checkpoint=listing.last_checkpoint,
        configuration=configuration,
        now_ms=now,
    )
    return plan, cutoff_timestamp(now, configuration)


def cleanup_metadata(
    table: DeltaTable, *, dry_run: bool = False, now: int | None = None
) -> list[str]:
    """Delete (``dry_run``: only list) expired log files and garbage sidecars; their paths.

    ``now`` (ms since the epoch) replaces the clock, for tests.
    """
    plan, cutoff = plan_table_cleanup(table, now)
    if not plan.delete:
        return []
    request = DeleteRequest(
        log_dir=table.log_dir,
        paths=tuple(file.path for file in plan.delete),
        retained_checkpoints=tuple(file.path for file in plan.retained_checkpoints),
        sweep_sidecars=plan.deletes_checkpoint,
        cutoff_ms=cutoff,
        dry_run=dry_run,
    )
    job = _one_task(table.spark).mapInArrow(
        partial(delete_log_files, request), spark_schema(DELETED_SCHEMA)
    )
    return [row["path"] for row in collect(job)]
