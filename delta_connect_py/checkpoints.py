"""Writing checkpoints and cleaning up expired log files, on the server.

Responsibility: :func:`create_checkpoint` writes a snapshot's reconstructed state as a Delta
checkpoint plus ``_last_checkpoint``: classic ``<v>.checkpoint.parquet``, multi-part
``<v>.checkpoint.<p>.<n>.parquet``, a classic-named V2 checkpoint (tables supporting
``v2Checkpoint`` whose ``delta.checkpointPolicy`` is not ``v2``), or a UUID-named V2 checkpoint
``<v>.checkpoint.<uuid>.json`` whose file actions live in ``_delta_log/_sidecars/*.parquet``
(``delta.checkpointPolicy=v2``). :func:`cleanup_metadata` deletes expired log files with
delta-spark's semantics (decisions in ``protocol.cleanup``), after copying a UUID-named latest
checkpoint to a classic name as delta-spark does (:func:`write_compat_checkpoint`). Both run
as Spark jobs: Spark's DataFrameWriter writes the parquet into a staging folder inside
``_delta_log`` and a Python worker (``worker.checkpoint_files``) checks the add count, renames
the parts (or sidecars) to their final names, writes the V2 top-level file and the hint and
removes the staging. A snapshot whose computedState was never queried gets it from the write job
itself (Spark's observed metrics over the rows written), so a single-file checkpoint runs no
state query (L: 1.1-1.4 s less); the state query runs first only when the layout depends on the
action count (``part_size``, sidecars).

Invariants: nothing is written to, or deleted from, a table whose protocol this library cannot
read or whose writer features it does not honor (``protocol.features.check_writable``); the
checkpoint holds exactly the snapshot's state (protocol, metaData, txn,
domainMetadata, live adds with ``dataChange=false``, unexpired removes without ``stats`` and
``tags``); ``add.stats`` only when ``delta.checkpoint.writeStatsAsJson`` (default true);
``add.stats_parsed`` / ``add.partitionValues_parsed`` when
``delta.checkpoint.writeStatsAsStruct`` (default true, as delta-spark; see
``checkpoint_stats``), carried over unparsed for live files read from a checkpoint that wrote
``stats_parsed`` of the same type (parsing is most of a large checkpoint's cost); multi-part
parts and sidecars are Spark-hash-partitioned by ``coalesce(add.path, remove.path)`` exactly as
delta-spark does; no partial file is ever visible
under a final name and ``_last_checkpoint`` is written only after every part exists; any
failure removes the staging folder, and a folder left by a killed server is ignored by every
reader and removed once stale (see ``worker.checkpoint_files``); the worker tasks are safe
under Spark's task retries (a refusal is returned as data, a retry finishes the same
publish). A multi-part request on a table supporting ``v2Checkpoint`` with the classic policy
raises ``DELTA_CHECKPOINT_UNSUPPORTED`` (PROTOCOL.md forbids multi-part V2); with the v2
policy ``part_size`` sets the sidecar count (default: 50,000 actions per sidecar, as
delta-spark). On S3 a checkpoint file above 5 GiB (one copy) raises it too, before anything is
published. A cleanup's compatibility copy holds
exactly the rows of the UUID-named top-level file it copies, is published (by the same rename)
before any file is deleted, and a failure to write it deletes nothing. Another writer's cleanup
may delete expired log files between our listing and our read of them: both operations then
start again from a fresh listing (:func:`again_after_concurrent_cleanup`), and a cleanup's
sidecar sweep keeps every sidecar a checkpoint present at the sweep names. A full file system
raises ``DELTA_CONNECT_STORAGE_FULL`` with nothing published.
"""

from __future__ import annotations

import json
import logging
import math
import re
import uuid
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import pyspark.sql.connect.functions as F

