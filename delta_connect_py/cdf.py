"""The change data feed as Spark Connect DataFrames: batch reads, file changes and a stream.

Responsibility: delta-spark's ``CDCReader.changesToDF`` (:func:`load_cdf`), its streaming
source's ``getFileChangesForCDC`` (:func:`cdf_file_changes`) and micro-batch loop
(:func:`stream_cdf`), built from the pure rules in :mod:`delta_connect_py.protocol.cdf`.

How rows are made: the file actions of the versions in range are collected once (one small job
over the commit JSON: cdc/add/remove/commitInfo/metaData/protocol, stats dropped; metadata-sized,
never table rows). Every data file named (cdc files, and add/remove files of versions without
cdc files) is read by ONE ``spark.read.parquet`` over explicit paths with the table's data schema
plus ``_change_type``; each row is tagged by a broadcast join on its decoded
``_metadata.file_path`` with a small client-built frame of (file, change type, version,
timestamp, partition values), so a file named by several versions yields its rows once per
version. cdc files keep their own ``_change_type``; add files are ``insert``, removes
``delete``. Partition values come from ``partitionValues`` cast to the schema's types.

Invariants:
* result schema = table schema (of the range's last metadata) + ``_change_type string,
  _commit_version long, _commit_timestamp timestamp``;
* ``_commit_timestamp`` is the commit's ``inCommitTimestamp`` when it has one, else the commit
  file's modification time monotonized over versions ``start - 100 .. end`` (delta-spark's rule;
  delta-rs uses ``commitInfo.timestamp`` instead, so the two differ there);
* every version in range has CDF enabled (start snapshot and every ``metaData`` in range), else
  ``DELTA_MISSING_CHANGE_DATA``; every commit in range is present, else
  ``DELTA_CHANGE_DATA_LOG_GAP``;
* deletion vectors: an add (remove) with a DV contributes the rows outside its DV; a path both
  removed and added in one version with a DV on either side contributes only the difference
  (rows in the new DV but not the old as ``delete``, the reverse as ``insert``), like
  delta-spark's ``processDeletionVectorActions``. DVs are decoded on the server by
  :mod:`delta_connect_py.worker.dv_rows` and applied with joins on ``_metadata.row_index``;
* not supported (raise ``DELTA_CDF_UNSUPPORTED``, never wrong rows): column mapping.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyspark.sql.connect.functions as F
from pyspark.sql.types import (
    BooleanType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from delta_connect_py.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataLossError,
    InvalidCdcRangeError,
    InvalidSourceOffsetError,
    MissingChangeDataError,
    TimestampGreaterThanCommitError,
    UnsupportedChangeDataError,
)
from delta_connect_py.plans.loading import read_commits
from delta_connect_py.plans.protocol_metadata import protocol_and_metadata
from delta_connect_py.plans.spark import collect, escape_glob, spark_schema
from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.actions import Metadata
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
from delta_connect_py.protocol.timestamps import format_timestamp_ms, monotonize
from delta_connect_py.snapshot import Snapshot, now_ms
from delta_connect_py.worker.dv_rows import (
    DV_INPUT_SCHEMA,
    DV_ROWS_SCHEMA,
    expand_deletion_vectors,
)

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
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
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
    """The commit files of ``start..end``; a missing one is a data-loss error."""
    missing = [v for v in range(start, end + 1) if v not in commits]
    if missing:
        later = [v for v in commits if v > missing[-1]]
        raise ChangeDataLossError(
            path=path,
            expected=start,
            missing=_ranges(missing),
            resume=min(later) if later else missing[-1] + 1,
        )
    return [commits[v] for v in range(start, end + 1)]


def _ranges(versions: Sequence[int]) -> str:
    if len(versions) <= 3:
        return ", ".join(map(str, versions))
    return f"{versions[0]}..{versions[-1]} ({len(versions)} versions)"


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


def read_commit_changes(spark: SparkSession, files: Sequence[LogFile]) -> list[CommitChanges]:
    """``filterCDCActions`` of each commit in ``files`` (one collect of file actions)."""
    if not files:
        return []
    rows = sorted(collect(_action_frame(spark, files)), key=lambda r: (r["version"], r["_order"]))
    lines: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        values = row.asDict(recursive=True)
        lines[values["version"]].append({name: values[name] for name in _ACTION_COLUMNS})
    return [filter_cdc_actions(f.version, lines.get(f.version, [])) for f in files]


def _snapshot_at(table: DeltaTable, listing: LogListing, version: int) -> Snapshot:
    """The snapshot at ``version`` from an existing listing (one P&M job, no re-listing)."""
    segment = table.log_segment(version, listing)
    pm = protocol_and_metadata(table.spark, segment, table.log_dir)
    check_readable(pm.protocol, table.table_root)
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


def _check_metadata(path: str, metadata: Metadata, version: int, start: int, end: int) -> None:
    if props.column_mapping_mode(metadata.configuration) != "none":
        raise UnsupportedChangeDataError(
            path=path, version=version, reason="column mapping is not supported for CDF yet"
        )
    if not props.change_data_feed_enabled(metadata.configuration):
        raise MissingChangeDataError(start=start, end=end, version=version)


def _check_range(
    path: str, start_metadata: Metadata, changes: Sequence[CommitChanges], start: int, end: int
) -> Metadata:
    """CDF enabled (and readable) for every version; returns the range's last metadata."""
    _check_metadata(path, start_metadata, start, start, end)
    metadata = start_metadata
    for change in changes:
        if change.metadata is not None:
            metadata = Metadata.from_action(change.metadata)
            _check_metadata(path, metadata, change.version, start, end)
    return metadata


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


