"""A parquet checkpoint's protocol and metaData actions, read with pyarrow in the listing's task.

Responsibility: :func:`checkpoint_pm` reads the ``protocol`` and ``metaData`` columns of a
local parquet checkpoint's top-level files (classic, multi-part, or a V2 checkpoint's top-level
file: sidecars hold file actions only) and returns each action found as one JSON line, which
the listing's query then parses as it parses commits' P&M lines, with the schema Spark would
infer for the files (``worker.parquet_schema``). A snapshot of a checkpointed local log so takes
its protocol and metadata from the listing's job, without a Spark read of its own, and reads the
checkpoint without Spark's job inferring its schema. Row groups whose statistics say neither
column has a value there are not read.

Invariants: lines are returned only where the client's Spark read of the same files
(``plans.protocol_metadata``) would find the same actions if it reads them: every footer
readable, the parts' schemas unifiable, ``add`` and ``remove`` each with a ``path`` field, every
``protocol`` and ``metaData`` field present of the protocol's type (integer fields of any
integer width), at most one protocol and one metaData action in all, no repeated map key, text
valid UTF-8. Anything else returns None, and the client's own read then finds (and reports)
what it finds. Spark may still refuse a damaged file pyarrow reads (a footer field pyarrow does
not use): the snapshot then reads around it when its state first reads the checkpoint
(``Snapshot``). Every file opened is closed; nothing is written.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from delta_connect_py.protocol.actions import METADATA, PROTOCOL, REQUIRED_FIELD_PATHS
from delta_connect_py.worker.parquet_schema import spark_schema_json

#: The checkpoint columns read, their protocol types, and the field whose value marks a row
#: as holding that action (as the client's read tells them).
_ACTIONS: dict[str, tuple[pa.StructType, str]] = {
    "protocol": (PROTOCOL, "minReaderVersion"),
    "metaData": (METADATA, "id"),
}


@dataclass(frozen=True)
class CheckpointPm:
    """What the listing's task takes from a checkpoint's footers and P&M rows."""

    #: The protocol and metaData actions as JSON lines (``{"protocol": {...}}``), in file
    #: order.
    lines: list[str]
    #: The schema Spark's parquet source would infer for the files, as a ``StructType``'s JSON
    #: (``worker.parquet_schema``); None when only Spark can tell.
    spark_schema: str | None


def checkpoint_pm(local_paths: Sequence[str]) -> CheckpointPm | None:
    """The P&M and the Spark schema of the checkpoint files ``local_paths``; None when the
    P&M cannot be taken as the client's Spark read would take them (see the module)."""
    try:
        with contextlib.ExitStack() as opened:
            files = [opened.enter_context(pq.ParquetFile(path)) for path in local_paths]
            lines = _pm_lines(files)
            return None if lines is None else CheckpointPm(lines, spark_schema_json(files))
    except (OSError, ValueError, TypeError, pa.ArrowException):
        return None


def _pm_lines(files: Sequence[pq.ParquetFile]) -> list[str] | None:
    """``checkpoint_pm``'s lines of the opened ``files`` (raises what pyarrow raises)."""
    schemas = [file.schema_arrow for file in files]
    pa.unify_schemas(schemas)
    if not all(_conforms(schema) for schema in schemas):
        return None
    found = [action for file in files for action in _file_actions(file)]
    lines = [json.dumps({name: _json_value(value, kind)}) for name, kind, value in found]
    names = [name for name, _, _ in found]
    if any(names.count(name) > 1 for name in _ACTIONS):
        return None
    return lines


def _conforms(schema: pa.Schema) -> bool:
    """Whether the file's columns are what the client reads without a cast that could fail,
    and what its footer check lets through (``plans.loading``)."""
    for name in ("add", "remove"):
        if name in schema.names and not pa.types.is_struct(schema.field(name).type):
            return False
    if _lacks_a_required_field(schema):
        return False
    for name, (expected, _) in _ACTIONS.items():
        if name in schema.names and not _same_type(schema.field(name).type, expected):
            return False
    return True