from delta_connect_py import arguments
from delta_connect_py.checkpoint_stats import (
    partition_values_parsed,
    stats_parsed,
    stats_schema,
)
from delta_connect_py.errors import (
    CheckpointNonExistTableError,
    CheckpointUnsupportedError,
    CorruptLogFileError,
    MissingDeltaTableError,
    ServerFileNotFoundError,
    StorageFullError,
)
from delta_connect_py.job_log import logged_job
from delta_connect_py.plans.file_keys import action_path, is_file_action
from delta_connect_py.plans.loading import checkpoint_frames, read_checkpoint_files
from delta_connect_py.plans.replay import PARSED_STATS_COLUMN
from delta_connect_py.plans.spark import (
    all_nullable,
    collect,
    map_in_arrow,
    observing,
    one_row,
    session_conf,
    spark_schema,
)
from delta_connect_py.plans.state import state_aggregations
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.cleanup import (
    CleanupPlan,
    cutoff_timestamp,
    needs_compat_checkpoint,
    plan_cleanup,
)
from delta_connect_py.protocol.feature_use import check_features_listed
from delta_connect_py.protocol.features import check_writable, protocol_features
from delta_connect_py.protocol.segment import CheckpointChoice
from delta_connect_py.protocol.staging import (
    STAGING_PREFIX,
    STALE_STAGING_MS,
    staging_folder_name,
)
from delta_connect_py.snapshot import now_ms, snapshot_of
from delta_connect_py.spark_failures import translate_server_error
from delta_connect_py.table_schema import partition_fields
from delta_connect_py.worker.checkpoint_files import (
    DELETED_SCHEMA,
    PUBLISHED_SCHEMA,
    DeleteRequest,
    PublishRequest,
    delete_log_files,
    discard_staging,
    publish_checkpoint,
)
from delta_connect_py.worker.failures import decode_error
from delta_connect_py.worker.stores import StorageOptions, guarded

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.protocol.segment import LogSegment
    from delta_connect_py.snapshot import Snapshot
    from delta_connect_py.table_log import TableLog

_T = TypeVar("_T")

__all__ = ["STAGING_PREFIX", "CheckpointResult", "cleanup_metadata", "create_checkpoint"]

V2_CHECKPOINT_FEATURE = "v2Checkpoint"
DELETION_VECTORS_FEATURE = "deletionVectors"
#: delta-spark's default sidecar size for V2 checkpoints (actions per sidecar file).
V2_SIDECAR_PART_SIZE = 50_000
#: delta-spark leaves ``checkpointSchema`` out of ``_last_checkpoint`` above this JSON length.
MAX_CHECKPOINT_SCHEMA_CHARS = 20_000
#: One file per Spark task, compressed like delta-spark's checkpoints. Timestamps in
#: ``stats_parsed`` as INT64 micros (Delta's timestamp type), not Spark's legacy INT96.
WRITE_CONF = {
    "spark.sql.files.maxRecordsPerFile": "0",
    "spark.sql.parquet.compression.codec": "snappy",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}
#: parquet-mr's writer options. Size statistics (parquet 1.15+: byte sizes and level
#: histograms per column, optional metadata no Delta reader uses) cost the one writing task
#: ~0.3 s on L's 78 columns.
WRITE_OPTIONS = {"parquet.size.statistics.enabled": "false"}
#: Up to this many commit bytes whose adds' stats must be parsed into ``stats_parsed``, one
#: task reads, converts and writes a single-file checkpoint: ~16k adds, ~0.4 s of parsing.
SERIAL_PARSE_BYTES = 16 << 20


#: How many of a checkpoint's files ``repr(CheckpointResult)`` names.
SHOWN_FILES = 3

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CheckpointResult:
    """What ``DeltaTable.create_checkpoint()`` published.

    Example:
        >>> result = dt.create_checkpoint()
        >>> result.version, result.parts, result.paths[0]
        (12, 1, 'file:/data/events/_delta_log/00000000000000000012.checkpoint.parquet')
    """

    #: The version checkpointed.

    version: int
    #: Files of the checkpoint proper: parts (classic, multi-part) or 1 (V2 top-level file).
    parts: int
    #: Every file written: the parts, or the V2 top-level file followed by its sidecars.
    paths: tuple[str, ...]
    #: Actions written (files, tombstones, protocol, metadata, transactions, ...).
    num_actions: int
    #: Bytes of every file written.
    size_in_bytes: int
    #: Live data files the checkpoint holds (checked equal to the snapshot's before publishing).
    num_of_add_files: int
    #: The ``_last_checkpoint`` text written; None when a newer hint was kept.
    last_checkpoint: str | None

    def __repr__(self) -> str:
        """Version, counts and the names of the files written (not ``_last_checkpoint``)."""
        names = ", ".join(path.rsplit("/", 1)[-1] for path in self.paths[:SHOWN_FILES])
        if len(self.paths) > SHOWN_FILES:
            names += f", ... ({len(self.paths) - SHOWN_FILES} more)"
        hint = "written" if self.last_checkpoint is not None else "kept (a newer one exists)"
        return (
            f"CheckpointResult(version={self.version}, parts={self.parts}, "
            f"num_of_add_files={self.num_of_add_files}, num_actions={self.num_actions}, "
            f"size_in_bytes={self.size_in_bytes}, files=[{names}], _last_checkpoint {hint})"
        )


