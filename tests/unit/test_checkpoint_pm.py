"""A parquet checkpoint's P&M read by the listing's worker, without Spark: what it takes, and
what it leaves to the client's Spark read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py.protocol.actions import ADD, METADATA, PROTOCOL
from delta_connect_py.worker.checkpoint_pm import checkpoint_pm

_PROTOCOL = {
    "minReaderVersion": 3,
    "minWriterVersion": 7,
    "readerFeatures": ["deletionVectors"],
    "writerFeatures": ["deletionVectors", "appendOnly"],
}
_METADATA = {
    "id": "t",
    "name": None,
    "description": 'é " \\ \n',
    "format": {"provider": "parquet", "options": []},
    "schemaString": '{"type":"struct","fields":[]}',
    "partitionColumns": ["p"],
    "configuration": [("delta.appendOnly", "true"), ("x", None)],
    "createdTime": 1_700_000_000_000,
}
_ADD = {"path": "a", "partitionValues": [], "size": 1, "modificationTime": 1, "dataChange": False}


def checkpoint_pm_lines(local_paths: list[str]) -> list[str] | None:
    """The P&M lines ``checkpoint_pm`` takes, None when it takes none."""
    found = checkpoint_pm(local_paths)
    return None if found is None else found.lines


def _write(path: Path, rows: list[dict[str, Any]], schema: pa.Schema, **options: Any) -> str:
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, **options)
    return str(path)


_SCHEMA = pa.schema([("protocol", PROTOCOL), ("metaData", METADATA), ("add", ADD)])


def test_the_actions_come_as_the_lines_a_commit_would_hold(tmp_path: Path) -> None:
    rows = [{"add": _ADD}, {"protocol": _PROTOCOL}, {"metaData": _METADATA}, {"add": _ADD}]
    lines = checkpoint_pm_lines([_write(tmp_path / "c.parquet", rows, _SCHEMA)])
    assert lines is not None
    assert [json.loads(line) for line in lines] == [
        {"protocol": _PROTOCOL},
        {
            "metaData": {
                **_METADATA,
                "format": {"provider": "parquet", "options": {}},
                "configuration": {"delta.appendOnly": "true", "x": None},
            }
        },
    ]


def test_row_groups_without_actions_are_skipped_by_their_statistics(tmp_path: Path) -> None:
    rows = [{"add": _ADD}] * 10 + [{"protocol": _PROTOCOL}, {"metaData": _METADATA}]
    path = _write(tmp_path / "c.parquet", rows, _SCHEMA, row_group_size=5)
    assert pq.ParquetFile(path).num_row_groups == 3
    lines = checkpoint_pm_lines([path])
    assert lines is not None and len(lines) == 2


def test_parts_are_read_in_order_and_a_part_may_lack_the_columns(tmp_path: Path) -> None:
    first = _write(tmp_path / "1.parquet", [{"add": _ADD}], pa.schema([("add", ADD)]))
    second = _write(
        tmp_path / "2.parquet", [{"protocol": _PROTOCOL}, {"metaData": _METADATA}], _SCHEMA
    )
    lines = checkpoint_pm_lines([first, second])
    assert lines is not None
    assert [next(iter(json.loads(line))) for line in lines] == ["protocol", "metaData"]


def test_integers_of_another_width_and_extra_fields_are_read(tmp_path: Path) -> None:
    narrow = pa.struct(
        [("minReaderVersion", pa.int8()), ("minWriterVersion", pa.int64()), ("future", pa.string())]
    )
    schema = pa.schema([("protocol", narrow)])
    rows = [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2, "future": "x"}}]
    lines = checkpoint_pm_lines([_write(tmp_path / "c.parquet", rows, schema)])
    assert lines == [
        '{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2, '
        '"readerFeatures": null, "writerFeatures": null}}'
    ]


@pytest.mark.parametrize(
    "damage", ["two protocols", "string version", "repeated key", "add without path", "not parquet"]
)
def test_what_the_spark_read_might_take_otherwise_is_left_to_it(
    tmp_path: Path, damage: str
) -> None:
    path = tmp_path / "c.parquet"
    rows: list[dict[str, Any]] = [{"protocol": _PROTOCOL}, {"metaData": _METADATA}]
    schema = _SCHEMA
    if damage == "two protocols":
        rows.append({"protocol": _PROTOCOL})
    elif damage == "string version":
        schema = pa.schema([("protocol", pa.struct([("minReaderVersion", pa.string())]))])
        rows = [{"protocol": {"minReaderVersion": "1"}}]
    elif damage == "repeated key":
        rows[1] = {"metaData": {**_METADATA, "configuration": [("k", "1"), ("k", "2")]}}
    elif damage == "add without path":
        schema = _SCHEMA.set(2, pa.field("add", pa.struct([("size", pa.int64())])))
    if damage == "not parquet":
        path.write_bytes(b"PAR1 not a parquet file PAR1")
    else:
        _write(path, rows, schema)
    assert checkpoint_pm_lines([str(path)]) is None
