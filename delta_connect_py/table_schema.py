"""The table schema: ``metaData.schemaString`` checked and parsed into a Spark ``StructType``.

Responsibility: one check and one parse for every reader (snapshots and the change data feed),
so that a schema string that is not a schema (not JSON; a field without a name or a type; a
struct without fields: a damaged or hand-edited log) is ``DELTA_CORRUPT_LOG_FILE`` naming the
version and where the metadata came from, never a raw ``KeyError`` or ``JSONDecodeError`` and
never a state served for a table no reader could query (delta-rs refuses such a table on load).

Invariants: a snapshot checks its schema's shape when it is built (a walk of a few kilobytes of
JSON on the client, no job); type names are not judged there (a type this client's pyspark does
not know may be one the server knows; reader features gate new types), only when the schema is
parsed. A metaData without ``schemaString`` (delta-spark's own test tables write some) passes
the check and has the empty schema, as delta-spark gives it (its ``Metadata.schema``): its state,
history and checkpoints are read and written; its rows are ``DELTA_READ_TABLE_WITHOUT_COLUMNS``
(``require_columns``), as delta-spark refuses to read them. Without column mapping (mode
``none``), the parsed schema carries no column mapping field metadata: names are physical names.
A partition column the schema does not have leaves the state, files and history readable, and
its rows and checkpoints ``DELTA_PARTITION_COLUMN_NOT_FOUND`` (``partition_fields``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pyspark.sql.types import ArrayType, DataType, MapType, StructField, StructType

from delta_connect_py.errors import (
    CorruptLogFileError,
    PartitionColumnNotFoundError,
    ReadTableWithoutColumnsError,
)
from delta_connect_py.protocol.properties import column_mapping_mode

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from delta_connect_py.protocol.actions import Metadata


def parsed_schema(metadata: Metadata, source: str, log_dir: str, version: int | None) -> StructType:
    """``metadata``'s schema (empty without a ``schemaString``); ``DELTA_CORRUPT_LOG_FILE``
    (``source``: the file the metadata was read from, or the log) when its ``schemaString`` is
    not a schema this client can parse."""
    if not metadata.schema_string:
        return StructType([])
    try:
        schema = StructType.fromJson(metadata.schema_json)
    except Exception as error:  # json, KeyError, TypeError, PySparkValueError: all "not one"
        raise _not_a_schema(source, log_dir, version, f"{type(error).__name__}: {error}") from None
    if _COLUMN_MAPPING_PREFIX in metadata.schema_string and not _maps_columns(metadata):
        return without_column_mapping(schema)  # type: ignore[return-value]
    return schema


#: The field metadata keys of column mapping (``physicalName``, ``id``, ``nested.ids``).
_COLUMN_MAPPING_PREFIX = "delta.columnMapping."


def _maps_columns(metadata: Metadata) -> bool:
    """Whether ``metadata`` turns column mapping on (``id`` or ``name`` mode; a mode that is
    neither counts as on, for the snapshot's checks to judge)."""
    try:
        return column_mapping_mode(metadata.configuration) != "none"
    except ValueError:
        return True


def without_column_mapping(data_type: DataType) -> DataType:
    """``data_type`` with no field's column mapping metadata: without column mapping a column's
    physical name is its name (delta-spark reads so, whatever the schema's field metadata
    says, e.g. after the mode was taken out of the configuration)."""

    def other_metadata(field: StructField) -> dict[str, Any]:
        metadata = field.metadata or {}
        return {k: v for k, v in metadata.items() if not k.startswith(_COLUMN_MAPPING_PREFIX)}

    return renamed_type(data_type, lambda field: field.name, other_metadata)


def no_metadata(field: StructField) -> dict[str, Any]:
    return {}


def renamed_type(
    data_type: DataType,
    name_of: Callable[[StructField], str],
    metadata_of: Callable[[StructField], dict[str, Any]] = no_metadata,
) -> DataType:
    """``data_type`` with every nested struct field named by ``name_of`` and given the
    metadata ``metadata_of`` returns (by default none)."""
    if isinstance(data_type, StructType):
        return StructType(
            [
                StructField(
                    name_of(f),
                    renamed_type(f.dataType, name_of, metadata_of),
                    f.nullable,
                    metadata_of(f),
                )
                for f in data_type.fields
            ]
        )
    if isinstance(data_type, ArrayType):
        element = renamed_type(data_type.elementType, name_of, metadata_of)
        return ArrayType(element, data_type.containsNull)
    if isinstance(data_type, MapType):
        return MapType(
            renamed_type(data_type.keyType, name_of, metadata_of),
            renamed_type(data_type.valueType, name_of, metadata_of),
            data_type.valueContainsNull,
        )
    return data_type


def require_columns(schema: StructType, table: str, version: int) -> None:
    """``DELTA_READ_TABLE_WITHOUT_COLUMNS`` when ``schema`` (of ``table`` at ``version``) has
    no column: there are no rows to read (delta-spark refuses likewise)."""
    if not schema.fields:
        raise ReadTableWithoutColumnsError(table=table, version=version)


def partition_fields(
    schema: StructType,
    partition_columns: Sequence[str],
    table: str,
    version: int,
    *,
    ignore_case: bool = False,
) -> list[StructField]:
    """The fields of ``schema`` (of ``table`` at ``version``) that ``partition_columns`` name,
    by exact name as delta-spark's reads match them (``ignore_case``: as a checkpoint's typed
    partition values match them); ``DELTA_PARTITION_COLUMN_NOT_FOUND`` for a name the schema
    does not have (delta-spark's reads and checkpoints fail on it too)."""

    def key(name: str) -> str:
        return name.lower() if ignore_case else name

    by_name = {key(field.name): field for field in schema.fields}
    for column in partition_columns:
        if key(column) not in by_name:
            raise PartitionColumnNotFoundError(
                column=column,
                schema=", ".join(schema.fieldNames())[:500],
                table=table,
                version=version,
            )
    return [by_name[key(column)] for column in partition_columns]


def check_schema(metadata: Metadata, source: str, log_dir: str, version: int) -> None:
    """``DELTA_CORRUPT_LOG_FILE`` when ``metadata`` has a schema string without a schema's
    shape (see the module docstring)."""
    if not metadata.schema_string:
        return
    try:
        schema = json.loads(metadata.schema_string)
    except ValueError as error:
        raise _not_a_schema(source, log_dir, version, f"not JSON: {error}") from None
    problem = _struct_problem(schema)
    if problem is not None:
        raise _not_a_schema(source, log_dir, version, problem)


def _not_a_schema(source: str, log_dir: str, version: int | None, why: str) -> CorruptLogFileError:
    at_version = f"version {version}: " if version is not None else ""
    return CorruptLogFileError(
        file=source,
        path=log_dir,
        reason=f"{at_version}the table schema (metaData.schemaString) is not a valid schema "
        f"({why})",
    )


#: The element types each container type must name.
_NESTED_TYPE_KEYS = {"array": ("elementType",), "map": ("keyType", "valueType")}


def _struct_problem(struct: Any) -> str | None:
    if not isinstance(struct, dict) or struct.get("type") != "struct":
        return "a struct type is expected"
    fields = struct.get("fields")
    if not isinstance(fields, list):
        return "a struct has no list of fields"
    for field in fields:
        if not isinstance(field, dict) or not isinstance(field.get("name"), str):
            return "a field has no name"
        if "type" not in field:
            return f"the field {field['name']!r} has no type"
        problem = _type_problem(field["type"])
        if problem is not None:
            return problem
    return None


def _type_problem(data_type: Any) -> str | None:
    if isinstance(data_type, str):
        return None
    if not isinstance(data_type, dict):
        return f"a type is a JSON {type(data_type).__name__}"
    kind = data_type.get("type")
    if kind == "struct":
        return _struct_problem(data_type)
    nested = _NESTED_TYPE_KEYS.get(str(kind))
    if nested is None:
        return None  # a type object this check does not know: the parse judges it
    for key in nested:
        if key not in data_type:
            return f"a {kind} type has no {key}"
        problem = _type_problem(data_type[key])
        if problem is not None:
            return problem
    return None