@dataclass(frozen=True)
class Layout:
    """How a checkpoint is laid out."""

    num_parts: int
    #: V2 spec: the checkpoint holds one ``checkpointMetadata`` action.
    v2: bool
    #: UUID-named V2 checkpoint: file actions in ``num_parts`` sidecars.
    sidecars: bool


def num_parts_for(num_actions: int, part_size: int | None) -> int:
    """delta-spark: ``max(1, ceil((numOfFiles + numOfRemoves) / partSize))``; 1 without size."""
    if part_size is None:
        return 1
    if part_size <= 0:
        raise ValueError(f"part_size must be positive, got {part_size}")
    return max(1, math.ceil(num_actions / part_size))


def supports_v2_checkpoints(snapshot: Snapshot) -> bool:
    """Whether the protocol lists the ``v2Checkpoint`` feature (then checkpoints are V2)."""
    return V2_CHECKPOINT_FEATURE in protocol_features(snapshot.protocol)


def checkpoint_layout(
    snapshot: Snapshot, part_size: int | None, uuid_named: bool | None = None
) -> Layout:
    """The layout delta-spark would choose; ``uuid_named`` overrides the policy (V2 only).

    Runs the state query only when the number of parts depends on the action count (a
    ``part_size``, or sidecars): a single file's state is observed as it is written.
    """
    v2 = supports_v2_checkpoints(snapshot)
    if uuid_named is None:
        uuid_named = props.checkpoint_policy(snapshot.metadata.configuration) == "v2"
    if v2 and uuid_named:
        sidecar_size = part_size or V2_SIDECAR_PART_SIZE
        return Layout(num_parts_for(_num_actions(snapshot), sidecar_size), True, True)
    num_parts = 1 if part_size is None else num_parts_for(_num_actions(snapshot), part_size)
    if v2 and num_parts > 1:
        raise CheckpointUnsupportedError(
            path=snapshot.table.table_root,
            reason="the table supports v2Checkpoint, where multi-part checkpoints are "
            "forbidden; omit part_size to write a classic-named V2 checkpoint.",
        )
    return Layout(num_parts, v2, False)


def _num_actions(snapshot: Snapshot) -> int:
    """The file actions a checkpoint of ``snapshot`` holds (the state query, once)."""
    state = snapshot.state
    return state.num_of_files + state.num_of_removes


def _checkpoint_metadata_row(snapshot: Snapshot, frame: DataFrame) -> DataFrame:
    """The one ``checkpointMetadata`` action a V2 checkpoint holds, shaped like ``frame``."""
    metadata = F.struct(
        F.lit(snapshot.version).cast("long").alias("version"),
        F.lit(None).cast("map<string,string>").alias("tags"),
    )
    columns = [F.lit(None).cast(field.dataType).alias(field.name) for field in frame.schema.fields]
    return snapshot.spark.range(1).select(*columns, metadata.alias("checkpointMetadata"))


def stats_parsed_type(snapshot: Snapshot) -> StructType | None:
    """The type of the checkpoint's ``add.stats_parsed``; None when it is not written."""
    configuration = snapshot.metadata.configuration
    if not props.write_stats_as_struct(configuration):
        return None
    tight_bounds = DELETION_VECTORS_FEATURE in protocol_features(snapshot.protocol)
    return stats_schema(
        snapshot.schema, snapshot.partition_columns, configuration, tight_bounds=tight_bounds
    )


