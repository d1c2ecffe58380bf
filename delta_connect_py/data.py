"""A snapshot's rows as a DataFrame: data files read by Spark on the server, Delta applied on top.

Responsibility: :func:`snapshot_to_df` (``Snapshot.to_df``) and :func:`select_files`, the data
files a read with a filter would scan. The plan: the live ``add`` actions' file metadata (path,
partition values, deletion vector descriptor, and stats only when a filter needs them) is
collected; files are pruned by partition values and skipped by stats; the survivors are read in
one ``spark.read.parquet`` with the table's physical schema (columns matched by parquet field
id in column mapping mode ``id``, see :func:`parquet_read_schema`) plus
``_metadata.file_path`` and ``_metadata.row_index``; partition values (a small broadcast
relation keyed by file) are joined in and cast to their schema types by Spark; rows named by
deletion vectors (DV files read by Spark, decoded in a worker, see
``delta_connect_py.plans.deletion_vectors``; once eagerly, to report bad DVs) are removed with
an anti-join; physical column names become logical ones;
finally the filter itself is applied to the rows.

Partition values: null and ``""`` are null (``__HIVE_DEFAULT_PARTITION__`` appears only in
directory names, never as a logged value, so it gets no special case); everything else is cast
from the string by Spark, so timestamps without a zone are read in the session time zone (as
delta-spark does) and ISO-8601 ``...T...Z`` values as UTC.

Invariants: the result has exactly the table schema's columns, logical names and types, in
schema order (or ``columns``); a file is left out only when the log proves none of its rows can
pass the filter, so pruning never changes the result; paths handed to Spark are URI-decoded,
resolved against the table root and glob-escaped; a referenced data file that does not exist
raises ``DELTA_FILE_NOT_FOUND_DETAILED`` naming it; no table row is ever collected.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote

import pyspark.sql.connect.functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    MapType,
    NumericType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from delta_connect_py import arguments
from delta_connect_py.errors import (
    FailedCastPartitionValueError,
    FileReferencedNotFoundError,
    InvalidArgumentError,
)
from delta_connect_py.plans.deletion_vectors import decoded_deleted_rows, descriptor_row
from delta_connect_py.plans.spark import all_nullable, collect, escape_glob
from delta_connect_py.protocol.deletion_vectors import (
    DeletionVectorDescriptor,
)
from delta_connect_py.protocol.file_filters import (
    Disjunction,
    Filter,
    Predicate,
    column_stats,
    parse_filter,
    partition_may_match,
    predicates_of,
    stats_may_match,
)
from delta_connect_py.protocol.properties import (
    COLUMN_MAPPING_ID_KEY,
    PHYSICAL_NAME_KEY,
    column_mapping_mode,
)
from delta_connect_py.spark_failures import MISSING_PATH, caused_by, translate_server_error
from delta_connect_py.table_schema import (
    no_metadata,
    partition_fields,
    renamed_type,
    require_columns,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from delta_connect_py.protocol.actions import Metadata
    from delta_connect_py.table_log import TableLog


class SnapshotView(Protocol):
    """What this module reads of a :class:`~delta_connect_py.snapshot.Snapshot` (which calls
    it, so it cannot import it)."""

    @property
    def table(self) -> TableLog: ...
    @property
    def spark(self) -> SparkSession: ...
    @property
    def schema(self) -> StructType: ...
    @property
    def partition_columns(self) -> tuple[str, ...]: ...
    @property
    def metadata(self) -> Metadata: ...
    @property
    def version(self) -> int: ...
    def all_files(self) -> DataFrame: ...


#: Spark's field metadata key for a parquet field id, and the setting that makes its parquet
#: reader match fields by it.
PARQUET_FIELD_ID_KEY = "parquet.field.id"
FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
FILE_KEY = "_dcp_file"
ROW_INDEX = "_dcp_row_index"
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class DataFile:
    """One live data file: its log path, where Spark reads it, and what the log says of it."""

    path: str
    location: str
    partition_values: dict[str, str | None]
    deletion_vector: DeletionVectorDescriptor | None
    size: int | None

    @property
    def key(self) -> str:
        return file_key(self.location)


# ---------------------------------------------------------------------------------------------
# Paths


def data_file_location(path: str, table_root: str) -> str:
    """The unescaped URI of a data file: ``path`` is URI-encoded, relative or absolute."""
    decoded = unquote(path)
    if _SCHEME.match(path):
        return decoded
    if path.startswith("/"):
        scheme = _SCHEME.match(table_root)
        prefix = table_root[: scheme.end()] if scheme else "file:"
        authority = re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*://[^/]*", table_root)
        return (authority.group(0) if authority else prefix) + decoded
    return f"{table_root.rstrip('/')}/{decoded}"


def file_key(location: str) -> str:
    """The join key of a file: its unescaped URI with ``file:///`` shortened to ``file:/``."""
    if location.startswith("file:"):
        return "file:/" + location[len("file:") :].lstrip("/")
    return location


