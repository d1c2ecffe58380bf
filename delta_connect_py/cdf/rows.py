"""The changed rows of a change data feed range, as one lazy DataFrame.

Responsibility: turn indexed file actions (:class:`~delta_connect_py.protocol.cdf.IndexedFile`)
into :class:`Entry` values (one data file to read for one version, with the deletion vectors that
bound its rows) and those into rows: :func:`changes_frame` reads every named file in ONE
``spark.read.parquet`` with the read schema's physical columns plus ``_change_type``, tags each
row by a broadcast join on its decoded ``_metadata.file_path`` with a small client-built frame
of (file, change type, version, timestamp, partition values), applies deletion vectors with
joins on ``_metadata.row_index`` and renames physical columns to logical ones last.

Invariants: the result schema is the read schema (logical names, no field metadata) plus
``_change_type string, _commit_version long, _commit_timestamp timestamp``; cdc files keep their
own ``_change_type``, adds are ``insert`` and removes ``delete``; a path both removed and added
in one version with a DV on either side contributes only the difference; no table row is
collected to the client.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
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

from delta_connect_py.data import (
    check_partition_values,
    data_file_location,
    file_key,
    file_key_column,
    logical_type,
    parquet_read_schema,
    physical_name,
    with_data_files_found,
)
from delta_connect_py.plans.deletion_vectors import decoded_deleted_rows, descriptor_row
from delta_connect_py.plans.spark import escape_glob
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.cdf import (
    IndexedFile,
)
from delta_connect_py.protocol.deletion_vectors import (
    DeletionVectorDescriptor,
)
from delta_connect_py.table_schema import parsed_schema, partition_fields, require_columns

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDF_COLUMNS = (
    StructField(CHANGE_TYPE, StringType()),
    StructField(COMMIT_VERSION, LongType()),
    StructField(COMMIT_TIMESTAMP, TimestampType()),
)
_CHANGE_TYPE_OF = {"add": "insert", "remove": "delete", "cdc": None}
_KEY = "_cdf_key"
_TYPE = "_cdf_type"
_TS_MS = "_cdf_ts_ms"
_ENTRY = "_cdf_entry"
_ROW = "_cdf_row"
_HAS_INCLUDE = "_cdf_has_include"
_INCLUDED = "_cdf_included"


@dataclass(frozen=True)
class Entry:
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
) -> Entry:
    assert file.action is not None
    return Entry(
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
) -> list[Entry]:
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


def entries_of(
    table_root: str, files: Sequence[IndexedFile], timestamps: Mapping[int, int]
) -> list[Entry]:
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
    spark: SparkSession, entries: Sequence[Entry], partition_keys: Sequence[str]
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


def _dv_rows(
    spark: SparkSession, table_root: str, dvs: Sequence[tuple[int, Mapping[str, Any], str]]
) -> DataFrame:
    """``(_cdf_entry, _cdf_row)`` of every row the given deletion vectors (of the entry, of the
    data file) name (server-side)."""
    rows = [
        descriptor_row(str(entry), DeletionVectorDescriptor.from_action(dv), table_root, data_file)
        for entry, dv, data_file in dvs
    ]
    expanded = decoded_deleted_rows(spark, rows, table_root)
    return expanded.select(
        F.col("file_key").cast("long").alias(_ENTRY), F.col("row_index").alias(_ROW)
    )


def _apply_deletion_vectors(
    spark: SparkSession, table_root: str, rows: DataFrame, entries: Sequence[Entry]
) -> DataFrame:
    """Keep each entry's rows inside its include DV and outside its exclude DV."""
    excluded = [
        (i, e.exclude_dv, e.location) for i, e in enumerate(entries) if e.exclude_dv is not None
    ]
    included = [
        (i, e.include_dv, e.location) for i, e in enumerate(entries) if e.include_dv is not None
    ]
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
    entries: Sequence[Entry],
    table_root: str = "",
) -> DataFrame:
    """The changed rows of ``entries`` read with ``metadata``'s schema (lazy): one parquet read
    joined with the file list."""
    log_dir = table_root.rstrip("/") + "/_delta_log"
    schema = parsed_schema(metadata, log_dir, log_dir, None)
    result_schema = cdf_schema(schema)
    if not entries:
        return spark.createDataFrame([], result_schema)
    version = max(entry.version for entry in entries)
    require_columns(schema, table_root, version)
    partitions = metadata.partition_columns
    typed_partitions = partition_fields(schema, partitions, table_root, version)
    partition_keys = [physical_name(field) for field in typed_partitions]
    located = [(entry.location, entry.partition_values) for entry in entries]
    check_partition_values(spark, typed_partitions, located, table_root, version)
    data_fields = [f for f in schema.fields if f.name not in set(partitions)]
    read_schema = _parquet_schema(spark, data_fields, metadata)
    locations = sorted({e.location for e in entries})
    data = with_data_files_found(
        spark.read.schema(read_schema).parquet(*[escape_glob(loc) for loc in locations]),
        table_root,
        locations,
    ).select(
        *[F.col(f"`{f.name}`") for f in read_schema.fields],
        file_key_column(F.col("_metadata.file_path")).alias(_KEY),
        F.col("_metadata.row_index").alias(_ROW),
    )
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