def checkpoint_add(snapshot: Snapshot, parsed_type: StructType | None) -> Column:
    """The checkpoint's ``add`` column: stats as JSON and/or typed, per the table's settings.

    Typed stats come from the previous checkpoint where it wrote them with the same type
    (``PARSED_STATS_COLUMN`` of the rows), else from parsing ``add.stats`` (~26 us a row).
    """
    add = F.col("add")
    if parsed_type is not None:
        fields = partition_fields(
            snapshot.schema,
            snapshot.partition_columns,
            snapshot.table.table_root,
            snapshot.version,
            ignore_case=True,
        )
        typed_values = partition_values_parsed(F.col("add.partitionValues"), fields)
        if typed_values is not None:
            # when(): a nullable struct, like every checkpoint field.
            typed_values = F.when(F.col("add.path").isNotNull(), typed_values)
            add = add.withField("partitionValues_parsed", typed_values)
        # coalesce() parses only where the previous checkpoint gave nothing.
        typed_stats = F.coalesce(
            F.col(PARSED_STATS_COLUMN), stats_parsed(F.col("add.stats"), parsed_type)
        )
        add = add.withField("stats_parsed", typed_stats)
    if not props.write_stats_as_json(snapshot.metadata.configuration):
        add = add.dropFields("stats")
    return add


def checkpoint_frame(snapshot: Snapshot, layout: Layout) -> DataFrame:
    """The checkpoint rows (only file actions for sidecars), clustered into its parts."""
    parsed_type = stats_parsed_type(snapshot)
    add = checkpoint_add(snapshot, parsed_type)
    remove = F.col("remove").dropFields("stats", "tags")
    state = snapshot.checkpoint_rows(parsed_type)
    if layout.sidecars:
        frame = state.where(is_file_action()).select(add.alias("add"), remove.alias("remove"))
    else:
        frame = state.select(
            "txn",
            add.alias("add"),
            remove.alias("remove"),
            "metaData",
            "protocol",
            "domainMetadata",
        )
    if layout.v2 and not layout.sidecars:
        extra = _checkpoint_metadata_row(snapshot, frame)
        frame = frame.withColumn(
            "checkpointMetadata", F.lit(None).cast(extra.schema["checkpointMetadata"].dataType)
        ).unionByName(extra)
    if layout.num_parts == 1:
        return (
            frame.coalesce(1) if _one_task_converts(snapshot, parsed_type) else frame.repartition(1)
        )
    return frame.repartition(layout.num_parts, action_path())


def _one_task_converts(snapshot: Snapshot, parsed_type: StructType | None) -> bool:
    """Whether the one task writing a single-file checkpoint should also read and convert its
    rows (``coalesce(1)``), rather than every core converting them and shuffling them to it.

    The shuffle pays off only for parsing many adds' stats (from_json, ~26 us a row: L's first
    checkpoint, write 27 s -> 22 s on 2 cores). Without it, as when the previous checkpoint
    carries the typed stats, one task is faster (L, the next checkpoint: write 8.4-8.7 s
    against 9.0-9.4 s).
    """
    if parsed_type is None:
        return True
    to_parse = snapshot.stats_parsed_to_parse_bytes(parsed_type)
    return to_parse is not None and to_parse <= SERIAL_PARSE_BYTES


def checkpoint_schema_json(frame: DataFrame) -> str | None:
    """The written (all-nullable) schema as Spark JSON, or None when delta-spark would omit it."""
    text = json.dumps(all_nullable(frame.schema).jsonValue(), separators=(",", ":"))
    return text if len(text) <= MAX_CHECKPOINT_SCHEMA_CHARS else None


def _without_nulls(value: dict[str, Any]) -> dict[str, Any]:
    return {key: item for key, item in value.items() if item is not None}