def file_key_column(file_path: Column) -> Column:
    """:func:`file_key` of Spark's ``_metadata.file_path`` (a URI string), computed in Spark."""
    decoded = F.url_decode(F.replace(file_path, F.lit("+"), F.lit("%2B")))
    return F.regexp_replace(decoded, r"^file:/+", "file:/")


# ---------------------------------------------------------------------------------------------
# Schemas and column mapping


def physical_type(data_type: DataType) -> DataType:
    """``data_type`` with every nested field renamed to its physical name, metadata dropped."""
    return renamed_type(data_type, physical_name)


def logical_type(data_type: DataType) -> DataType:
    """``data_type`` without field metadata (names unchanged), every field, element and value
    nullable: the type rows read from parquet files have. Spark reads files as nullable, and
    cannot cast a nullable nested field to a ``NOT NULL`` one (a struct with a ``NOT NULL``
    field, as delta-spark writes ``STRUCT<a: INT NOT NULL>``, could not be read)."""
    return all_nullable(renamed_type(data_type, lambda f: f.name))


def physical_name(field: StructField) -> str:
    return str((field.metadata or {}).get(PHYSICAL_NAME_KEY) or field.name)


def parquet_read_schema(
    spark: SparkSession, fields: Sequence[StructField], configuration: Mapping[str, str]
) -> StructType:
    """The schema ``fields`` of a table with ``configuration`` are read from parquet with:
    physical names and types, top-level fields nullable.

    In column mapping mode ``id``, every struct field with a ``delta.columnMapping.id``, nested
    ones included, carries it as Spark's ``parquet.field.id``, so that Spark matches it to the
    parquet column of that field id, as the protocol requires of id mode, whatever that column
    is named in the file (a table converted from Iceberg after a rename, say); a field without
    an id is matched by name. Spark does so only while ``FIELD_ID_READ_CONF`` is on: this turns
    it on in ``spark``'s session, and leaves it on, since Spark reads it when a query runs, not
    when its DataFrame is made (it changes nothing for schemas without ``parquet.field.id``;
    Spark's own tests run with it on).
    """
    by_field_id = column_mapping_mode(configuration) == "id"
    if by_field_id and spark.conf.get(FIELD_ID_READ_CONF, "false") != "true":
        spark.conf.set(FIELD_ID_READ_CONF, "true")
    metadata_of = _field_id_metadata if by_field_id else no_metadata
    return StructType(
        [
            StructField(
                physical_name(f),
                renamed_type(f.dataType, physical_name, metadata_of),
                True,
                metadata_of(f),
            )
            for f in fields
        ]
    )


def _field_id_metadata(field: StructField) -> dict[str, Any]:
    field_id = (field.metadata or {}).get(COLUMN_MAPPING_ID_KEY)
    return {} if field_id is None else {PARQUET_FIELD_ID_KEY: int(field_id)}


def _partition_fields(snapshot: SnapshotView) -> list[StructField]:
    table = snapshot.table.table_root
    return partition_fields(snapshot.schema, snapshot.partition_columns, table, snapshot.version)


def _data_fields(snapshot: SnapshotView) -> list[StructField]:
    partitions = set(snapshot.partition_columns)
    return [f for f in snapshot.schema.fields if f.name not in partitions]


def logical_schema(snapshot: SnapshotView) -> StructType:
    return logical_type(snapshot.schema)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Choosing files


def _descriptor(row: Any) -> DeletionVectorDescriptor | None:
    if row is None or row["storageType"] is None:
        return None
    return DeletionVectorDescriptor.from_action(row.asDict())


def _type_name(field: StructField) -> str:
    return str(field.dataType.typeName())


#: The struct fields a filter column names, from the top-level column down to the one compared.
FieldPath = tuple[StructField, ...]