def file_location(table_root: str, path: str) -> str:
    """A log path (URI-encoded, usually relative) as the unescaped path Spark reads."""
    decoded = unquote(path)
    if _SCHEME.match(path):
        return decoded
    if path.startswith("/"):
        return f"{table_root.split(':', 1)[0]}:{decoded}"
    return f"{table_root.rstrip('/')}/{decoded}"


def _entry(
    table_root: str,
    file: IndexedFile,
    timestamps: Mapping[int, int],
    change_type: str | None,
    dvs: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None],
) -> _Entry:
    assert file.action is not None
    return _Entry(
        location=file_location(table_root, str(file.action["path"])),
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
    """The table schema plus ``_change_type``, ``_commit_version`` and ``_commit_timestamp``."""
    return StructType([*schema.fields, *CDF_COLUMNS])


def _decoded_file_path() -> Column:
    # _metadata.file_path is URI-encoded ('%' -> %25, ' ' -> %20) but keeps '+' literal, which
    # url_decode would turn into a space.
    return F.url_decode(F.regexp_replace(F.col("_metadata.file_path"), r"\+", "%2B"))


def _files_frame(spark: SparkSession, entries: Sequence[_Entry], partitions: Sequence[str]) -> Any:
    fields = [
        StructField(_KEY, StringType()),
        StructField(_ENTRY, LongType()),
        StructField(_HAS_INCLUDE, BooleanType()),
        StructField(_TYPE, StringType()),
        StructField(COMMIT_VERSION, LongType()),
        StructField(_TS_MS, LongType()),
        *[StructField(f"_cdf_p{i}", StringType()) for i in range(len(partitions))],
    ]
    rows = [
        (
            e.location,
            i,
            e.include_dv is not None,
            e.change_type,
            e.version,
            e.timestamp_ms,
            *[e.partition_values.get(name) for name in partitions],
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
    descriptors = spark.createDataFrame(rows, schema=spark_schema(DV_INPUT_SCHEMA))
    expanded = descriptors.mapInArrow(expand_deletion_vectors, spark_schema(DV_ROWS_SCHEMA))
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


def changes_frame(
    spark: SparkSession,
    schema: StructType,
    partitions: Sequence[str],
    entries: Sequence[_Entry],
    table_root: str = "",
) -> DataFrame:
    """The changed rows of ``entries`` (lazy): one parquet read joined with the file list."""
    result_schema = cdf_schema(schema)
    if not entries:
        return spark.createDataFrame([], result_schema)
    partition_set = set(partitions)
    data_fields = [f for f in schema.fields if f.name not in partition_set]
    read_schema = StructType([*data_fields, StructField(CHANGE_TYPE, StringType())])
    locations = sorted({e.location for e in entries})
    data = (
        spark.read.schema(read_schema)
        .parquet(*[escape_glob(location) for location in locations])
        .select(
            *[F.col(f.name) for f in read_schema.fields],
            _decoded_file_path().alias(_KEY),
            F.col("_metadata.row_index").alias(_ROW),
        )
    )
    files = _files_frame(spark, entries, partitions)
    joined = data.join(F.broadcast(files), on=_KEY)
    if any(e.include_dv is not None or e.exclude_dv is not None for e in entries):
        joined = _apply_deletion_vectors(spark, table_root, joined, entries)
    index = {name: i for i, name in enumerate(partitions)}
    columns = [
        F.nullif(F.col(f"_cdf_p{index[f.name]}"), F.lit("")).cast(f.dataType).alias(f.name)
        if f.name in partition_set
        else F.col(f.name)
        for f in schema.fields
    ]
    return joined.select(
        *columns,
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
    start_version, start_ts = starting
    end_version, end_ts = ending
    if start_version is not None and start_ts is not None:
        raise ValueError("give either starting_version or starting_timestamp, not both")
    if end_version is not None and end_ts is not None:
        raise ValueError("give either ending_version or ending_timestamp, not both")
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
    """Changed rows of versions ``[start, end]`` (start defaults to 0, end to the latest).

    Runs small Spark jobs now (listing, the start snapshot's P&M, one collect of the range's file
    actions); the returned DataFrame reads the data files lazily.
    """
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
        return changes_frame(table.spark, _snapshot_at(table, listing, latest).schema, (), [])
    if window.end < window.start:
        raise InvalidCdcRangeError(start=window.start, end=window.end)
    commits = _commits_by_version(listing)
    files = _require_commits(table.table_root, commits, window.start, window.end)
    changes = read_commit_changes(table.spark, files)
    start_metadata = _metadata_at(table, listing, changes[0])
    metadata = _check_range(table.table_root, start_metadata, changes, window.start, window.end)
    timestamps = commit_timestamps_ms(commits, changes, window.start, window.end)
    indexed = [f for change in changes for f in index_commit(change)]
    schema = StructType.fromJson(metadata.schema_json)
    entries = _entries(table.table_root, indexed, timestamps)
    return changes_frame(table.spark, schema, metadata.partition_columns, entries, table.table_root)


# ----------------------------------------------------------------------------- streaming


@dataclass(frozen=True)
class FileChanges:
    """``getFileChangesForCDC``'s files plus what is needed to turn them into rows."""

    files: list[IndexedFile]
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
    changes = read_commit_changes(table.spark, files)
    snapshot = _snapshot_at(table, listing, from_version) if is_starting_version else None
    start_metadata = (
        snapshot.metadata
        if snapshot is not None
        else _metadata_at(table, listing, changes[0], known or {})
    )
    metadata = _check_range(table.table_root, start_metadata, changes, from_version, last)
    timestamps = commit_timestamps_ms(commits, changes, from_version, last)
    versions: list[VersionFiles] = []
    if snapshot is not None:
        snapshot_files = index_snapshot(from_version, _snapshot_files(snapshot))
        versions.append(VersionFiles(from_version, snapshot_files, initial_snapshot=True))
        timestamps.setdefault(from_version, snapshot.timestamp_ms)
    versions.extend(VersionFiles(c.version, index_commit(c)) for c in changes)
    selected = file_changes(versions, from_version, from_index, limits, end_offset)
    by_version = _metadata_by_version(from_version, start_metadata, changes)
    return FileChanges(selected, metadata, timestamps, start_metadata.id, by_version)


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
    strictly after ``(from_version, from_index)``, up to ``end_offset``, within the limits.

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
            raise InvalidSourceOffsetError(
                offset=parsed.to_json(),
                reason=f"it belongs to table id {parsed.reservoir_id}, but {table.table_root} "
                f"has id {latest.metadata.id}",
            )
        return parsed
    if starting_version is None:
        return DeltaSourceOffset(latest.metadata.id, latest.version, BASE_INDEX, True)
    return DeltaSourceOffset(latest.metadata.id, starting_version, BASE_INDEX, False)


def batch_frame(table: DeltaTable, changes: FileChanges) -> DataFrame:
    """The changed rows of one micro-batch's admitted files (lazy)."""
    assert changes.metadata is not None, "a batch with files always has metadata"
    schema = StructType.fromJson(changes.metadata.schema_json)
    entries = _entries(table.table_root, changes.files, changes.timestamps)
    return changes_frame(
        table.spark, schema, changes.metadata.partition_columns, entries, table.table_root
    )


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
    """
    previous = _starting_offset(table, starting_version, offset)
    known: dict[int, Metadata] = {}
    while True:
        limits = AdmissionLimits.of(max_files_per_trigger, max_bytes_per_trigger)
        changes = _file_changes(
            table,
            previous.reservoir_version,
            previous.index,
            previous.is_starting_version,
            limits,
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