def non_file_actions(snapshot: Snapshot) -> tuple[str, ...]:
    """A UUID-named checkpoint's top-level actions other than sidecars, as JSON lines.

    They come from the computed state, which the client holds already (one row each).
    """
    state = snapshot.state
    actions: list[dict[str, Any]] = [
        {"checkpointMetadata": {"version": snapshot.version}},
        {"protocol": _without_nulls(state.protocol.to_action())},
        {"metaData": _without_nulls(state.metadata.to_action())},
    ]
    actions += [{"txn": _without_nulls(dict(txn))} for txn in state.set_transactions]
    actions += [{"domainMetadata": dict(domain)} for domain in state.domain_metadata]
    return tuple(json.dumps(action, separators=(",", ":")) for action in actions)


def _write_staging(
    spark: SparkSession, frame: DataFrame, staging: str, options: StorageOptions
) -> None:
    try:
        with session_conf(spark, WRITE_CONF):
            frame.write.options(**WRITE_OPTIONS).mode("error").parquet(staging)
    except Exception as exc:
        _discard(spark, staging, options)
        full = out_of_space(exc, "create_checkpoint (writing the checkpoint)", staging)
        translated = full if full is not None else translate_server_error(exc, spark)
        if translated is exc:
            raise
        raise translated from None


#: How a full file system shows in a JVM (IOException) or Python (ENOSPC) failure.
_NO_SPACE = re.compile(r"No space left on device|Disk quota exceeded")


def out_of_space(exc: BaseException, operation: str, path: str) -> StorageFullError | None:
    """``DELTA_CONNECT_STORAGE_FULL`` when ``exc`` (from the server) is a full file system."""
    match = _NO_SPACE.search(str(exc))
    if match is None:
        return None
    return StorageFullError(operation=operation, path=path.rsplit("/", 1)[0], reason=match[0])


def _discard(spark: SparkSession, staging: str, options: StorageOptions) -> None:
    """Best effort: a failed write's staging folder must not linger."""
    try:
        body = partial(discard_staging, staging, storage_options=options)
        job = map_in_arrow(one_row(spark), body, spark_schema(DELETED_SCHEMA))
        collect(job)
    except Exception:  # the original failure matters more; cleanup_metadata can retry later
        pass


def _publish(spark: SparkSession, request: PublishRequest) -> list[Any]:
    """Run ``publish_checkpoint`` on the server; its rows, the top-level file first.

    A refusal comes back as a row (so Spark does not retry it) and is raised here; the staging
    folder a refused or failed publish leaves (for the task's retries) is discarded then.
    """
    body = partial(
        guarded,
        "create_checkpoint (publishing the checkpoint and _last_checkpoint)",
        request.log_dir,
        request.storage_options,
        partial(publish_checkpoint, request),
    )
    job = map_in_arrow(one_row(spark), body, spark_schema(PUBLISHED_SCHEMA))
    try:
        rows = collect(job)
    except Exception as exc:
        _discard(spark, request.staging_dir, request.storage_options)
        full = out_of_space(exc, "create_checkpoint (publishing)", request.staging_dir)
        if full is not None:
            raise full from exc
        raise
    refusal = next((row["refusal"] for row in rows if row["refusal"] is not None), None)
    if refusal is not None:
        _discard(spark, request.staging_dir, request.storage_options)
        raise decode_error(refusal)
    return rows


def _new_staging_dir(table: TableLog) -> str:
    """A fresh staging folder in ``_delta_log``, named with its creation time
    (``protocol.staging``: how old it is must not depend on file system times)."""
    return f"{table.log_dir}/{staging_folder_name(now_ms(), uuid.uuid4().hex)}"


def _publish_request(
    snapshot: Snapshot, staging: str, layout: Layout, schema: str | None
) -> PublishRequest:
    return PublishRequest(
        table_root=snapshot.table.table_root,
        log_dir=snapshot.table.log_dir,
        staging_dir=staging,
        version=snapshot.version,
        num_parts=layout.num_parts,
        multi_part=layout.num_parts > 1 and not layout.sidecars,
        expected_adds=snapshot.state.num_of_files,
        checkpoint_schema=None if layout.sidecars else schema,
        sidecars=layout.sidecars,
        checkpoint_uuid=str(uuid.uuid4()) if layout.sidecars else "",
        non_file_actions=non_file_actions(snapshot) if layout.sidecars else (),
        now_ms=now_ms(),
        storage_options=snapshot.table.storage_options,
    )