def resolve_filter_column(schema: StructType, name: str) -> FieldPath | None:
    """The fields ``name`` addresses: a top-level column of exactly that name, else a dotted
    path through struct fields (``"address.city"``); None when it names no column."""
    fields = {field.name: field for field in schema.fields}
    if name in fields:
        return (fields[name],)
    path: list[StructField] = []
    current: DataType = schema
    for part in name.split("."):
        if not isinstance(current, StructType):
            return None
        field = next((f for f in current.fields if f.name == part), None)
        if field is None:
            return None
        path.append(field)
        current = field.dataType
    return tuple(path)


def _filter_paths(snapshot: SnapshotView, predicates: Sequence[Predicate]) -> dict[str, FieldPath]:
    """Each predicate's column resolved (``resolve_filter_column``); a ValueError names those
    that name no column."""
    paths = {p.column: resolve_filter_column(snapshot.schema, p.column) for p in predicates}
    unknown = [name for name, path in paths.items() if path is None]
    if unknown:
        known = sorted(f.name for f in snapshot.schema.fields)
        raise arguments.invalid_value(
            "to_df",
            "filter",
            unknown,
            f"names of the table's columns {known} (a nested struct field is named by its "
            "dotted path, e.g. 'address.city'; names are case-sensitive)",
        )
    resolved = {name: path for name, path in paths.items() if path is not None}
    for predicate in predicates:
        _check_filter_values(predicate, resolved[predicate.column][-1])
    _check_cast_filter_strings(snapshot.spark, predicates, resolved)
    return resolved


def _check_filter_values(predicate: Predicate, field: StructField) -> None:
    """``DELTA_CONNECT_INVALID_ARGUMENT`` for a value the column cannot be compared with, which
    Spark would otherwise refuse when the rows are read, with a JVM trace: a column of a type
    Spark compares with nothing (struct, array, map, variant); for a number column anything but
    a number (or a string of one) within a long's range; for a string column anything but a
    string; for a boolean, date or timestamp column a value of another Python type than its own
    or a string (whose cast ``_check_cast_filter_strings`` checks)."""
    data_type = field.dataType
    if isinstance(data_type, StructType | ArrayType | MapType | VariantType):
        expected = f"a column of a primitive type ({field.name!r} is {data_type.simpleString()})"
        raise _invalid_filter(predicate, expected)
    for value in predicate.values:
        if isinstance(data_type, NumericType) and not _number_value(value):
            raise _invalid_filter(
                predicate, f"a number for column {field.name!r} of type {data_type.simpleString()}"
            )
        if isinstance(data_type, StringType) and not isinstance(value, str):
            raise _invalid_filter(
                predicate,
                f"a string for column {field.name!r} of type string (the command line's "
                f"--filter takes a quoted value as a string: {field.name} = '5')",
            )
        accepted = _CAST_FROM_STRING.get(type(data_type))
        if accepted is not None and not isinstance(value, (str, *accepted[0])):
            raise _invalid_filter(predicate, _cast_expected(field, accepted[1]))


#: Column types whose filter values are either of the Python types given or a string Spark
#: casts to the column's type; with what such a value is, for the error.
_CAST_FROM_STRING: dict[type[DataType], tuple[tuple[type, ...], str]] = {
    BooleanType: ((bool,), "True or False"),
    DateType: ((dt.date,), "a datetime.date"),
    TimestampType: ((dt.date,), "a datetime.datetime"),
    TimestampNTZType: ((dt.date,), "a datetime.datetime"),
}


def _cast_expected(field: StructField, value_kind: str) -> str:
    type_name = field.dataType.simpleString()
    return (
        f"{value_kind}, or a string Spark casts to a {type_name}, for column {field.name!r} of "
        f"type {type_name}"
    )


def _check_cast_filter_strings(
    spark: SparkSession, predicates: Sequence[Predicate], paths: dict[str, FieldPath]
) -> None:
    """A string compared with a boolean, date or timestamp column is cast to its type by Spark
    when the rows are read, where a string it cannot cast fails the read (with ANSI on) or
    silently matches nothing: each is cast now, in the session's time zone, with one request
    (no Spark job) when there is any, and one Spark cannot cast is
    ``DELTA_CONNECT_INVALID_ARGUMENT``."""
    checks = [
        (predicate, paths[predicate.column][-1], value)
        for predicate in predicates
        if type(paths[predicate.column][-1].dataType) in _CAST_FROM_STRING
        for value in predicate.values
        if isinstance(value, str)
    ]
    if not checks:
        return
    casts = [
        F.lit(value).try_cast(field.dataType).isNotNull().alias(f"c{index}")
        for index, (_, field, value) in enumerate(checks)
    ]
    row = collect(spark.sql("SELECT 1").select(*casts), reads_files=False)[0]
    for index, (predicate, field, _) in enumerate(checks):
        if not row[f"c{index}"]:
            accepted = _CAST_FROM_STRING[type(field.dataType)]
            raise _invalid_filter(predicate, _cast_expected(field, accepted[1]))


