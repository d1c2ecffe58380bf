"""Typed statistics and partition values for checkpoints (``delta.checkpoint.writeStatsAsStruct``).

Responsibility: the Spark types and columns of ``add.stats_parsed`` and
``add.partitionValues_parsed`` as delta-spark writes them (notes 1.4 and 2.5):

* ``stats_parsed`` is ``from_json(add.stats, statsSchema)`` where ``statsSchema`` is
  ``numRecords: long``, ``minValues`` / ``maxValues`` (the stats columns whose type is
  skipping-eligible, nested structs kept as structs), ``nullCount`` (every stats column, leaves
  as ``long``) and ``tightBounds: boolean`` when the protocol supports deletion vectors.
* The stats columns are the non-partition columns named by ``delta.dataSkippingStatsColumns``
  or else the first ``delta.dataSkippingNumIndexedCols`` leaf columns (default 32, ``-1`` all).
* ``partitionValues_parsed`` holds one field per partition column,
  ``cast(partitionValues[physicalName] as type)``.

Invariants: every name is the column's *physical* name (``delta.columnMapping.physicalName``,
else the logical name) at every nesting level, as the stats JSON and ``partitionValues`` are
keyed; every field is nullable; a struct with no eligible field is left out; the columns are
pure functions of the ``add`` column and the table's schema and configuration, so the written
checkpoint stays deterministic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from delta_connect_py.data import physical_name, physical_type

if TYPE_CHECKING:
    from pyspark.sql import Column

NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
DEFAULT_NUM_INDEXED_COLS = 32

#: delta-spark's ``SkippingEligibleDataType``: the types min/max statistics are kept for.
_MIN_MAX_TYPES = (
    ByteType,
    ShortType,
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DateType,
    TimestampType,
    TimestampNTZType,
    StringType,
    DecimalType,
)


def _split_column_list(text: str) -> list[tuple[str, ...]]:
    """``a, b.c, `d.e``` as name paths (backticks quote a name holding dots)."""
    paths: list[tuple[str, ...]] = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        parts, current, quoted = [], "", False
        for char in item:
            if char == "`":
                quoted = not quoted
            elif char == "." and not quoted:
                parts.append(current)
                current = ""
            else:
                current += char
        paths.append((*parts, current))
    return paths


def _select_named(schema: StructType, paths: Sequence[tuple[str, ...]]) -> StructType:
    """The fields of ``schema`` named by ``paths`` (logical names, case-insensitive)."""
    fields = []
    for field in schema.fields:
        matching = [p for p in paths if p and p[0].lower() == field.name.lower()]
        if not matching:
            continue
        if any(len(p) == 1 for p in matching) or not isinstance(field.dataType, StructType):
            fields.append(field)
            continue
        nested = _select_named(field.dataType, [p[1:] for p in matching])
        if nested.fields:
            fields.append(StructField(field.name, nested, True, field.metadata))
    return StructType(fields)


def _first_leaves(schema: StructType, budget: int) -> tuple[StructType, int]:
    """The first ``budget`` leaf columns of ``schema`` (depth first) and the budget left."""
    fields = []
    for field in schema.fields:
        if budget <= 0:
            break
        if isinstance(field.dataType, StructType):
            nested, budget = _first_leaves(field.dataType, budget)
            if nested.fields:
                fields.append(StructField(field.name, nested, True, field.metadata))
        else:
            fields.append(field)
            budget -= 1
    return StructType(fields), budget


def stats_columns(
    schema: StructType, partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> StructType:
    """The (logical) data columns statistics are collected for."""
    partitions = {name.lower() for name in partition_columns}
    data = StructType([f for f in schema.fields if f.name.lower() not in partitions])
    named = configuration.get(STATS_COLUMNS)
    if named is not None and named.strip():
        return _select_named(data, _split_column_list(named))
    count = int(configuration.get(NUM_INDEXED_COLS, DEFAULT_NUM_INDEXED_COLS))
    if count < 0:
        return data
    return _first_leaves(data, count)[0]


def _min_max_type(schema: StructType) -> StructType:
    fields = []
    for field in schema.fields:
        data_type: DataType | None = None
        if isinstance(field.dataType, StructType):
            nested = _min_max_type(field.dataType)
            data_type = nested if nested.fields else None
        elif isinstance(field.dataType, _MIN_MAX_TYPES):
            data_type = physical_type(field.dataType)
        if data_type is not None:
            fields.append(StructField(physical_name(field), data_type, True))
    return StructType(fields)


def _null_count_type(schema: StructType) -> StructType:
    fields = []
    for field in schema.fields:
        if isinstance(field.dataType, StructType):
            nested = _null_count_type(field.dataType)
            if nested.fields:
                fields.append(StructField(physical_name(field), nested, True))
        else:
            fields.append(StructField(physical_name(field), LongType(), True))
    return StructType(fields)


def stats_schema(
    schema: StructType,
    partition_columns: Sequence[str],
    configuration: Mapping[str, str],
    *,
    tight_bounds: bool,
) -> StructType:
    """delta-spark's ``statsSchema``: the type of ``add.stats_parsed``."""
    columns = stats_columns(schema, partition_columns, configuration)
    fields = [StructField("numRecords", LongType(), True)]
    min_max = _min_max_type(columns)
    if min_max.fields:
        fields += [
            StructField("minValues", min_max, True),
            StructField("maxValues", min_max, True),
        ]
    null_count = _null_count_type(columns)
    if null_count.fields:
        fields.append(StructField("nullCount", null_count, True))
    if tight_bounds:
        fields.append(StructField("tightBounds", BooleanType(), True))
    return StructType(fields)


def stats_parsed(stats: Column, schema: StructType) -> Column:
    """``stats`` (the JSON string) parsed as ``schema``; malformed stats become null fields."""
    return F.from_json(stats, schema)


def partition_values_parsed(
    partition_values: Column, fields: Sequence[StructField]
) -> Column | None:
    """The typed partition values struct of the partition columns' ``fields``, or None for an
    unpartitioned table."""
    if not fields:
        return None
    values = []
    for field in fields:
        key = physical_name(field)
        # try_cast: under ANSI mode a plain cast of an unparsable value fails the whole write.
        raw = partition_values.getItem(key)
        typed = raw.try_cast(physical_type(field.dataType))
        values.append(typed.alias(key))
    return F.struct(*values)
