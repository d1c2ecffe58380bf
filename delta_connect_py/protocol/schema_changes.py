"""Which schema changes the change data feed can read across (delta-spark's rules).

Responsibility, over ``metaData`` actions (:class:`~delta_connect_py.protocol.actions.Metadata`):
* :func:`batch_cdf_read_compatible`: delta-spark's ``checkBatchCdfReadSchemaIncompatibility``
  (``CDCReaderBase``). Change data recorded under ``metadata`` (version ``m``) can be read with
  the read schema (version ``r``) iff there is no column-mapping rename or drop and the same
  partition columns (``DeltaColumnMapping.hasNoColumnMappingSchemaChanges``), and the older of
  the two schemas is readable with the newer (``SchemaUtils.isReadCompatible``: columns only
  added, same types, nullability not tightened); which one is "older" follows ``m <= r``;
* :func:`stream_backfill_readable`: delta-spark's ``checkSchemaChangesWhenNoSchemaTracking``
  for a version before a stream's read version ("backfilling"): its data files can be read with
  the stream's read schema iff the partition columns are the same and its schema is readable
  as the read schema, nullability not tightened, types widened only where the table supports
  type widening (``TypeWidening.isTypeChangeSupported``, :func:`is_type_widening`);
* :func:`changes_stream_metadata`: delta-spark's
  ``hasMetadataOrProtocolChangeComparedToStreamMetadata`` for a metadata action: the schema, the
  partition columns or the ``delta.*`` configuration differ. A stream puts a schema-change
  barrier (``METADATA_CHANGE_INDEX``) at such a version so that no batch spans it.

Invariants: schemas are Spark's StructType JSON (``Metadata.schema_json``). Column identity
across versions is the path of physical names (``delta.columnMapping.physicalName``, else the
name: a table upgraded to column mapping keeps its names as physical names); the type check
ignores field metadata, compares names case-sensitively (as delta-spark's default) and widens
a type only when asked to. Pure: standard library and :mod:`delta_connect_py.protocol` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from delta_connect_py.protocol import properties as props
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.properties import PHYSICAL_NAME_KEY

_NULL_TYPES = ("null", "void")

Path = tuple[str, ...]


def _kind(data_type: Any) -> str | None:
    return data_type.get("type") if isinstance(data_type, Mapping) else None


def _physical_name(field: Mapping[str, Any]) -> str:
    return str((field.get("metadata") or {}).get(PHYSICAL_NAME_KEY) or field["name"])


def _explode(data_type: Any, path: Path = ()) -> Iterator[tuple[Path, Mapping[str, Any]]]:
    """Every nested field with its physical path (``SchemaMergingUtils.explode`` over the
    physical schema): arrays add ``element``, maps ``key`` and ``value`` to the path."""
    kind = _kind(data_type)
    if kind == "struct":
        for field in data_type["fields"]:
            field_path = (*path, _physical_name(field))
            yield field_path, field
            yield from _explode(field["type"], field_path)
    elif kind == "array":
        yield from _explode(data_type["elementType"], (*path, "element"))
    elif kind == "map":
        yield from _explode(data_type["keyType"], (*path, "key"))
        yield from _explode(data_type["valueType"], (*path, "value"))


def _renamed_or_dropped(new_schema: Mapping[str, Any], old_schema: Mapping[str, Any]) -> bool:
    """``isDropColumnOperation || isRenameColumnOperation`` (both sides column-mapped)."""
    new_fields = dict(_explode(new_schema))
    for path, field in _explode(old_schema):
        match = new_fields.get(path)
        if match is None or match["name"] != field["name"]:
            return True
    return False


def has_no_column_mapping_schema_changes(new: Metadata, old: Metadata) -> bool:
    """No rename, no drop and the same partition columns from ``old`` to ``new``, where
    ``new`` is column-mapped; always true where neither is (delta-spark compares nothing then:
    partition changes of such tables are left to the other checks).

    Reading across a column-mapping downgrade (or a mode change) is never allowed; across an
    upgrade, the old schema's names count as its physical names (what the upgrade assigns).
    """
    old_mode = props.column_mapping_mode(old.configuration)
    new_mode = props.column_mapping_mode(new.configuration)
    if old_mode != "none" and new_mode != old_mode:
        return False
    if new_mode == "none":
        return True
    if tuple(new.partition_columns) != tuple(old.partition_columns):
        return False
    return not _renamed_or_dropped(new.schema_json, old.schema_json)


_INTEGRAL_SIZES = {"byte": 1, "short": 2, "integer": 4, "long": 8}
#: The decimal each integral type is stored as (``DecimalType.forType``), as (precision, scale).
_INTEGRAL_DECIMALS = {"byte": (10, 0), "short": (10, 0), "integer": (10, 0), "long": (20, 0)}
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")


def _decimal(data_type: Any) -> tuple[int, int] | None:
    match = _DECIMAL.fullmatch(data_type) if isinstance(data_type, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _decimal_wider(to: tuple[int, int], than: tuple[int, int]) -> bool:
    """``DecimalType.isWiderThan``: as many integer digits and as many fraction digits."""
    return to[0] - to[1] >= than[0] - than[1] and to[1] >= than[1]


def is_type_widening(old: Any, new: Any) -> bool:
    """``TypeWidening.isTypeChangeSupported``: data of the atomic type ``old`` can be read as
    ``new`` (types in Spark's JSON form): the same type, a wider integer, float to double, an
    integer (up to int) to double, date to ``timestamp_ntz``, a wider decimal, or an integer to
    a decimal with room for all its digits (byte, short and int as ``decimal(10,0)``, as
    delta-spark does)."""
    if old == new:
        return True
    if old in _INTEGRAL_SIZES and new in _INTEGRAL_SIZES:
        return _INTEGRAL_SIZES[old] <= _INTEGRAL_SIZES[new]
    if (old, new) in {("float", "double"), ("date", "timestamp_ntz")}:
        return True
    if old in ("byte", "short", "integer") and new == "double":
        return True
    new_decimal = _decimal(new)
    if new_decimal is None:
        return False
    old_decimal = _decimal(old) or _INTEGRAL_DECIMALS.get(old)
    return old_decimal is not None and _decimal_wider(new_decimal, old_decimal)


def is_read_compatible(
    existing: Mapping[str, Any],
    read: Mapping[str, Any],
    *,
    forbid_tighten_nullability: bool,
    widen_types: bool = False,
) -> bool:
    """``SchemaUtils.isReadCompatible``: data written with ``existing`` readable as ``read``
    (``widen_types``: delta-spark's ``TypeWideningMode.AllTypeWidening``)."""

    def nullability_ok(existing_nullable: bool, read_nullable: bool) -> bool:
        if forbid_tighten_nullability:
            return read_nullable or not existing_nullable
        return existing_nullable or not read_nullable

    def type_ok(old: Any, new: Any) -> bool:
        old_kind, new_kind = _kind(old), _kind(new)
        if old_kind == new_kind == "struct":
            return struct_ok(old, new)
        if old_kind == new_kind == "array":
            return nullability_ok(old["containsNull"], new["containsNull"]) and type_ok(
                old["elementType"], new["elementType"]
            )
        if old_kind == new_kind == "map":
            return (
                nullability_ok(old["valueContainsNull"], new["valueContainsNull"])
                and type_ok(old["keyType"], new["keyType"])
                and type_ok(old["valueType"], new["valueType"])
            )
        if old in _NULL_TYPES:
            return True
        if old_kind is not None or new_kind is not None:
            return False
        return bool(old == new) or (widen_types and is_type_widening(old, new))

    def struct_ok(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
        # A metaData without schemaString has the empty schema ({}: no fields).
        old_list, new_list = old.get("fields", []), new.get("fields", [])
        old_fields = {f["name"].lower(): f for f in old_list}
        new_names = {f["name"].lower() for f in new_list}
        if len(old_fields) != len(old_list) or len(new_names) != len(new_list):
            return False  # duplicate names (delta-spark raises); never readable
        if not set(old_fields) <= new_names:
            return False  # a column was dropped
        for field in new_list:
            before = old_fields.get(field["name"].lower())
            if before is not None and not (
                before["name"] == field["name"]
                and nullability_ok(bool(before["nullable"]), bool(field["nullable"]))
                and type_ok(before["type"], field["type"])
            ):
                return False
        return True

    return struct_ok(existing, read)


def batch_cdf_read_compatible(
    read: Metadata, read_version: int, metadata: Metadata, metadata_version: int
) -> bool:
    """Whether a batch CDF read with ``read``'s schema may cover ``metadata``'s version."""
    if metadata_version <= read_version:
        return has_no_column_mapping_schema_changes(read, metadata) and is_read_compatible(
            metadata.schema_json, read.schema_json, forbid_tighten_nullability=True
        )
    return has_no_column_mapping_schema_changes(metadata, read) and is_read_compatible(
        read.schema_json, metadata.schema_json, forbid_tighten_nullability=False
    )


def stream_backfill_readable(read: Metadata, metadata: Metadata, *, widen_types: bool) -> bool:
    """Whether a stream reading with ``read`` may read the files of an earlier version whose
    metadata is ``metadata`` (``widen_types``: the table supports type widening)."""
    return tuple(read.partition_columns) == tuple(metadata.partition_columns) and (
        is_read_compatible(
            metadata.schema_json,
            read.schema_json,
            forbid_tighten_nullability=True,
            widen_types=widen_types,
        )
    )


def _delta_configuration(metadata: Metadata) -> dict[str, str]:
    return {k: v for k, v in metadata.configuration.items() if k.startswith("delta.")}


def changes_stream_metadata(new: Metadata, current: Metadata) -> bool:
    """Whether ``new`` changes what a stream reading with ``current`` would read."""
    return (
        new.schema_json != current.schema_json
        or tuple(new.partition_columns) != tuple(current.partition_columns)
        or _delta_configuration(new) != _delta_configuration(current)
    )