def write_checkpoint(
    snapshot: Snapshot, part_size: int | None = None, *, uuid_named: bool | None = None
) -> CheckpointResult:
    """Write ``snapshot`` as a checkpoint of its version and publish ``_last_checkpoint``.

    ``uuid_named`` (V2 tables only) overrides ``delta.checkpointPolicy``: True writes a
    UUID-named checkpoint with sidecars, False a classic-named V2 checkpoint. The written add
    count is checked against ``snapshot.state``'s numOfFiles. When the state was not computed
    before, the write job observes it over the rows it writes: the check then proves that the
    file holds every add the writer was given, not that a second query agrees.
    """
    check_writable(snapshot.protocol, snapshot.table.table_root, snapshot.version)
    layout = checkpoint_layout(snapshot, part_size, uuid_named)
    frame = checkpoint_frame(snapshot, layout)
    schema = checkpoint_schema_json(frame)
    observation = None
    if not snapshot.state_known:
        frame, observation = observing(frame, state_aggregations())
    staging = _new_staging_dir(snapshot.table)
    _write_staging(snapshot.spark, frame, staging, snapshot.table.storage_options)
    try:
        if observation is not None and observation.get:
            snapshot.adopt_observed_state(observation.get)
        # Without observed metrics (a server that returns none), the state query runs now.
        request = _publish_request(snapshot, staging, layout, schema)
    except Exception:
        _discard(snapshot.spark, staging, snapshot.table.storage_options)
        raise
    rows = _publish(snapshot.spark, request)
    return CheckpointResult(
        version=snapshot.version,
        parts=1 if layout.sidecars else layout.num_parts,
        paths=tuple(row["path"] for row in rows),
        num_actions=sum(row["rows"] for row in rows),
        size_in_bytes=sum(row["bytes"] for row in rows),
        num_of_add_files=sum(row["adds"] for row in rows),
        last_checkpoint=rows[0]["last_checkpoint"],
    )


def checkpoint_arguments(
    table: TableLog, version: object, part_size: object
) -> tuple[int | None, int | None]:
    """``create_checkpoint``'s arguments checked before any Spark job: an int version or None
    (``DELTA_CHECKPOINT_NON_EXIST_TABLE`` when negative) and a positive ``part_size`` or None."""
    checked_version = arguments.version("create_checkpoint", version)
    if checked_version is not None and checked_version < 0:
        raise CheckpointNonExistTableError(path=table.table_root, version=checked_version)
    checked_part_size = arguments.optional_integer(
        "create_checkpoint", "part_size", part_size, minimum=1, what="actions per checkpoint part"
    )
    return checked_version, checked_part_size


def create_checkpoint(
    table: TableLog, version: int | None = None, *, part_size: int | None = None
) -> CheckpointResult:
    """Checkpoint ``version`` (default: latest) of ``table``; see the module docstring.

    Raises ``DELTA_CHECKPOINT_NON_EXIST_TABLE`` for a negative version,
    ``DELTA_UNSUPPORTED_FEATURES_FOR_WRITE`` (or ``..._FOR_READ``) for a protocol whose features
    this library does not honor,
    ``DELTA_MISSING_DELTA_TABLE`` when there is no table, ``DELTA_VERSION_NOT_FOUND`` for a
    version outside the log and ``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` when the written add
    count differs from the snapshot's ``numOfFiles`` (then nothing is published).
    """
    version, part_size = checkpoint_arguments(table, version, part_size)

    def checkpoint_fresh_snapshot() -> CheckpointResult:
        snapshot = snapshot_of(table, version)
        try:
            with logged_job(
                _log, "checkpoint write", table=table.table_root, version=snapshot.version
            ):
                return write_checkpoint(snapshot, part_size)
        finally:
            snapshot.unpersist()

    return again_after_concurrent_cleanup(table, checkpoint_fresh_snapshot)


#: How many times an operation starts again from a fresh listing when a log file it was about
#: to read was deleted meanwhile by another writer's cleanup.
CONCURRENT_CLEANUP_RETRIES = 2