def _lacks_a_required_field(schema: pa.Schema) -> bool:
    """Whether an action column (or its deletion vector) lacks a field the protocol requires
    (``REQUIRED_FIELD_PATHS``)."""
    for action, carrier, name in REQUIRED_FIELD_PATHS:
        holder = schema.field(action).type if action in schema.names else None
        if carrier is not None:
            holder = _struct_field_type(holder, carrier)
        if holder is not None and pa.types.is_struct(holder) and holder.get_field_index(name) < 0:
            return True
    return False


def _struct_field_type(data_type: pa.DataType | None, name: str) -> pa.DataType | None:
    """The type of field ``name`` of a struct ``data_type``; None without one."""
    if data_type is None or not pa.types.is_struct(data_type):
        return None
    index = data_type.get_field_index(name)
    return None if index < 0 else data_type.field(index).type


def _same_type(actual: pa.DataType, expected: pa.DataType) -> bool:
    """``actual`` holds ``expected``'s values as written: integers of any width; a struct's
    fields of the expected types where named alike (absent ones read as null, others are
    dropped, as the client's read conforms them)."""
    if pa.types.is_integer(expected):
        return bool(pa.types.is_integer(actual))
    if pa.types.is_struct(expected):
        if not pa.types.is_struct(actual):
            return False
        wanted = {field.name: field.type for field in expected}
        return all(
            _same_type(field.type, wanted[field.name]) for field in actual if field.name in wanted
        )
    if pa.types.is_map(expected):
        return (
            pa.types.is_map(actual)
            and _same_type(actual.key_type, expected.key_type)
            and _same_type(actual.item_type, expected.item_type)
        )
    if pa.types.is_list(expected):
        return pa.types.is_list(actual) and _same_type(actual.value_type, expected.value_type)
    return bool(actual == expected)


def _file_actions(file: pq.ParquetFile) -> list[tuple[str, pa.DataType, dict[str, Any]]]:
    """The (column, its protocol type, action) of one file's actions, in row order within
    each column."""
    columns = [name for name in _ACTIONS if name in file.schema_arrow.names]
    if not columns:
        return []
    found = []
    for index in range(file.num_row_groups):
        if _without_actions(file.metadata.row_group(index), columns):
            continue
        table = file.read_row_group(index, columns=columns)
        for name in columns:
            marker = _ACTIONS[name][1]
            for value in table.column(name).to_pylist():
                if value is not None and value.get(marker) is not None:
                    found.append((name, _ACTIONS[name][0], value))
    return found


def _without_actions(row_group: pq.RowGroupMetaData, columns: Sequence[str]) -> bool:
    """Whether the row group's statistics show every marker field of ``columns`` null."""
    markers = {f"{name}.{_ACTIONS[name][1]}" for name in columns}
    seen = set()
    for index in range(row_group.num_columns):
        chunk = row_group.column(index)
        if chunk.path_in_schema not in markers:
            continue
        stats = chunk.statistics
        if stats is None or not stats.has_null_count or stats.null_count != row_group.num_rows:
            return False
        seen.add(chunk.path_in_schema)
    return seen == markers


def _json_value(value: Any, arrow_type: pa.DataType) -> Any:
    """An Arrow value read as ``arrow_type`` as JSON: a struct's fields of that type only, maps
    (key-value pairs) as objects, keys unique."""
    if value is None:
        return None
    if pa.types.is_struct(arrow_type):
        return {field.name: _json_value(value.get(field.name), field.type) for field in arrow_type}
    if pa.types.is_map(arrow_type):
        keys = [key for key, _ in value]
        if len(set(keys)) != len(keys):
            raise ValueError("a map with a repeated key")
        return {key: _json_value(item, arrow_type.item_type) for key, item in value}
    if pa.types.is_list(arrow_type):
        return [_json_value(item, arrow_type.value_type) for item in value]
    return value
