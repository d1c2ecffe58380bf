"""Large Arrow types (``spark.sql.execution.arrow.useLargeVarTypes``) reach worker bodies as
the regular types they are written for, with the same values."""

from __future__ import annotations

import pyarrow as pa

from delta_connect_py.worker.arrow_types import regular_schema, with_regular_types

LARGE = pa.schema(
    [
        ("add", pa.struct([("path", pa.large_string()), ("size", pa.int64())])),
        ("tags", pa.map_(pa.large_string(), pa.large_string())),
        ("names", pa.large_list(pa.large_string())),
        ("content", pa.large_binary()),
    ]
)
ROWS = [
    {
        "add": {"path": "a b.parquet", "size": 3},
        "tags": [("k", "v")],
        "names": ["x"],
        "content": b"\x00",
    },
    {"add": None, "tags": None, "names": [], "content": None},
]


def test_large_types_become_regular_at_every_depth_with_the_same_values() -> None:
    batch = pa.RecordBatch.from_pylist(ROWS, schema=LARGE)
    [regular] = with_regular_types([batch])
    assert regular.schema == pa.schema(
        [
            ("add", pa.struct([("path", pa.string()), ("size", pa.int64())])),
            ("tags", pa.map_(pa.string(), pa.string())),
            ("names", pa.list_(pa.string())),
            ("content", pa.binary()),
        ]
    )
    assert regular.to_pylist() == batch.to_pylist()


def test_regular_batches_pass_as_they_are_and_empty_ones_stay() -> None:
    regular = pa.RecordBatch.from_pylist(ROWS, schema=regular_schema(LARGE))
    assert next(with_regular_types([regular])) is regular
    empty = pa.RecordBatch.from_pylist([], schema=LARGE)
    [cast] = with_regular_types([empty])
    assert (cast.num_rows, cast.schema) == (0, regular_schema(LARGE))