def again_after_concurrent_cleanup(table: TableLog, operation: Callable[[], _T]) -> _T:
    """``operation()``, started again from a fresh listing (at most
    :data:`CONCURRENT_CLEANUP_RETRIES` times) when it failed to read a log file that a fresh
    listing no longer holds: another writer's cleanup deleted it (it had expired) between our
    listing and our read. A file that is still listed is corrupt, and its error is raised; a
    version the cleanup removed for good then fails with ``DELTA_VERSION_NOT_FOUND``.
    """
    for attempt in range(CONCURRENT_CLEANUP_RETRIES + 1):
        try:
            return operation()
        except (CorruptLogFileError, ServerFileNotFoundError) as error:
            if attempt == CONCURRENT_CLEANUP_RETRIES or not _deleted_meanwhile(table, error):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _deleted_meanwhile(
    table: TableLog, error: CorruptLogFileError | ServerFileNotFoundError
) -> bool:
    name = error.message_parameters.get("file", "").rsplit("/", 1)[-1]
    if not name or "/_delta_log/_sidecars/" in error.message_parameters.get("file", ""):
        return False
    return name not in {file.name for file in table.list_log().files}


@dataclass(frozen=True)
class TableCleanup:
    """What :func:`cleanup_metadata` does to a table now."""

    plan: CleanupPlan
    #: The retention cutoff the plan used (ms).
    cutoff_ms: int
    #: The UUID-named checkpoint to copy to a classic name before deleting anything; None
    #: when no copy is needed (``protocol.cleanup.needs_compat_checkpoint``) or nothing is
    #: deleted.
    compat_source: CheckpointChoice | None


def plan_table_cleanup(table: TableLog, now: int | None = None) -> TableCleanup:
    """What a cleanup of ``table`` at ``now`` (default: the clock) deletes and writes."""
    listing = table.list_log(pm_lines_after=-1)  # the latest P&M are loaded below
    if not listing.files:
        raise MissingDeltaTableError(path=table.table_root, log_path=table.log_dir)
    latest, pm = table.loaded_segment(table.log_segment(None, listing), listing)
    check_writable(pm.protocol, table.table_root, latest.version)
    check_features_listed(pm.protocol, pm.metadata, table.table_root, latest.version)
    configuration = pm.metadata.configuration
    now = now_ms() if now is None else now
    plan = plan_cleanup(
        listing.files,
        last_checkpoint=listing.last_checkpoint,
        configuration=configuration,
        now_ms=now,
    )
    if plan.delete and plan.boundary is not None:
        _check_kept_checkpoint_reads(table, listing, plan.boundary, latest)
    v2 = V2_CHECKPOINT_FEATURE in protocol_features(pm.protocol)
    compat = bool(plan.delete) and needs_compat_checkpoint(latest.checkpoint, listing.files, v2)
    return TableCleanup(
        plan, cutoff_timestamp(now, configuration), latest.checkpoint if compat else None
    )


def _check_kept_checkpoint_reads(
    table: TableLog, listing: LogListing, boundary: int, latest: LogSegment
) -> None:
    """Refuse a cleanup whose kept checkpoint (of version ``boundary``) does not rebuild its
    version: every log file before it is deleted, so a reader could no longer read around it.

    The checkpoint must be the one a snapshot of ``boundary`` loads (not one read around), and
    every value of its files, sidecars included, must decode as a UTF-8 string where it is one
    (``CheckpointFrames.check_readable``: one Spark job, skipped when the session already ran
    it on these files; a damaged page fails here, not after the deletes). ``latest``: the
    latest version's loaded segment, which already loaded the kept checkpoint when it is the
    newest one (the usual case).
    """
    segment = table.log_segment(boundary, listing)
    error: CorruptLogFileError | None = None
    try:
        kept_is_latest = latest.checkpoint is not None and latest.checkpoint.version == boundary
        loaded = latest if kept_is_latest else table.loaded_segment(segment, listing)[0]
        if loaded.checkpoint is not None and loaded.checkpoint.version == boundary:
            checkpoint_frames(table.spark, loaded, table.log_dir)[0].check_readable()
            return
    except CorruptLogFileError as unreadable:
        error = unreadable
    files = segment.checkpoint.files if segment.checkpoint is not None else ()
    why = f" ({error.message_parameters.get('reason')})" if error is not None else ""
    raise CorruptLogFileError(
        file=", ".join(file.path for file in files) or f"the checkpoint of version {boundary}",
        path=table.table_root,
        reason=(
            f"cleanup_metadata would keep this checkpoint of version {boundary} and delete every "
            f"log file before it, but it does not rebuild version {boundary}{why}; "
            "nothing was deleted. Write a new checkpoint (create_checkpoint) and clean up once it "
            "is older than the log retention, or restore the file"
        ),
    ) from None


