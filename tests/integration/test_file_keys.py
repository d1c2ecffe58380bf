"""Spark's file keys (``plans.file_keys``) equal the Python ones (``protocol.paths``) on a server.

Checkpoint rows are matched against replayed rows by the Spark expression, commit rows among
themselves by the Python function: the two must agree on every path, or a superseded checkpoint
file would come back to life.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_connect_py.plans import file_keys
from delta_connect_py.plans.file_keys import file_key
from delta_connect_py.plans.spark import spark_schema
from delta_connect_py.protocol.actions import ADD, REMOVE
from delta_connect_py.protocol.paths import canonical_path, dv_unique_id, is_plain_path

ROOTS = ["file:/data/t", "file:///data/t", "s3a://Bucket/t", "hdfs://user@NameNode:8020/t", "/t"]

TRICKY = [
    "part=1/a.parquet",
    "part=a%20b/x.parquet",
    "part=a%2fb/x.parquet",
    "p=%e2%82%ac/%zz%4/%%41%a",
    "/abs/a.parquet",
    "file:/data/t/a.parquet",
    "file:///data/t/a%3a.parquet",
    "FILE:///data/t/A.parquet",
    "s3a://Bucket/t/x.parquet",
    "S3A://us:Er@Bucket.Example:9000/t/x",
    "s3a://@HOST/x",
    "hdfs:relative/x",
    "hdfs://",
    "x:y/z",
    "p=a:b/c.parquet",
    "1abc:/x",
    "",
]

PATH_ALPHABET = st.sampled_from([*"aAzZ09/:%@.+-_= fF", "%2f", "%2F", "%e2", "//", "s3a:"])
PATHS = st.lists(PATH_ALPHABET, max_size=12).map("".join)
DVS = st.one_of(
    st.none(),
    st.fixed_dictionaries(
        {
            "storageType": st.sampled_from(["u", "i", "p"]),
            "pathOrInlineDv": st.text("ab%:/", max_size=4),
            "offset": st.one_of(st.none(), st.integers(0, 99)),
            "sizeInBytes": st.just(1),
            "cardinality": st.just(1),
        }
    ),
)


def _python_key(path: str, dv: dict[str, Any] | None, root: str) -> str:
    return f"{canonical_path(path, root)}\x00{dv_unique_id(dv) or ''}"


def _spark_keys(spark: Any, rows: list[dict[str, Any]], root: str) -> list[str]:
    schema = pa.schema([("i", pa.int64()), ("add", ADD), ("remove", REMOVE)])
    table = pa.Table.from_pylist(rows, schema=schema)
    frame = spark.createDataFrame(table.to_pandas(), schema=spark_schema(schema))
    result = frame.select("i", file_key(root).alias("key")).collect()
    return [row["key"] for row in sorted(result, key=lambda row: row["i"])]


def _rows(paths_and_dvs: list[tuple[str, dict[str, Any] | None]]) -> list[dict[str, Any]]:
    rows = []
    for index, (path, dv) in enumerate(paths_and_dvs):
        action = {"path": path, "deletionVector": dv}
        kind = "add" if index % 2 == 0 else "remove"
        rows.append({"i": index, kind: action})
    return rows


def test_tricky_paths_have_equal_keys(spark: Any) -> None:
    cases = [(path, None) for path in TRICKY]
    cases += [("a.parquet", {"storageType": "u", "pathOrInlineDv": "ab", "offset": 4})]
    cases += [("a.parquet", {"storageType": "i", "pathOrInlineDv": "x%y", "offset": None})]
    for root in ROOTS:
        expected = [_python_key(path, dv, root) for path, dv in cases]
        assert _spark_keys(spark, _rows(cases), root) == expected, root


def test_plain_paths_are_the_same_in_spark(spark: Any) -> None:
    frame = spark.createDataFrame([(i, path) for i, path in enumerate(TRICKY)], "i long, p string")
    rows = frame.select("i", file_keys.is_plain_path(frame["p"]).alias("plain")).collect()
    assert [row["plain"] for row in sorted(rows, key=lambda row: row["i"])] == [
        is_plain_path(path) for path in TRICKY
    ]


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cases=st.lists(st.tuples(PATHS, DVS), min_size=1, max_size=300), root=st.sampled_from(ROOTS))
def test_random_paths_have_equal_keys(
    spark: Any, cases: list[tuple[str, dict[str, Any] | None]], root: str
) -> None:
    expected = [_python_key(path, dv, root) for path, dv in cases]
    assert _spark_keys(spark, _rows(cases), root) == expected