#: A long's range: an integer beyond it is no value of any number column Spark compares.
_LONG_RANGE = range(-(1 << 63), 1 << 63)


def _number_value(value: object) -> bool:
    """Whether a filter value can be compared with a number column."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value in _LONG_RANGE
    if isinstance(value, str):
        return _is_number(value)
    return isinstance(value, float | Decimal)


def _invalid_filter(predicate: Predicate, expected: str) -> InvalidArgumentError:
    return InvalidArgumentError(
        function="to_df",
        argument="filter",
        value=arguments.shown((predicate.column, predicate.op, predicate.value)),
        expected=expected,
    )


def _is_number(text: str) -> bool:
    try:
        Decimal(text.strip())
    except InvalidOperation:
        return False
    return True


def _file_may_match(
    filter: Disjunction,
    partition_values: dict[str, str | None],
    stats: dict[str, Any] | None,
    paths: dict[str, FieldPath],
    partition_columns: set[str],
) -> bool:
    """Whether a row of the file may pass every predicate of some conjunction of ``filter``."""

    def may_match(predicate: Predicate) -> bool:
        path = paths[predicate.column]
        type_name = _type_name(path[-1])
        if len(path) == 1 and path[0].name in partition_columns:
            raw = partition_values.get(physical_name(path[0]))
            return partition_may_match(predicate, raw, type_name)
        if stats is None:
            return True
        physical_path = [physical_name(field) for field in path]
        return stats_may_match(predicate, column_stats(stats, physical_path), type_name)

    return any(all(map(may_match, conjunction)) for conjunction in filter)


def _check_columns(snapshot: SnapshotView, names: Sequence[str], what: str) -> None:
    known = {f.name for f in snapshot.schema.fields}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise arguments.invalid_value(
            "to_df",
            what,
            unknown,
            f"names of the table's top-level columns {sorted(known)} (names are case-sensitive)",
        )


def _parse_stats(text: str | None) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        parsed = json.loads(text, parse_float=Decimal)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def select_files(snapshot: SnapshotView, filter: Filter | None = None) -> list[DataFile]:
    """The live data files a read of ``snapshot`` with ``filter`` scans (one Spark job).

    Files are dropped by partition pruning (filters on partition columns) and data skipping
    (other columns, from ``stats``); see :mod:`delta_connect_py.protocol.file_filters`.
    """
    disjunction = parse_filter(filter)
    return _selected_files(
        snapshot, disjunction, _filter_paths(snapshot, predicates_of(disjunction))
    )


def _selected_files(
    snapshot: SnapshotView, disjunction: Disjunction, paths: dict[str, FieldPath]
) -> list[DataFile]:
    """``select_files`` for a parsed filter whose columns are resolved to ``paths``."""
    partition_columns = set(snapshot.partition_columns)
    needs_stats = any(
        len(path) > 1 or path[0].name not in partition_columns for path in paths.values()
    )
    columns = ["path", "partitionValues", "deletionVector", "size"]
    frame = snapshot.all_files().select(*columns, *(["stats"] if needs_stats else []))
    root = snapshot.table.table_root
    chosen = []
    for row in collect(frame):
        partition_values = dict(row["partitionValues"] or {})
        stats = _parse_stats(row["stats"]) if needs_stats else None
        if disjunction and not _file_may_match(
            disjunction, partition_values, stats, paths, partition_columns
        ):
            continue
        chosen.append(
            DataFile(
                path=row["path"],
                location=data_file_location(row["path"], root),
                partition_values=partition_values,
                deletion_vector=_descriptor(row["deletionVector"]),
                size=row["size"],
            )
        )
    return sorted(chosen, key=lambda f: f.path)


# ---------------------------------------------------------------------------------------------
# Reading


def _read_parquet(snapshot: SnapshotView, files: Sequence[DataFile]) -> DataFrame:
    """The data columns (physical names) of ``files`` plus file key and row index."""
    spark = snapshot.spark
    read_schema = parquet_read_schema(
        spark, _data_fields(snapshot), snapshot.metadata.configuration
    )
    frame = spark.read.schema(read_schema).parquet(*[escape_glob(f.location) for f in files])
    frame = with_data_files_found(frame, snapshot.table.table_root, [f.location for f in files])
    return frame.select(
        "*",
        file_key_column(F.col("_metadata.file_path")).alias(FILE_KEY),
        F.col("_metadata.row_index").alias(ROW_INDEX),
    )


def with_data_files_found(frame: DataFrame, table_root: str, locations: Sequence[str]) -> DataFrame:
    """``frame``, a parquet read of the data files at ``locations``, analyzed now (one
    analysis request): a file the log names that does not exist is
    ``DELTA_FILE_NOT_FOUND_DETAILED`` naming it and the table, here, rather than Spark's
    ``PATH_NOT_FOUND`` at the caller's first action on the lazy result."""
    try:
        frame.schema  # noqa: B018 - analysis checks every path exists
    except Exception as exc:
        raise caused_by(_missing_file_error(exc, table_root, locations), exc) from None
    return frame


