"""The change data feed as Spark Connect DataFrames: batch reads, file changes and a stream.

Responsibility: delta-spark's ``CDCReader.changesToDF`` (:func:`load_cdf`), its streaming
source's ``getFileChangesForCDC`` (:func:`cdf_file_changes`) and micro-batch loop
(:func:`stream_cdf`), built from the pure rules in :mod:`delta_connect_py.protocol.cdf` and
:mod:`delta_connect_py.protocol.schema_changes`.

How rows are made: the file actions of the versions in range are collected once (one small job
over the commit JSON: cdc/add/remove/commitInfo/metaData/protocol, stats dropped; metadata-sized,
never table rows). Every data file named (cdc files, and add/remove files of versions without
cdc files) is read by ONE ``spark.read.parquet`` over explicit paths with the read schema's
physical columns (``delta.columnMapping.physicalName``; the names themselves without column
mapping; matched by parquet field id in mode ``id``, see ``data.parquet_read_schema``) plus
``_change_type``; each row is tagged by a broadcast join on its decoded
``_metadata.file_path`` with a small client-built frame of (file, change type, version,
timestamp, partition values), so a file named by several versions yields its rows once per
version. cdc files keep their own ``_change_type``; add files are ``insert``, removes
``delete``. Partition values come from ``partitionValues`` (keyed by physical name) cast to the
schema's types; physical columns are renamed to logical ones last (``delta_connect_py.data``).

Invariants:
* result schema = read schema (logical names, no field metadata) + ``_change_type string,
  _commit_version long, _commit_timestamp timestamp``. The batch read schema is delta-spark's:
  the end version's schema when column mapping is on at the start, end or latest version
  (``endVersion`` mode), else the latest version's schema (``legacy`` mode);
* a batch range whose metadata changes are not read-compatible with the read schema (a renamed
  or dropped column, a type, nullability or partitioning change) raises
  ``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE`` (``..._DATA_SCHEMA`` when the start
  version's own schema is the incompatible one), never wrong rows;
* ``_commit_timestamp`` is the commit's ``inCommitTimestamp`` when it has one, else the commit
  file's modification time monotonized over versions ``start - 100 .. end`` (delta-spark's rule;
  delta-rs uses ``commitInfo.timestamp`` instead, so the two differ there);
* every version in a batch range has CDF enabled (start snapshot and every ``metaData`` in
  range), else ``DELTA_MISSING_CHANGE_DATA``; the start version can be rebuilt (else the
  snapshot's error) and every later commit in range is present, else
  ``DELTA_MISSING_FILES_UNEXPECTED_VERSION`` (delta-spark's batch reader skips missing commits
  silently; we refuse, as its streams do);
* a range is read only where this library can read the protocol: every protocol action in a
  batch range and the protocol in force at its start, and every protocol action in the commits a
  stream batch reaches, pass delta-spark's ``protocolRead`` check, else
  ``DELTA_UNSUPPORTED_FEATURES_FOR_READ`` (or ``DELTA_INVALID_PROTOCOL_VERSION``) names the
  version;
* streams read each batch with the metadata in effect at the batch's start (delta-spark's
  schema tracking): a commit whose metadata changes the schema, partitioning or ``delta.*``
  configuration gets a ``METADATA_CHANGE_INDEX`` barrier that ends the batch, and the next
  batch reads with the new metadata. Unlike delta-spark, the stream then goes on by itself (no
  restart, no ``POST_METADATA_CHANGE_INDEX`` offset), and protocol-only changes make no barrier;
* deletion vectors: an add (remove) with a DV contributes the rows outside its DV; a path both
  removed and added in one version with a DV on either side contributes only the difference
  (rows in the new DV but not the old as ``delete``, the reverse as ``insert``), like
  delta-spark's ``processDeletionVectorActions``. DV files are read by Spark and decoded
  on the server (:mod:`delta_connect_py.plans.deletion_vectors`) and applied with joins on
  ``_metadata.row_index``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_connect_py import arguments
from delta_connect_py.data import (
    data_file_location,
    file_key,
    file_key_column,
    logical_type,
    parquet_read_schema,
    physical_name,
)
from delta_connect_py.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataFeedIncompatibleDataSchemaError,
    ChangeDataFeedIncompatibleSchemaChangeError,
    DifferentDeltaTableReadByStreamingSourceError,
    InvalidCdcRangeError,
    MissingChangeDataError,
    MissingFilesUnexpectedVersionError,
    NoStartForCdcReadError,
    TimestampGreaterThanCommitError,
)
from delta_connect_py.plans.deletion_vectors import deleted_rows
from delta_connect_py.plans.loading import (
    COMMIT_SPARK_SCHEMA,
    malformed_commits_reported,
    read_commits,
)
from delta_connect_py.plans.spark import collect, escape_glob
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.actions import Metadata, Protocol
from delta_connect_py.protocol.cdf import (
    BASE_INDEX,
    AdmissionLimits,
    CommitChanges,
    DeltaSourceOffset,
    IndexedFile,
    VersionFiles,
    file_changes,
    filter_cdc_actions,
    index_commit,
    index_snapshot,
    next_offset,
    validate_offsets,
)
from delta_connect_py.protocol.deletion_vectors import (
    STORAGE_INLINE,
    DeletionVectorDescriptor,
    dv_location,
)
from delta_connect_py.protocol.features import check_readable
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.schema_changes import (
    batch_cdf_read_compatible,
    changes_stream_metadata,
)
from delta_connect_py.protocol.timestamps import format_timestamp_ms, monotonize
from delta_connect_py.snapshot import Snapshot, now_ms

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.table import DeltaTable

CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_COLUMNS = (
    StructField(CHANGE_TYPE, StringType()),
    StructField(COMMIT_VERSION, LongType()),
    StructField(COMMIT_TIMESTAMP, TimestampType()),
)
#: delta-spark monotonizes commit times starting this many versions before the range.
POTENTIALLY_UNMONOTONIZED_TIMESTAMPS = 100
_CHANGE_TYPE_OF = {"add": "insert", "remove": "delete", "cdc": None}
_KEY = "_cdf_key"
_TYPE = "_cdf_type"
_TS_MS = "_cdf_ts_ms"
_ENTRY = "_cdf_entry"
_ROW = "_cdf_row"
_HAS_INCLUDE = "_cdf_has_include"
_INCLUDED = "_cdf_included"
_ACTION_COLUMNS = ("add", "remove", "cdc", "commitInfo", "metaData", "protocol")


# ----------------------------------------------------------------------------- log access


def _commits_by_version(listing: LogListing) -> dict[int, LogFile]:
    commits: dict[int, LogFile] = {}
    for file in listing.files:
        if file.kind is LogFileKind.COMMIT:
            commits.setdefault(file.version, file)
    return commits


def _require_commits(
    path: str, commits: Mapping[int, LogFile], start: int, end: int
) -> list[LogFile]:
    """The commit files of ``start..end``; the first missing one is a data-loss error."""
    missing = next((v for v in range(start, end + 1) if v not in commits), None)
    if missing is not None:
        seen = min((v for v in commits if v > missing), default=end + 1)
        raise MissingFilesUnexpectedVersionError(
            path=path,
            expected_version=missing,
            seen_version=seen,
            missing=_ranges(range(missing, seen)),
        )
    return [commits[v] for v in range(start, end + 1)]


def _ranges(versions: Sequence[int]) -> str:
    if len(versions) <= 3:
        return ", ".join(map(str, versions))
    return f"{versions[0]}..{versions[-1]} ({len(versions)} versions)"


def _commits_for_range(
    table: DeltaTable, listing: LogListing, commits: Mapping[int, LogFile], start: int, end: int
) -> list[LogFile]:
    """The commits of ``start..end``. Like delta-spark, the start version must be one a
    snapshot can be built at (else that snapshot's error, e.g. a truncated log)."""
    if start not in commits:
        table.log_segment(start, listing)
    return _require_commits(table.table_root, commits, start, end)


def _action_frame(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame:
    frame = read_commits(spark, files)
    present = (
        F.col("add.path").isNotNull()
        | F.col("remove.path").isNotNull()
        | F.col("cdc.path").isNotNull()
        | F.col("commitInfo").isNotNull()
        | F.col("metaData.id").isNotNull()
        | F.col("protocol.minReaderVersion").isNotNull()
    )
    return frame.where(present).select(
        "version",
        F.monotonically_increasing_id().alias("_order"),
        F.col("add").dropFields("stats", "tags").alias("add"),
        F.col("remove").dropFields("stats", "tags").alias("remove"),
        F.col("cdc").dropFields("tags").alias("cdc"),
        F.col("commitInfo"),
        F.col("metaData"),
        F.col("protocol"),
    )


def read_commit_changes(table: DeltaTable, files: Sequence[LogFile]) -> list[CommitChanges]:
    """``filterCDCActions`` of each commit in ``files`` (one collect of file actions)."""
    if not files:
        return []
    with malformed_commits_reported(table.spark, files, table.table_root, COMMIT_SPARK_SCHEMA):
        rows = collect(_action_frame(table.spark, files))
    rows.sort(key=lambda r: (r["version"], r["_order"]))
    lines: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        values = row.asDict(recursive=True)
        lines[values["version"]].append({name: values[name] for name in _ACTION_COLUMNS})
    return [filter_cdc_actions(f.version, lines.get(f.version, [])) for f in files]


def _snapshot_at(table: DeltaTable, listing: LogListing, version: int) -> Snapshot:
    """The snapshot at ``version`` from an existing listing (one P&M job, no re-listing)."""
    segment, pm = table.loaded_segment(table.log_segment(version, listing), listing)
    check_readable(pm.protocol, table.table_root, segment.version)
    return Snapshot(table=table, segment=segment, protocol_and_metadata=pm, created_at_ms=now_ms())


def _metadata_at(
    table: DeltaTable,
    listing: LogListing,
    first: CommitChanges,
    known: Mapping[int, Metadata] | None = None,
) -> Metadata:
    """The metadata at ``first``'s version without a job when possible: its own metaData
    action, else a known metadata of that version or the one before, else the snapshot's."""
    known = known or {}
    if first.metadata is not None:
        return Metadata.from_action(first.metadata)
    for version in (first.version, first.version - 1):
        if version in known:
            return known[version]
    return _snapshot_at(table, listing, first.version).metadata


def _readable_start_metadata(
    table: DeltaTable, listing: LogListing, first: CommitChanges
) -> Metadata:
    """The metadata at ``first``'s version, where the protocol in force is readable.

    ``_check_protocols`` checks ``first``'s own protocol action; without one, the start
    snapshot (which delta-spark's ``changesToDF`` always loads) checks the protocol in force,
    even when ``first``'s metaData alone would have given the metadata."""
    if first.metadata is not None and first.protocol is None:
        return _snapshot_at(table, listing, first.version).metadata
    return _metadata_at(table, listing, first)


def commit_timestamps_ms(
    commits: Mapping[int, LogFile], changes: Sequence[CommitChanges], start: int, end: int
) -> dict[int, int]:
    """Per version: the in-commit timestamp, else the monotonized commit-file time."""
    window = [
        v for v in sorted(commits) if start - POTENTIALLY_UNMONOTONIZED_TIMESTAMPS <= v <= end
    ]
    times = monotonize([commits[v].modification_time for v in window])
    result = dict(zip(window, times, strict=True))
    for change in changes:
        if change.in_commit_timestamp is not None:
            result[change.version] = change.in_commit_timestamp
    return result


# ----------------------------------------------------------------------------- checks


def _check_protocols(path: str, changes: Iterable[CommitChanges]) -> None:
    """delta-spark's ``protocolRead`` on each protocol action of ``changes``: a range that
    crosses an upgrade to a protocol this library cannot read fails, never returns rows."""
    for change in changes:
        if change.protocol is not None:
            check_readable(Protocol.from_action(change.protocol), path, change.version)


def _check_enabled(metadata: Metadata, version: int, start: int, end: int) -> None:
    if not props.change_data_feed_enabled(metadata.configuration):
        raise MissingChangeDataError(start=start, end=end, version=version)


def _last_metadata(start_metadata: Metadata, changes: Sequence[CommitChanges]) -> Metadata:
    metadata = start_metadata
    for change in changes:
        if change.metadata is not None:
            metadata = Metadata.from_action(change.metadata)
    return metadata


def _uses_column_mapping(*metadata: Metadata) -> bool:
    return any(props.column_mapping_mode(m.configuration) != "none" for m in metadata)


@dataclass(frozen=True)
class _ReadSchema:
    """The metadata whose schema a batch CDF read returns, and its version."""

    metadata: Metadata
    version: int


def _read_schema(
    table: DeltaTable,
    listing: LogListing,
    start_metadata: Metadata,
    end_metadata: Metadata,
    end: int,
    latest: int,
) -> _ReadSchema:
    """delta-spark's batch CDF schema: the end version's with column mapping at the start, end or
    latest version (``endVersion`` mode), else the latest version's (``legacy`` mode)."""
    latest_metadata = (
        end_metadata if end == latest else _snapshot_at(table, listing, latest).metadata
    )
    if _uses_column_mapping(start_metadata, end_metadata, latest_metadata):
        return _ReadSchema(end_metadata, end)
    return _ReadSchema(latest_metadata, latest)


def _schema_error(
    error: type[ChangeDataFeedIncompatibleSchemaChangeError]
    | type[ChangeDataFeedIncompatibleDataSchemaError],
    path: str,
    window: tuple[int, int],
    read: _ReadSchema,
    version: int,
) -> Exception:
    return error(
        path=path,
        start=window[0],
        end=window[1],
        read_schema=read.metadata.schema_string,
        read_version=read.version,
        incompatible_version=version,
    )


def _check_batch_range(
    path: str,
    start_metadata: Metadata,
    changes: Sequence[CommitChanges],
    window: tuple[int, int],
    read: _ReadSchema,
) -> None:
    """``changesToDF``'s checks, in its order: CDF enabled at the start and at every later
    ``metaData``; each later ``metaData`` read-compatible with the read schema; finally the
    start version's schema itself (delta-spark's ``checkBatchCdfReadSchemaIncompatibility``)."""
    start, end = window
    _check_enabled(start_metadata, start, start, end)
    for change in changes:
        if change.metadata is None:
            continue
        metadata = Metadata.from_action(change.metadata)
        _check_enabled(metadata, change.version, start, end)
        # A metaData at the start version is the schema the range starts from, not a change.
        if change.version > start and not batch_cdf_read_compatible(
            read.metadata, read.version, metadata, change.version
        ):
            raise _schema_error(
                ChangeDataFeedIncompatibleSchemaChangeError, path, window, read, change.version
            )
    if not batch_cdf_read_compatible(read.metadata, read.version, start_metadata, start):
        raise _schema_error(ChangeDataFeedIncompatibleDataSchemaError, path, window, read, start)


# ----------------------------------------------------------------------------- rows


@dataclass(frozen=True)
class _Entry:
    """One data file to read for one version.

    With deletion vectors, only rows in ``include_dv`` (every row when None) and not in
    ``exclude_dv`` (no row when None) belong to the entry.
    """

    location: str
    change_type: str | None
    version: int
    timestamp_ms: int
    partition_values: Mapping[str, str | None]
    include_dv: Mapping[str, Any] | None = None
    exclude_dv: Mapping[str, Any] | None = None


def _entry(
    table_root: str,
    file: IndexedFile,
    timestamps: Mapping[int, int],
    change_type: str | None,
    dvs: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
) -> _Entry:
    assert file.action is not None
    return _Entry(
        location=data_file_location(str(file.action["path"]), table_root),
        change_type=change_type,
        version=file.version,
        timestamp_ms=timestamps[file.version],
        partition_values=dict(file.action.get("partitionValues") or {}),
        include_dv=dvs[0],
        exclude_dv=dvs[1],
    )


def _dv(file: IndexedFile | None) -> Mapping[str, Any] | None:
    if file is None or file.action is None:
        return None
    return file.action.get("deletionVector") or None


def _version_entries(
    table_root: str, files: Sequence[IndexedFile], timestamps: Mapping[int, int]
) -> list[_Entry]:
    """One version's entries; a path both removed and added with a deletion vector yields only
    the rows the DV change deleted (new DV minus old) and restored (old minus new)."""
    removed = {f.path: f for f in files if f.kind == "remove"}
    added = {f.path: f for f in files if f.kind == "add"}
    entries = []
    for file in files:
        kind = str(file.kind)
        partner = (added if kind == "remove" else removed).get(file.path)
        paired = kind in ("add", "remove") and partner is not None
        if not paired or (_dv(file) is None and _dv(partner) is None):
            own = (None, _dv(file))
            entries.append(_entry(table_root, file, timestamps, _CHANGE_TYPE_OF[kind], own))
            continue
        old, new = (_dv(file), _dv(partner)) if kind == "remove" else (_dv(partner), _dv(file))
        if kind == "remove" and new is not None:
            entries.append(_entry(table_root, file, timestamps, "delete", (new, old)))
        if kind == "add" and old is not None:
            entries.append(_entry(table_root, file, timestamps, "insert", (old, new)))
    return entries


def _entries(
    table_root: str, files: Sequence[IndexedFile], timestamps: Mapping[int, int]
) -> list[_Entry]:
    by_version: dict[int, list[IndexedFile]] = defaultdict(list)
    for file in files:
        if file.action is not None and not file.should_skip:
            by_version[file.version].append(file)
    return [
        entry
        for version in sorted(by_version)
        for entry in _version_entries(table_root, by_version[version], timestamps)
    ]


def cdf_schema(schema: StructType) -> StructType:
    """The table schema (logical names, no field metadata) plus ``_change_type``,
    ``_commit_version`` and ``_commit_timestamp``."""
    logical = logical_type(schema)
    assert isinstance(logical, StructType)
    return StructType([*logical.fields, *CDF_COLUMNS])


def _files_frame(
    spark: SparkSession, entries: Sequence[_Entry], partition_keys: Sequence[str]
) -> Any:
    """One row per entry; ``partition_keys``: the physical names ``partitionValues`` uses."""
    fields = [
        StructField(_KEY, StringType()),
        StructField(_ENTRY, LongType()),
        StructField(_HAS_INCLUDE, BooleanType()),
        StructField(_TYPE, StringType()),
        StructField(COMMIT_VERSION, LongType()),
        StructField(_TS_MS, LongType()),
        *[StructField(f"_cdf_p{i}", StringType()) for i in range(len(partition_keys))],
    ]
    rows = [
        (
            file_key(e.location),
            i,
            e.include_dv is not None,
            e.change_type,
            e.version,
            e.timestamp_ms,
            *[e.partition_values.get(key) for key in partition_keys],
        )
        for i, e in enumerate(entries)
    ]
    return spark.createDataFrame(rows, StructType(fields))


def _dv_input(entry: int, dv: Mapping[str, Any], table_root: str) -> tuple[Any, ...]:
    descriptor = DeletionVectorDescriptor(
        storage_type=dv["storageType"],
        path_or_inline_dv=dv["pathOrInlineDv"],
        offset=dv.get("offset"),
        size_in_bytes=dv["sizeInBytes"],
        cardinality=dv["cardinality"],
    )
    inline = descriptor.path_or_inline_dv if descriptor.storage_type == STORAGE_INLINE else None
    return (
        str(entry),
        dv_location(descriptor, table_root),
        inline,
        descriptor.offset,
        descriptor.size_in_bytes,
        descriptor.cardinality,
        table_root,
    )


def _dv_rows(
    spark: SparkSession, table_root: str, dvs: Sequence[tuple[int, Mapping[str, Any]]]
) -> DataFrame:
    """``(_cdf_entry, _cdf_row)`` of every row the given deletion vectors name (server-side)."""
    rows = [_dv_input(entry, dv, table_root) for entry, dv in dvs]
    expanded = deleted_rows(spark, rows, table_root)
    return expanded.select(
        F.col("file_key").cast("long").alias(_ENTRY), F.col("row_index").alias(_ROW)
    )


def _apply_deletion_vectors(
    spark: SparkSession, table_root: str, rows: DataFrame, entries: Sequence[_Entry]
) -> DataFrame:
    """Keep each entry's rows inside its include DV and outside its exclude DV."""
    excluded = [(i, e.exclude_dv) for i, e in enumerate(entries) if e.exclude_dv is not None]
    included = [(i, e.include_dv) for i, e in enumerate(entries) if e.include_dv is not None]
    if excluded:
        rows = rows.join(_dv_rows(spark, table_root, excluded), [_ENTRY, _ROW], "left_anti")
    if included:
        marked = _dv_rows(spark, table_root, included).withColumn(_INCLUDED, F.lit(True))
        rows = rows.join(marked, [_ENTRY, _ROW], "left").where(
            ~F.col(_HAS_INCLUDE) | F.col(_INCLUDED).isNotNull()
        )
    return rows


def _parquet_schema(
    spark: SparkSession, data_fields: Sequence[StructField], metadata: Metadata
) -> StructType:
    """The parquet read schema (see ``parquet_read_schema``), plus the cdc files' own column."""
    physical = parquet_read_schema(spark, data_fields, metadata.configuration).fields
    return StructType([*physical, StructField(CHANGE_TYPE, StringType())])


def _output_columns(schema: StructType, partitions: Sequence[str]) -> list[Column]:
    """The schema's columns by logical name: partition values cast from their strings, data
    columns renamed from their physical names (and cast to the logical nested names)."""
    index = {name: i for i, name in enumerate(partitions)}
    columns = []
    for field in schema.fields:
        target = logical_type(field.dataType)
        if field.name in index:
            raw = F.col(f"_cdf_p{index[field.name]}")
            columns.append(F.nullif(raw, F.lit("")).cast(target).alias(field.name))
        else:
            columns.append(F.col(f"`{physical_name(field)}`").cast(target).alias(field.name))
    return columns


def changes_frame(
    spark: SparkSession,
    metadata: Metadata,
    entries: Sequence[_Entry],
    table_root: str = "",
) -> DataFrame:
    """The changed rows of ``entries`` read with ``metadata``'s schema (lazy): one parquet read
    joined with the file list."""
    schema = StructType.fromJson(metadata.schema_json)
    result_schema = cdf_schema(schema)
    if not entries:
        return spark.createDataFrame([], result_schema)
    partitions = metadata.partition_columns
    by_name = {f.name: f for f in schema.fields}
    data_fields = [f for f in schema.fields if f.name not in set(partitions)]
    read_schema = _parquet_schema(spark, data_fields, metadata)
    locations = sorted({e.location for e in entries})
    data = (
        spark.read.schema(read_schema)
        .parquet(*[escape_glob(location) for location in locations])
        .select(
            *[F.col(f"`{f.name}`") for f in read_schema.fields],
            file_key_column(F.col("_metadata.file_path")).alias(_KEY),
            F.col("_metadata.row_index").alias(_ROW),
        )
    )
    partition_keys = [physical_name(by_name[name]) for name in partitions]
    files = _files_frame(spark, entries, partition_keys)
    joined = data.join(F.broadcast(files), on=_KEY)
    if any(e.include_dv is not None or e.exclude_dv is not None for e in entries):
        joined = _apply_deletion_vectors(spark, table_root, joined, entries)
    return joined.select(
        *_output_columns(schema, partitions),
        F.coalesce(F.col(_TYPE), F.col(CHANGE_TYPE)).alias(CHANGE_TYPE),
        F.col(COMMIT_VERSION),
        F.timestamp_millis(F.col(_TS_MS)).alias(COMMIT_TIMESTAMP),
    )


# ----------------------------------------------------------------------------- batch


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    empty: bool = False


def _to_ms(timestamp: datetime | str) -> int:
    from delta_connect_py.table import to_epoch_ms

    return to_epoch_ms(timestamp)


def _resolve_range(
    table: DeltaTable,
    listing: LogListing,
    latest: int,
    starting: tuple[int | None, datetime | str | None],
    ending: tuple[int | None, datetime | str | None],
    allow_out_of_range: bool,
) -> _Range:
    """Versions from the options (timestamps: first commit at/after start, last at/before end)."""
    start_version, start_ts = starting  # checked by ``load_cdf``: at most one of each pair
    end_version, end_ts = ending
    if start_version is None and start_ts is None:
        # delta-spark's batch reader has no default start (readChangeFeed without one fails).
        raise NoStartForCdcReadError(path=table.table_root)
    start = 0 if start_version is None else start_version
    end = latest if end_version is None else min(end_version, latest)
    if start_ts is not None or end_ts is not None:
        commits = table.commit_timestamps(listing, table.log_segment(None, listing))
        if start_ts is not None:
            t = _to_ms(start_ts)
            after = [c.version for c in commits if c.timestamp >= t]
            if not after:
                if allow_out_of_range:
                    return _Range(latest + 1, latest, empty=True)
                raise TimestampGreaterThanCommitError(
                    provided_timestamp=format_timestamp_ms(t),
                    path=table.table_root,
                    maximum_timestamp=format_timestamp_ms(commits[-1].timestamp),
                )
            start = after[0]
        if end_ts is not None:
            too_late = _to_ms(end_ts) > commits[-1].timestamp
            end = latest if too_late else table.version_at(end_ts, listing)
        if start_ts is not None and end_ts is not None and end == start - 1:
            return _Range(start, end, empty=True)
    return _Range(start, end)


def load_cdf(
    table: DeltaTable,
    starting_version: int | None = None,
    ending_version: int | None = None,
    *,
    starting_timestamp: datetime | str | None = None,
    ending_timestamp: datetime | str | None = None,
    allow_out_of_range: bool = False,
) -> DataFrame:
    """Changed rows of versions ``[start, end]`` (end defaults to the latest version).

    A start (version or timestamp) is required, as in delta-spark (``DELTA_NO_START_FOR_CDC_READ``
    otherwise). Runs small Spark jobs now (listing, the start snapshot's P&M, one collect of the
    range's file actions; the latest P&M when ``end`` is before it); the returned DataFrame reads
    the data files lazily.
    """
    function = "load_cdf"
    starting_version, starting_timestamp = arguments.version_or_timestamp(
        function,
        arguments.cdf_version(function, starting_version, "starting_version"),
        starting_timestamp,
        ("starting_version", "starting_timestamp"),
    )
    ending_version, ending_timestamp = arguments.version_or_timestamp(
        function,
        arguments.cdf_version(function, ending_version, "ending_version"),
        ending_timestamp,
        ("ending_version", "ending_timestamp"),
    )
    listing = table.list_log()
    latest = table.log_segment(None, listing).version
    window = _resolve_range(
        table,
        listing,
        latest,
        (starting_version, starting_timestamp),
        (ending_version, ending_timestamp),
        allow_out_of_range,
    )
    if window.empty or window.start > latest:
        if not window.empty and not allow_out_of_range:
            raise CdcStartVersionAfterLatestError(
                start=window.start, latest=latest, path=table.table_root
            )
        return changes_frame(table.spark, _snapshot_at(table, listing, latest).metadata, [])
    if window.end < window.start:
        raise InvalidCdcRangeError(start=window.start, end=window.end)
    commits = _commits_by_version(listing)
    files = _commits_for_range(table, listing, commits, window.start, window.end)
    changes = read_commit_changes(table, files)
    _check_protocols(table.table_root, changes)
    start_metadata = _readable_start_metadata(table, listing, changes[0])
    end_metadata = _last_metadata(start_metadata, changes)
    read = _read_schema(table, listing, start_metadata, end_metadata, window.end, latest)
    bounds = (window.start, window.end)
    _check_batch_range(table.table_root, start_metadata, changes, bounds, read)
    timestamps = commit_timestamps_ms(commits, changes, window.start, window.end)
    indexed = [f for change in changes for f in index_commit(change)]
    entries = _entries(table.table_root, indexed, timestamps)
    return changes_frame(table.spark, read.metadata, entries, table.table_root)


# ----------------------------------------------------------------------------- streaming


@dataclass(frozen=True)
class FileChanges:
    """``getFileChangesForCDC``'s files plus what is needed to turn them into rows."""

    files: list[IndexedFile]
    #: The metadata every file here is read with: the one in effect at ``from_version`` (a
    #: metadata change after it ends the files with a schema-change barrier).
    metadata: Metadata | None
    timestamps: dict[int, int]
    reservoir_id: str
    metadata_by_version: dict[int, Metadata]

    def __iter__(self) -> Iterator[IndexedFile]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, item: int) -> IndexedFile:
        return self.files[item]


def _snapshot_files(snapshot: Snapshot) -> list[dict[str, Any]]:
    columns = ["path", "partitionValues", "size", "modificationTime", "deletionVector"]
    rows = collect(snapshot.all_files().select(*columns))
    return [row.asDict(recursive=True) for row in rows]


def _metadata_by_version(
    version: int, start: Metadata, changes: Sequence[CommitChanges]
) -> dict[int, Metadata]:
    """The metadata in effect at ``version`` and at each of ``changes``' versions."""
    current = start
    result: dict[int, Metadata] = {version: start}
    for change in changes:
        if change.metadata is not None:
            current = Metadata.from_action(change.metadata)
        result[change.version] = current
    return result


def _file_changes(
    table: DeltaTable,
    from_version: int,
    from_index: int,
    is_starting_version: bool,
    limits: AdmissionLimits | None,
    end_offset: DeltaSourceOffset | None,
    known: Mapping[int, Metadata] | None = None,
) -> FileChanges:
    listing = table.list_log()
    latest = table.log_segment(None, listing).version
    last = latest if end_offset is None else min(latest, end_offset.reservoir_version)
    if from_version > last:
        return FileChanges([], None, {}, "", {})
    first_commit = from_version + 1 if is_starting_version else from_version
    commits = _commits_by_version(listing)
    files = _require_commits(table.table_root, commits, first_commit, last)
    changes = read_commit_changes(table, files)
    snapshot = _snapshot_at(table, listing, from_version) if is_starting_version else None
    start_metadata = (
        snapshot.metadata
        if snapshot is not None
        else _metadata_at(table, listing, changes[0], known or {})
    )
    # Streams check only the batch's start version (delta-spark passes no metaData actions to
    # changesToDF when streaming); a later change to CDF is a barrier, so the batch after it
    # starts at that version and is checked then.
    _check_enabled(start_metadata, from_version, from_version, last)
    timestamps = commit_timestamps_ms(commits, changes, from_version, last)
    versions: list[VersionFiles] = []
    if snapshot is not None:
        snapshot_files = index_snapshot(from_version, _snapshot_files(snapshot))
        versions.append(VersionFiles(from_version, snapshot_files, initial_snapshot=True))
        timestamps.setdefault(from_version, snapshot.timestamp_ms)
    versions.extend(
        VersionFiles(c.version, index_commit(c, schema_change=_is_schema_change(c, start_metadata)))
        for c in changes
    )
    selected = file_changes(versions, from_version, from_index, limits, end_offset)
    # Like delta-spark's stream, which checks each protocol action as it reaches its commit.
    reached = max((f.version for f in selected), default=from_version)
    _check_protocols(table.table_root, [c for c in changes if c.version <= reached])
    by_version = _metadata_by_version(from_version, start_metadata, changes)
    return FileChanges(selected, start_metadata, timestamps, start_metadata.id, by_version)


def _is_schema_change(change: CommitChanges, stream_metadata: Metadata) -> bool:
    """Whether ``change`` gets a barrier: a ``metaData`` that changes what the stream reads
    (the metadata at the stream's version already includes that version's own action)."""
    if change.metadata is None:
        return False
    return changes_stream_metadata(Metadata.from_action(change.metadata), stream_metadata)


def cdf_file_changes(
    table: DeltaTable,
    from_version: int,
    from_index: int = -1,
    is_starting_version: bool = False,
    *,
    max_files: int | None = None,
    max_bytes: int | str | None = None,
    end_offset: DeltaSourceOffset | str | None = None,
) -> FileChanges:
    """delta-spark's ``getFileChangesForCDC``: indexed file actions (with BASE/END sentinels)
    strictly after ``(from_version, from_index)``, up to ``end_offset``, within the limits, and
    up to the first schema-change barrier (``METADATA_CHANGE_INDEX``, included): a later commit
    whose metadata differs from the metadata at ``from_version``.

    No limits when both ``max_files`` and ``max_bytes`` are None. Runs small Spark jobs (listing,
    P&M, one collect of file actions; plus the snapshot's files when ``is_starting_version``).
    """
    limits = (
        None
        if max_files is None and max_bytes is None
        else AdmissionLimits.of(max_files, max_bytes)
    )
    end = DeltaSourceOffset.from_json(end_offset) if isinstance(end_offset, str) else end_offset
    return _file_changes(table, from_version, from_index, is_starting_version, limits, end)


def _starting_offset(
    table: DeltaTable, starting_version: int | None, offset: DeltaSourceOffset | str | None
) -> DeltaSourceOffset:
    listing = table.list_log()
    latest = _snapshot_at(table, listing, table.log_segment(None, listing).version)
    if offset is not None:
        parsed = DeltaSourceOffset.from_json(offset) if isinstance(offset, str) else offset
        if parsed.reservoir_id != latest.metadata.id:
            raise DifferentDeltaTableReadByStreamingSourceError(
                path=table.table_root,
                new_table_id=latest.metadata.id,
                old_table_id=parsed.reservoir_id,
                offset=parsed.to_json(),
            )
        return parsed
    if starting_version is None:
        return DeltaSourceOffset(latest.metadata.id, latest.version, BASE_INDEX, True)
    return DeltaSourceOffset(latest.metadata.id, starting_version, BASE_INDEX, False)


def batch_frame(table: DeltaTable, changes: FileChanges) -> DataFrame:
    """The changed rows of one micro-batch's admitted files (lazy)."""
    assert changes.metadata is not None, "a batch with files always has metadata"
    entries = _entries(table.table_root, changes.files, changes.timestamps)
    return changes_frame(table.spark, changes.metadata, entries, table.table_root)


def stream_cdf(
    table: DeltaTable,
    starting_version: int | None = None,
    *,
    offset: DeltaSourceOffset | str | None = None,
    max_files_per_trigger: int | None = 1000,
    max_bytes_per_trigger: int | str | None = None,
    poll_seconds: float = 1.0,
    stop_when_caught_up: bool = False,
) -> Iterator[tuple[DeltaSourceOffset, DataFrame]]:
    """Micro-batches ``(end offset, rows)`` of the change feed, like a readStream CDF source.

    Without ``offset`` or ``starting_version`` the stream starts with the latest snapshot as
    inserts; ``offset`` (a yielded offset, or its JSON) resumes strictly after it. When caught
    up, it polls every ``poll_seconds`` (or returns if ``stop_when_caught_up``).

    Each batch has the schema in effect at its first version: a commit that changes the schema,
    partitioning or ``delta.*`` configuration ends the batch before it (the batch's offset then
    has index ``METADATA_CHANGE_INDEX``, serialized with sourceVersion 3), and the following
    batches have the new schema.

    The arguments are checked when this is called, before any Spark job
    (``DELTA_CONNECT_INVALID_ARGUMENT``); the jobs run as the batches are iterated.
    """
    function = "stream_cdf"
    starting_version = arguments.cdf_version(function, starting_version, "starting_version")
    if offset is not None and not isinstance(offset, (str, DeltaSourceOffset)):
        raise arguments.invalid_type(
            function, "offset", offset, "None, an offset yielded by stream_cdf or its to_json()"
        )
    max_files_per_trigger = arguments.optional_integer(
        function, "max_files_per_trigger", max_files_per_trigger, minimum=1, what="files per batch"
    )
    if isinstance(poll_seconds, bool) or not isinstance(poll_seconds, (int, float)):
        raise arguments.invalid_type(function, "poll_seconds", poll_seconds, "seconds, a number")
    if poll_seconds < 0:
        raise arguments.invalid_value(function, "poll_seconds", poll_seconds, "seconds >= 0")
    bytes_expected = "None, a positive number of bytes or a size such as '512m' or '10g'"
    if isinstance(max_bytes_per_trigger, bool) or not isinstance(
        max_bytes_per_trigger, (int, str, type(None))
    ):
        raise arguments.invalid_type(
            function, "max_bytes_per_trigger", max_bytes_per_trigger, bytes_expected
        )
    # AdmissionLimits are consumed as a batch admits files: every batch gets fresh ones, made
    # once here first to check the arguments.
    new_limits = partial(AdmissionLimits.of, max_files_per_trigger, max_bytes_per_trigger)
    try:
        new_limits()
    except ValueError:
        raise arguments.invalid_value(
            function, "max_bytes_per_trigger", max_bytes_per_trigger, bytes_expected
        ) from None
    return _batches(table, starting_version, offset, new_limits, poll_seconds, stop_when_caught_up)


def _batches(
    table: DeltaTable,
    starting_version: int | None,
    offset: DeltaSourceOffset | str | None,
    new_limits: Callable[[], AdmissionLimits],
    poll_seconds: float,
    stop_when_caught_up: bool,
) -> Iterator[tuple[DeltaSourceOffset, DataFrame]]:
    """``stream_cdf``'s batches, its arguments checked."""
    previous = _starting_offset(table, starting_version, offset)
    known: dict[int, Metadata] = {}
    while True:
        changes = _file_changes(
            table,
            previous.reservoir_version,
            previous.index,
            previous.is_starting_version,
            new_limits(),
            None,
            known,
        )
        known = changes.metadata_by_version or known
        current = next_offset(previous, changes.files)
        if current == previous:
            if stop_when_caught_up:
                return
            time.sleep(poll_seconds)
            continue
        validate_offsets(previous, current)
        yield current, batch_frame(table, changes)
        previous = current
