"""``plans.checkpoint_strings`` on values Spark's parquet reader hands out as their bytes.

Each case writes one row with pyarrow (a string built from raw bytes, no UTF-8 check) and reads
it with Spark: the test column flags exactly the rows whose strings, at any depth, are not
UTF-8, including two halves of one valid character in neighbouring elements of an array.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py.plans.checkpoint_strings import first_not_utf8_column, not_utf8

pytestmark = pytest.mark.integration


def strings_as_given(values: list[bytes | None]) -> pa.Array:
    """A string array of ``values`` as they are (pyarrow checks no UTF-8 this way)."""
    raw = pa.array(values, pa.binary())
    return pa.Array.from_buffers(pa.string(), len(raw), raw.buffers(), raw.null_count)


def _list_of(values: pa.Array, per_row: list[int]) -> pa.Array:
    offsets = [0]
    for count in per_row:
        offsets.append(offsets[-1] + count)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


E_ACUTE = "é".encode()  # two bytes: a valid pair, each half invalid alone


def _table() -> pa.Table:
    plain = strings_as_given([b"ok", b"x\xff", b"ok", None])
    # Row 2: the halves of one character in two elements (valid if joined without a separator).
    in_list = _list_of(
        strings_as_given([b"a", b"b", b"c", b"d", E_ACUTE[:1], E_ACUTE[1:], b"e", b"f"]),
        [2, 2, 2, 2],
    )
    keys = strings_as_given([b"k", b"k", b"k", b"k\xc3"])
    values = strings_as_given([b"v", b"v", b"v", b"v"])
    as_map = pa.MapArray.from_arrays(pa.array([0, 1, 2, 3, 4], pa.int32()), keys, values)
    nested = pa.StructArray.from_arrays(
        [
            _list_of(
                pa.StructArray.from_arrays([strings_as_given([b"n", b"n", b"n", b"n"])], ["s"]),
                [1, 1, 1, 1],
            )
        ],
        ["items"],
    )
    return pa.table(
        {"plain": plain, "list": in_list, "map": as_map, "nested": nested, "number": [1, 2, 3, 4]}
    )


@pytest.fixture(scope="module")
def rows(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    path = tmp_path_factory.mktemp("strings") / "rows.parquet"
    pq.write_table(_table(), path)
    return spark.read.parquet(str(path))


def test_each_column_flags_only_its_rows_that_are_not_utf8(rows: Any) -> None:
    flags = {}
    for field in rows.schema.fields:
        test = not_utf8(rows[field.name], field.dataType)
        if test is None:
            flags[field.name] = None
            continue
        ordered = rows.select("number", test.alias("flag")).orderBy("number").collect()
        flags[field.name] = [bool(row["flag"]) for row in ordered]
    assert flags == {
        "plain": [False, True, False, False],
        "list": [False, False, True, False],
        "map": [False, False, False, True],
        "nested": [False, False, False, False],
        "number": None,
    }


def test_the_first_column_not_utf8_is_named(rows: Any) -> None:
    columns = {f.name: (rows[f.name], f.dataType) for f in rows.schema.fields}
    first = first_not_utf8_column(columns)
    assert first is not None
    named = rows.select("number", first.alias("column")).orderBy("number").collect()
    assert [row["column"] for row in named] == [None, "plain", "list", "map"]
