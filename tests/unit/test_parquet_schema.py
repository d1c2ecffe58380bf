"""The Spark schema the listing's worker tells from parquet footers: the types it converts, and
every footer it leaves to Spark's own inference (`tests/integration/test_footer_schemas.py`
compares the converted ones with Spark's)."""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py.worker.parquet_schema import spark_schema_json


def _file(path: Path, table: pa.Table, **options: Any) -> pq.ParquetFile:
    pq.write_table(table, path, **options)
    return pq.ParquetFile(path)


def _field(name: str, spark_type: Any) -> dict[str, Any]:
    return {"name": name, "type": spark_type, "nullable": True, "metadata": {}}


def _converted(tmp_path: Path, *columns: tuple[str, pa.Array]) -> Any:
    table = pa.table({name: values for name, values in columns})
    found = spark_schema_json([_file(tmp_path / "f.parquet", table)])
    return None if found is None else json.loads(found)


def test_a_checkpoint_like_schema_converts_field_by_field(tmp_path: Path) -> None:
    add = pa.struct(
        [
            ("path", pa.string()),
            ("partitionValues", pa.map_(pa.string(), pa.string())),
            ("size", pa.int64()),
            ("dataChange", pa.bool_()),
            ("tags", pa.list_(pa.field("element", pa.string(), nullable=False))),
            ("nested", pa.list_(pa.struct([("a", pa.int32())]))),
            ("lookup", pa.map_(pa.string(), pa.struct([("b", pa.int16())]))),
        ]
    )
    values = pa.array([None], add)
    converted = _converted(tmp_path, ("add", values))
    string_map = {
        "type": "map",
        "keyType": "string",
        "valueType": "string",
        "valueContainsNull": True,
    }
    nested_struct = {"type": "struct", "fields": [_field("a", "integer")]}
    assert converted == {
        "type": "struct",
        "fields": [
            _field(
                "add",
                {
                    "type": "struct",
                    "fields": [
                        _field("path", "string"),
                        _field("partitionValues", string_map),
                        _field("size", "long"),
                        _field("dataChange", "boolean"),
                        _field(
                            "tags",
                            {"type": "array", "elementType": "string", "containsNull": True},
                        ),
                        _field(
                            "nested",
                            {"type": "array", "elementType": nested_struct, "containsNull": True},
                        ),
                        _field(
                            "lookup",
                            {
                                **string_map,
                                "valueType": {"type": "struct", "fields": [_field("b", "short")]},
                            },
                        ),
                    ],
                },
            )
        ],
    }


_UTC = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize(
    ("values", "spark_type"),
    [
        (pa.array([1], pa.int8()), "byte"),
        (pa.array([1], pa.int16()), "short"),
        (pa.array([1], pa.int32()), "integer"),
        (pa.array([1], pa.int64()), "long"),
        (pa.array([1.5], pa.float32()), "float"),
        (pa.array([1.5], pa.float64()), "double"),
        (pa.array([True], pa.bool_()), "boolean"),
        (pa.array(["é"], pa.large_string()), "string"),
        (pa.array([datetime.date(2024, 1, 2)], pa.date32()), "date"),
        (pa.array([Decimal("1.25")], pa.decimal128(5, 2)), "decimal(5,2)"),
        (pa.array([Decimal("1.25")], pa.decimal128(38, 2)), "decimal(38,2)"),
        (pa.array([_UTC], pa.timestamp("us", tz="UTC")), "timestamp"),
        (pa.array([_UTC], pa.timestamp("ms", tz="Europe/Paris")), "timestamp"),
    ],
)
def test_types_whose_spark_type_no_setting_changes_convert(
    tmp_path: Path, values: pa.Array, spark_type: str
) -> None:
    assert _converted(tmp_path, ("c", values)) == {
        "type": "struct",
        "fields": [_field("c", spark_type)],
    }


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(pa.array([1], pa.uint8()), id="unsigned"),
        pytest.param(pa.array([1], pa.uint64()), id="unsigned-64"),
        pytest.param(pa.array([b"x"], pa.binary()), id="binary-as-string-setting"),
        pytest.param(pa.array([_UTC.replace(tzinfo=None)], pa.timestamp("us")), id="ntz"),
        pytest.param(pa.array([_UTC], pa.timestamp("ns", tz="UTC")), id="nanoseconds"),
        pytest.param(pa.array([datetime.time(1, 2)], pa.time64("us")), id="time"),
        pytest.param(pa.array([None], pa.null()), id="null"),
        pytest.param(
            pa.array([{"a": [b"x"]}], pa.struct([("a", pa.list_(pa.binary()))])), id="deep"
        ),
    ],
)
def test_other_types_are_left_to_spark(tmp_path: Path, values: pa.Array) -> None:
    assert _converted(tmp_path, ("ok", pa.array([1], pa.int64())), ("c", values)) is None


def test_int96_timestamps_are_left_to_spark(tmp_path: Path) -> None:
    table = pa.table({"t": pa.array([_UTC], pa.timestamp("us", tz="UTC"))})
    file = _file(tmp_path / "f.parquet", table, use_deprecated_int96_timestamps=True)
    assert spark_schema_json([file]) is None


def test_field_ids_are_left_to_spark(tmp_path: Path) -> None:
    field = pa.field("c", pa.int64(), metadata={b"PARQUET:field_id": b"7"})
    file = _file(tmp_path / "f.parquet", pa.table({"c": [1]}, schema=pa.schema([field])))
    assert spark_schema_json([file]) is None


def test_parts_convert_only_when_their_schemas_are_equal(tmp_path: Path) -> None:
    first = _file(tmp_path / "1.parquet", pa.table({"a": [1], "b": ["x"]}))
    second = _file(tmp_path / "2.parquet", pa.table({"a": [2], "b": ["y"]}))
    third = _file(tmp_path / "3.parquet", pa.table({"a": [3]}))  # Spark's merge would decide
    both = spark_schema_json([first, second])
    assert both is not None and both == spark_schema_json([first])
    assert spark_schema_json([first, third]) is None
    assert spark_schema_json([]) is None
