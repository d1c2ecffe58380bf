"""Parquet files rewritten with their columns renamed and their field ids kept: what an id-mode
table's older files look like after a rename in a table converted from Iceberg. Column mapping
mode ``id`` must still read them (the protocol resolves its columns by parquet field id)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

FIELD_ID_KEY = b"PARQUET:field_id"


def _renamed_field(field: pa.Field) -> pa.Field:
    """``field`` named ``old-<name>`` when it has a field id (kept), its type renamed likewise."""
    has_id = FIELD_ID_KEY in (field.metadata or {})
    name = f"old-{field.name}" if has_id else field.name
    return pa.field(name, _struct_fields_renamed(field.type), field.nullable, field.metadata)


def _struct_fields_renamed(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every struct field that has a field id, at any depth, renamed (see
    ``_renamed_field``). List items and map entries keep their structural names."""
    if pa.types.is_struct(data_type):
        return pa.struct([_renamed_field(data_type.field(i)) for i in range(data_type.num_fields)])
    if pa.types.is_map(data_type):
        item = data_type.item_field
        return pa.map_(
            data_type.key_field.with_type(_struct_fields_renamed(data_type.key_type)),
            item.with_type(_struct_fields_renamed(item.type)),
        )
    if pa.types.is_list(data_type):
        item = data_type.value_field
        return pa.list_(item.with_type(_struct_fields_renamed(item.type)))
    return data_type


def rewrite_with_renamed_columns(path: Path) -> set[str]:
    """Rewrite the parquet file ``path`` with every column and struct field that has a field id
    renamed (the ids kept, Spark's schema metadata dropped); returns the top-level names it
    renamed."""
    data = pq.read_table(path)
    as_struct = pa.struct(list(data.schema))
    renamed = _struct_fields_renamed(as_struct)
    columns = [
        column.combine_chunks().view(renamed.field(i).type) for i, column in enumerate(data.columns)
    ]
    pq.write_table(pa.Table.from_arrays(columns, schema=pa.schema(list(renamed))), path)
    return {f.name for f in data.schema if FIELD_ID_KEY in (f.metadata or {})}
