"""The schema the listing's worker tells from a checkpoint's footers is the one Spark infers.

The client states it for its reads of the checkpoint instead of asking Spark to infer it (a job
and a request per fresh snapshot): wherever ``spark_schema_json`` gives a schema, it must equal
Spark's own inference, and a read with it must show exactly it (the client then knows the
read's schema without asking). Every parquet checkpoint and sidecar of the conformance tables
is compared, and files of each type the conversion handles.
"""

from __future__ import annotations

import datetime
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import StructType

from delta_connect_py.plans.spark import strict_reader
from delta_connect_py.worker.parquet_schema import spark_schema_json
from tests.conftest import CONFORMANCE

pytestmark = pytest.mark.integration

_CHECKPOINT_FILES = sorted(
    {
        *CONFORMANCE.glob("**/_delta_log/*.parquet"),
        *CONFORMANCE.glob("**/_delta_log/_sidecars/*.parquet"),
    }
)

_UTC = datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
_EVERY_TYPE = pa.table(
    {
        "byte": pa.array([1], pa.int8()),
        "short": pa.array([1], pa.int16()),
        "int": pa.array([1], pa.int32()),
        "long": pa.array([1], pa.int64()),
        "float": pa.array([1.5], pa.float32()),
        "double": pa.array([1.5], pa.float64()),
        "bool": pa.array([True]),
        "text": pa.array(["é"], pa.large_string()),
        "date": pa.array([datetime.date(2024, 1, 2)]),
        "dec32": pa.array([Decimal("1.25")], pa.decimal128(5, 2)),
        "dec64": pa.array([Decimal("1.25")], pa.decimal128(15, 2)),
        "dec128": pa.array([Decimal("1.25")], pa.decimal128(38, 10)),
        "ts_us": pa.array([_UTC], pa.timestamp("us", tz="UTC")),
        "ts_ms": pa.array([_UTC], pa.timestamp("ms", tz="Asia/Tokyo")),
        "required": pa.array([1], pa.int64()),
        "lists": pa.array([[["a", None]]], pa.list_(pa.list_(pa.string()))),
        "maps": pa.array(
            [[("k", {"x": [1]})]], pa.map_(pa.string(), pa.struct([("x", pa.list_(pa.int64()))]))
        ),
        "deep": pa.array(
            [{"a": {"b": [{"c": "d"}]}}],
            pa.struct([("a", pa.struct([("b", pa.list_(pa.struct([("c", pa.string())])))]))]),
        ),
    }
)


def _spark_schema(spark: Any, paths: list[str]) -> StructType:
    return strict_reader(spark).option("mergeSchema", "true").parquet(*paths).schema


def _compare(spark: Any, files: list[Path]) -> bool:
    """Whether a schema was told for ``files``; asserts it is Spark's."""
    told = spark_schema_json([pq.ParquetFile(file) for file in files])
    if told is None:
        return False
    stated = StructType.fromJson(json.loads(told))
    paths = [file.as_uri() for file in files]
    assert stated == _spark_schema(spark, paths), files
    assert strict_reader(spark).schema(stated).parquet(*paths).schema == stated
    return True


def test_conformance_checkpoints_are_told_as_spark_infers_them(spark: Any) -> None:
    told = [file for file in _CHECKPOINT_FILES if _compare(spark, [file])]
    # Most convert (the rest hold INT96, timestamps without a zone, ...: left to Spark).
    assert len(told) > len(_CHECKPOINT_FILES) * 3 // 4, (len(told), len(_CHECKPOINT_FILES))


def test_every_converted_type_is_told_as_spark_infers_it(spark: Any, tmp_path: Path) -> None:
    required = pa.schema(
        [
            field.with_nullable(False) if field.name == "required" else field
            for field in _EVERY_TYPE.schema
        ]
    )
    plain, compliant = tmp_path / "plain.parquet", tmp_path / "legacy_names.parquet"
    pq.write_table(_EVERY_TYPE.cast(required), plain)
    pq.write_table(_EVERY_TYPE, compliant, use_compliant_nested_type=False)  # "item" elements
    assert _compare(spark, [plain])
    assert _compare(spark, [compliant])
    assert _compare(spark, [plain, plain])
