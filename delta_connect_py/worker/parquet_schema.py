"""Spark's schema of parquet files, as Spark's own inference would give it, from pyarrow's footer.

Responsibility: :func:`spark_schema_json` turns the footers the listing's task already opened
(a checkpoint's parts) into the schema Spark's parquet source infers for them, as the JSON text
of a Spark ``StructType``. The client then states that schema for its reads of the checkpoint,
and Spark runs no job inferring it (``plans.loading.read_parquet``).

Invariants: a schema is returned only when every file's footer converts, entirely, within a
subset whose Spark type does not depend on any session setting: booleans; signed integers;
floats and doubles; dates; decimals within their physical type's digits; timestamps adjusted to
UTC in milli- or microseconds; strings; structs; 3-level lists; maps. Field
ids, unsigned integers, plain binary (``binaryAsString``), INT96 and timestamps not adjusted to
UTC (``int96AsTimestamp``, ``inferTimestampNTZ``), legacy lists, repeated fields outside a list,
and anything else return None, as do files whose schemas differ (Spark's merge would decide):
the client then asks Spark. Every field, element and value is nullable: Spark's parquet source
shows a read's schema so, whatever the footer's repetitions. Nothing is read but the footers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

#: Digits each physical type holds as a decimal (Spark refuses more).
_DECIMAL_DIGITS = {"INT32": 9, "INT64": 18, "FIXED_LEN_BYTE_ARRAY": 38, "BYTE_ARRAY": 38}
#: Spark's types of signed integer columns, by physical type and bit width.
_SIGNED_INTS = {
    ("INT32", 8): "byte",
    ("INT32", 16): "short",
    ("INT32", 32): "integer",
    ("INT64", 64): "long",
}
#: Spark's types of columns without a logical type (plain binary is left out: see the module).
_PLAIN = {
    "BOOLEAN": "boolean",
    "INT32": "integer",
    "INT64": "long",
    "FLOAT": "float",
    "DOUBLE": "double",
}
_TIMESTAMP_UNITS = ("milliseconds", "microseconds")
_FIELD_ID = b"PARQUET:field_id"


class _Unsupported(Exception):
    """A footer node outside the subset (see the module)."""


def spark_schema_json(files: Sequence[pq.ParquetFile]) -> str | None:
    """The Spark schema (``StructType`` JSON) Spark infers for ``files``, when each converts
    and all are equal; else None."""
    try:
        schemas = [_file_schema(file) for file in files]
    except _Unsupported:
        return None
    if not schemas or any(schema != schemas[0] for schema in schemas[1:]):
        return None
    return json.dumps(schemas[0], separators=(",", ":"))


class _Leaves:
    """A footer's primitive columns in schema order, taken one by one by their paths."""

    def __init__(self, schema: pq.ParquetSchema) -> None:
        self._columns = [schema.column(index) for index in range(len(schema))]
        self._taken = 0

    def next_path(self) -> str | None:
        return self._columns[self._taken].path if self._taken < len(self._columns) else None

    def take(self, path: str) -> Any:
        if self.next_path() != path:
            raise _Unsupported(f"a node other than {path}")
        self._taken += 1
        return self._columns[self._taken - 1]

    def all_taken(self) -> bool:
        return self._taken == len(self._columns)


def _file_schema(file: pq.ParquetFile) -> dict[str, Any]:
    leaves = _Leaves(file.schema)
    fields = [_field(field, field.name, leaves) for field in file.schema_arrow]
    if not leaves.all_taken():
        raise _Unsupported("columns pyarrow's schema does not show")
    return {"type": "struct", "fields": fields}


def _field(field: pa.Field, path: str, leaves: _Leaves) -> dict[str, Any]:
    if field.metadata and _FIELD_ID in field.metadata:
        raise _Unsupported("a field id")
    return {
        "name": field.name,
        "type": _type(field.type, path, leaves),
        "nullable": True,
        "metadata": {},
    }


def _type(arrow_type: pa.DataType, path: str, leaves: _Leaves) -> Any:
    """The Spark type of the footer node at ``path`` that pyarrow reads as ``arrow_type``,
    taking its primitive columns from ``leaves``."""
    if pa.types.is_struct(arrow_type):
        if arrow_type.num_fields == 0:
            raise _Unsupported("an empty struct")
        fields = [_field(child, f"{path}.{child.name}", leaves) for child in arrow_type]
        return {"type": "struct", "fields": fields}
    if pa.types.is_list(arrow_type):
        element = arrow_type.value_field
        # Only the standard 3-level form (a repeated group named "list"): Spark and pyarrow
        # read the legacy forms alike only mostly.
        element_type = _type(element.type, f"{path}.list.{element.name}", leaves)
        return {"type": "array", "elementType": element_type, "containsNull": True}
    if pa.types.is_map(arrow_type):
        entries = f"{path}.{_map_group_name(path, leaves)}"
        key, item = arrow_type.key_field, arrow_type.item_field
        return {
            "type": "map",
            "keyType": _type(key.type, f"{entries}.{key.name}", leaves),
            "valueType": _type(item.type, f"{entries}.{item.name}", leaves),
            "valueContainsNull": True,
        }
    if pa.types.is_nested(arrow_type) or pa.types.is_dictionary(arrow_type):
        raise _Unsupported(f"{arrow_type} at {path}")
    return _leaf_type(leaves.take(path))


def _map_group_name(path: str, leaves: _Leaves) -> str:
    """The name of the repeated group of the map at ``path`` (``key_value``, ``map``, ...),
    from the path of its key's first column."""
    following = leaves.next_path() or ""
    if not following.startswith(f"{path}."):
        raise _Unsupported(f"a map at {path} without columns")
    return following[len(path) + 1 :].split(".", 1)[0]


def _leaf_type(leaf: Any) -> str:
    """The Spark type of a parquet primitive column."""
    physical = leaf.physical_type
    logical = json.loads(leaf.logical_type.to_json())
    kind = logical.get("Type")
    if kind == "None":
        if physical not in _PLAIN:
            raise _Unsupported(f"{physical} without a logical type")
        return _PLAIN[physical]
    if kind == "Int":
        name = _SIGNED_INTS.get((physical, logical["bitWidth"])) if logical["isSigned"] else None
        if name is None:
            raise _Unsupported("an unsigned or odd-width integer")
        return name
    if kind == "String" and physical == "BYTE_ARRAY":
        return "string"
    if kind == "Date" and physical == "INT32":
        return "date"
    if kind == "Decimal":
        precision, scale = logical["precision"], logical["scale"]
        if not 0 < precision <= _DECIMAL_DIGITS.get(physical, 0) or not 0 <= scale <= precision:
            raise _Unsupported("a decimal Spark reads otherwise")
        return f"decimal({precision},{scale})"
    utc_timestamp = kind == "Timestamp" and logical["isAdjustedToUTC"]
    if utc_timestamp and physical == "INT64" and logical["timeUnit"] in _TIMESTAMP_UNITS:
        return "timestamp"
    raise _Unsupported(f"{physical} {kind}")
