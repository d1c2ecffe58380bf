"""``plans.spark.type_mismatch``: which checkpoint column types ``conform`` may read."""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
)

from delta_connect_py.plans.spark import type_mismatch

ADD = StructType(
    [
        StructField("path", StringType()),
        StructField("partitionValues", MapType(StringType(), StringType())),
        StructField("size", LongType()),
        StructField("dataChange", BooleanType()),
        StructField("tags", MapType(StringType(), StringType())),
    ]
)


def _add_with(name: str, data_type: object) -> StructType:
    return StructType(
        [StructField(f.name, data_type if f.name == name else f.dataType) for f in ADD.fields]
    )


def test_the_protocols_types_and_readable_kinds_match() -> None:
    assert type_mismatch(ADD, ADD, "add") is None
    assert type_mismatch(_add_with("size", IntegerType()), ADD, "add") is None
    assert type_mismatch(_add_with("path", BinaryType()), ADD, "add") is None
    # A writer may give a column of nulls the null type.
    assert type_mismatch(NullType(), ADD, "add") is None
    assert type_mismatch(_add_with("tags", NullType()), ADD, "add") is None
    # Fields only one side has are dropped or read as null.
    fewer = StructType([ADD["path"], StructField("extra", ArrayType(LongType()))])
    assert type_mismatch(fewer, ADD, "add") is None


def test_another_kind_is_named_by_its_path() -> None:
    # Long types are cut to 80 characters.
    assert type_mismatch(StringType(), ADD, "add") == (
        "add is string, not struct<path:string,partitionValues:map<string,string>,size:bigint,"
        "dataChange:boo"
    )
    assert type_mismatch(_add_with("path", LongType()), ADD, "add") == (
        "add.path is bigint, not string"
    )
    assert type_mismatch(_add_with("size", StringType()), ADD, "add") == (
        "add.size is string, not bigint"
    )
    assert type_mismatch(_add_with("dataChange", IntegerType()), ADD, "add") == (
        "add.dataChange is int, not boolean"
    )
    values = MapType(StringType(), LongType())
    assert type_mismatch(_add_with("tags", values), ADD, "add") == (
        "add.tags.value is bigint, not string"
    )
    assert type_mismatch(ArrayType(LongType()), ArrayType(StringType()), "c") == (
        "c.element is bigint, not string"
    )
    assert type_mismatch(StringType(), ArrayType(StringType()), "c") == (
        "c is string, not array<string>"
    )