def _missing_file_error(exc: Exception, table_root: str, locations: Sequence[str]) -> Exception:
    text = str(exc)
    if "PATH_NOT_FOUND" not in text:
        return translate_server_error(exc)
    match = MISSING_PATH.search(text)
    missing = match.group(1) if match else None
    by_key = {file_key(location): location for location in locations}
    if missing is not None:
        missing = by_key.get(file_key(unquote(missing)), missing)
    return FileReferencedNotFoundError(
        path=missing or "(one of the table's data files)", table=table_root
    )


def _with_partition_values(
    snapshot: SnapshotView, data: DataFrame, files: Sequence[DataFile]
) -> DataFrame:
    """``data`` plus one string column per partition column (``_dcp_p<i>``), joined by file."""
    fields = _partition_fields(snapshot)
    if not fields:
        return data
    check_partition_values(
        snapshot.spark,
        fields,
        [(f.path, f.partition_values) for f in files],
        snapshot.table.table_root,
        snapshot.version,
    )
    names = [f"_dcp_p{i}" for i in range(len(fields))]
    schema = StructType(
        [StructField(FILE_KEY, StringType(), False)]
        + [StructField(name, StringType(), True) for name in names]
    )
    rows = [
        (f.key, *[f.partition_values.get(physical_name(field)) for field in fields]) for f in files
    ]
    partitions = snapshot.spark.createDataFrame(rows, schema=schema)
    return data.join(F.broadcast(partitions), on=FILE_KEY, how="inner")


def check_partition_values(
    spark: SparkSession,
    fields: Sequence[StructField],
    files: Sequence[tuple[str, Mapping[str, str | None]]],
    table_root: str,
    version: int,
) -> None:
    """``DELTA_FAILED_CAST_PARTITION_VALUE`` when a partition value of ``files`` (data file,
    ``partitionValues``) cannot be read as its column's type (``fields``: the partition columns,
    physical names), where the rows' read would fail on it with a bare Spark cast error. One
    request over the distinct values that need a cast, as local rows (no job); none when every
    partition column is a string."""
    typed = [
        (index, field, logical_type(field.dataType))
        for index, field in enumerate(fields)
        if not isinstance(logical_type(field.dataType), StringType)
    ]
    values = sorted(
        {
            (index, value)
            for index, field, _ in typed
            for _, partition in files
            if (value := partition.get(physical_name(field))) not in (None, "")
        }
    )
    if not values:
        return
    rows = spark.createDataFrame(values, schema="i int, v string")
    failed = functools.reduce(
        operator.or_,
        [
            (F.col("i") == index) & F.col("v").try_cast(target).isNull()
            for index, _, target in typed
        ],
    )
    found = collect(rows.where(failed).limit(1))
    if not found:
        return
    index, value = found[0]["i"], found[0]["v"]
    _, field, target = next(entry for entry in typed if entry[0] == index)
    file = next(path for path, partition in files if partition.get(physical_name(field)) == value)
    raise FailedCastPartitionValueError(
        value=value,
        data_type=target.simpleString(),
        column=field.name,
        file=file,
        path=table_root,
        version=version,
    )


def _partition_column(index: int, field: StructField) -> Column:
    raw = F.col(f"_dcp_p{index}")
    value = F.when(raw == F.lit(""), F.lit(None)).otherwise(raw)
    return value.cast(logical_type(field.dataType)).alias(field.name)