#: The action columns a checkpoint may hold (a V2 top-level file read as JSON also has the
#: commit-only ``cdc`` and ``commitInfo`` columns, always null there).
CHECKPOINT_ACTION_COLUMNS = (
    "txn",
    "add",
    "remove",
    "metaData",
    "protocol",
    "domainMetadata",
    "checkpointMetadata",
    "sidecar",
)


def write_compat_checkpoint(table: TableLog, source: CheckpointChoice) -> str:
    """Copy the UUID-named checkpoint ``source``'s top-level actions to the classic-named
    ``<v>.checkpoint.parquet`` (its sidecars are referenced, not copied), as delta-spark's
    cleanup does; the copy's path. ``_last_checkpoint`` is left as it is.
    """
    frame = read_checkpoint_files(table.spark, source.files)
    columns = [name for name in frame.columns if name in CHECKPOINT_ACTION_COLUMNS]
    staging = _new_staging_dir(table)
    _write_staging(table.spark, frame.select(*columns).coalesce(1), staging, table.storage_options)
    request = PublishRequest(
        table_root=table.table_root,
        log_dir=table.log_dir,
        staging_dir=staging,
        version=source.version,
        num_parts=1,
        multi_part=False,
        expected_adds=None,
        checkpoint_schema=None,
        write_hint=False,
        now_ms=now_ms(),
        sweep_stale_staging=False,
        storage_options=table.storage_options,
    )
    return str(_publish(table.spark, request)[0]["path"])


def cleanup_metadata(
    table: TableLog, *, dry_run: bool = False, now: int | None = None
) -> list[str]:
    """Delete (``dry_run``: only list) expired log files, garbage sidecars and stale staging
    folders (left by checkpoint writers that died); their paths.

    Before deleting anything from a table whose latest checkpoint is UUID-named, the
    compatibility checkpoint delta-spark writes is written (``TableCleanup.compat_source``);
    a dry run writes nothing. ``now`` (ms since the epoch) replaces the clock, for tests. The
    delete job runs even when no log file has expired, so that stale staging folders are
    always swept.
    """
    with logged_job(_log, "log cleanup", table=table.table_root, dry_run=dry_run):
        return _cleanup_metadata(table, dry_run, now_ms() if now is None else now)


def _cleanup_metadata(table: TableLog, dry_run: bool, now: int) -> list[str]:
    cleanup = again_after_concurrent_cleanup(table, partial(plan_table_cleanup, table, now))
    plan = cleanup.plan
    if cleanup.compat_source is not None and not dry_run:
        write_compat_checkpoint(table, cleanup.compat_source)
    request = DeleteRequest(
        log_dir=table.log_dir,
        paths=tuple(file.path for file in plan.delete),
        retained_checkpoints=tuple(file.path for file in plan.retained_checkpoints),
        sweep_sidecars=plan.deletes_checkpoint,
        cutoff_ms=cleanup.cutoff_ms,
        dry_run=dry_run,
        stale_staging_before_ms=now - STALE_STAGING_MS,
        storage_options=table.storage_options,
    )
    body = partial(
        guarded,
        "cleanup_metadata (listing and deleting expired log files)",
        table.log_dir,
        table.storage_options,
        partial(delete_log_files, request),
    )
    job = map_in_arrow(one_row(table.spark), body, spark_schema(DELETED_SCHEMA))
    return [row["path"] for row in collect(job)]