def _without_deleted_rows(
    snapshot: SnapshotView, data: DataFrame, files: Sequence[DataFile]
) -> DataFrame:
    """``data`` minus the rows deletion vectors remove (decoded in a server worker)."""
    root = snapshot.table.table_root
    rows = [
        descriptor_row(f.key, f.deletion_vector, root, f.path)
        for f in files
        if f.deletion_vector is not None
    ]
    if not rows:
        return data
    deleted = decoded_deleted_rows(snapshot.spark, rows, root)
    deleted = deleted.select(F.col("file_key").alias(FILE_KEY), F.col("row_index").alias(ROW_INDEX))
    return data.join(deleted, on=[FILE_KEY, ROW_INDEX], how="left_anti")


def _output_columns(snapshot: SnapshotView) -> list[Column]:
    partition_index = {name: i for i, name in enumerate(snapshot.partition_columns)}
    columns = []
    for field in snapshot.schema.fields:
        if field.name in partition_index:
            columns.append(_partition_column(partition_index[field.name], field))
        else:
            target = logical_type(field.dataType)
            columns.append(F.col(f"`{physical_name(field)}`").cast(target).alias(field.name))
    return columns


def predicate_column(predicate: Predicate, path: FieldPath) -> Column:
    """The Spark condition of one predicate over the logical columns; ``path`` is the fields
    its column names (``resolve_filter_column``)."""
    column = F.col(f"`{path[0].name}`")
    for field in path[1:]:
        column = column.getField(field.name)
    op, value = predicate.op, predicate.value
    if op == "in":
        return column.isin(list(value))
    if op == "not in":
        return ~column.isin(list(value))
    literal = F.lit(value)
    conditions = {
        "=": column == literal,
        "!=": column != literal,
        "<": column < literal,
        "<=": column <= literal,
        ">": column > literal,
        ">=": column >= literal,
    }
    return conditions[op]


def filter_column(filter: Disjunction, paths: dict[str, FieldPath]) -> Column:
    """The Spark condition of a non-empty filter: OR over its conjunctions' ANDs."""
    conjunctions = [
        functools.reduce(operator.and_, [predicate_column(p, paths[p.column]) for p in conjunction])
        for conjunction in filter
    ]
    return functools.reduce(operator.or_, conjunctions)


def snapshot_to_df(
    snapshot: SnapshotView, columns: list[str] | None = None, filter: Filter | None = None
) -> DataFrame:
    """The table's rows at ``snapshot`` (lazy, apart from the file listing and DV decoding).

    ``columns``: top-level column names to return (default: all, in schema order).
    ``filter``: None, a ``(column, op, value)`` tuple or a list of them, ANDed, or a list of
    such lists, ORed (pyarrow's form); ``op`` is one of ``=``, ``!=``, ``<``, ``<=``, ``>``,
    ``>=``, ``in``, ``not in`` (e.g. ``[("year", "=", 2024), ("id", ">", 10)]``, or
    ``[[("year", "=", 2024)], [("id", "<", 0)]]``); ``column`` is a column's name or a dotted
    path to a nested struct field (``"address.city"``; a top-level name containing dots wins).
    Files are pruned with it (nested fields by their stats too), rows filtered by it.
    A malformed ``filter`` or ``columns`` is ``DELTA_CONNECT_INVALID_ARGUMENT``, before any job.
    """
    require_columns(snapshot.schema, snapshot.table.table_root, snapshot.version)
    _partition_fields(snapshot)  # every partition column in the schema, before any job
    disjunction = parse_filter(filter, "to_df")
    columns = arguments.columns("to_df", columns)
    if columns is not None:
        _check_columns(snapshot, columns, "columns")
    paths = _filter_paths(snapshot, predicates_of(disjunction))
    files = _selected_files(snapshot, disjunction, paths)
    if not files:
        frame = snapshot.spark.createDataFrame([], schema=logical_schema(snapshot))
    else:
        data = _read_parquet(snapshot, files)
        data = _with_partition_values(snapshot, data, files)
        data = _without_deleted_rows(snapshot, data, files)
        frame = data.select(*_output_columns(snapshot))
    if disjunction:
        frame = frame.where(filter_column(disjunction, paths))
    if columns is not None:
        frame = frame.select(*[F.col(f"`{name}`") for name in columns])
    return frame
