"""A table whose metadata turns on column mapping that its protocol does not list, as delta-rs
1.6 writes one given ``delta.columnMapping.mode=name``: field metadata with physical names, a
table-features protocol without ``columnMapping``, data files under the logical names. Built by
hand, so the tests do not depend on that writer keeping its behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

DATA_FILE = "part-00000-0.parquet"


def _schema_string(physical_names: bool = True) -> str:
    fields = [
        {
            "name": name,
            "type": kind,
            "nullable": True,
            "metadata": {
                "delta.columnMapping.id": index,
                "delta.columnMapping.physicalName": f"col-{index}",
            }
            if physical_names
            else {},
        }
        for index, (name, kind) in enumerate((("id", "long"), ("s", "string")), start=1)
    ]
    return json.dumps({"type": "struct", "fields": fields})


def _metadata(column_mapping: bool) -> dict[str, object]:
    configuration = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    if column_mapping:
        configuration |= {
            "delta.columnMapping.mode": "name",
            "delta.columnMapping.maxColumnId": "2",
        }
    return {
        "metaData": {
            "id": "00000000-0000-0000-0000-000000000001",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _schema_string(physical_names=column_mapping),
            "partitionColumns": [],
            "createdTime": 1_700_000_000_000,
            "configuration": configuration,
        }
    }


def _add(root: Path, name: str, columns: list[str], first_id: int) -> dict[str, object]:
    """A data file of two rows (``first_id``, ``first_id + 1``) under ``columns``' names."""
    ids = pa.array([first_id, first_id + 1], pa.int64())
    pq.write_table(pa.table({columns[0]: ids, columns[1]: ["x", "y"]}), root / name)
    size = (root / name).stat().st_size
    return {
        "add": {
            "path": name,
            "partitionValues": {},
            "size": size,
            "modificationTime": 1_700_000_000_000,
            "dataChange": True,
        }
    }


def _commit(root: Path, version: int, actions: list[dict[str, object]]) -> None:
    info = {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "WRITE"}}
    lines = [json.dumps(action) for action in [info, *actions]]
    (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def write_table(root: Path, *, list_column_mapping: bool = False) -> Path:
    """The table at ``root``: version 0 with one data file of two rows. With
    ``list_column_mapping`` the protocol lists the feature (a valid table, physical names)."""
    (root / "_delta_log").mkdir(parents=True)
    features = ["columnMapping"] if list_column_mapping else []
    columns = ["col-1", "col-2"] if list_column_mapping else ["id", "s"]
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": [*features, "deletionVectors"],
            "writerFeatures": [*features, "appendOnly", "changeDataFeed", "deletionVectors"],
        }
    }
    _commit(root, 0, [protocol, _metadata(True), _add(root, DATA_FILE, columns, 1)])
    return root


def write_table_turning_mapping_on_later(root: Path) -> Path:
    """Versions 0-3 at ``root``: a valid table without column mapping (0), an append (1), a
    metaData alone turning column mapping on, physical names and all, without the feature in
    the protocol (2), an append under the logical names (3)."""
    (root / "_delta_log").mkdir(parents=True)
    protocol = {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["appendOnly", "changeDataFeed", "deletionVectors"],
        }
    }
    columns = ["id", "s"]
    _commit(root, 0, [protocol, _metadata(False), _add(root, "a.parquet", columns, 1)])
    _commit(root, 1, [_add(root, "b.parquet", columns, 3)])
    _commit(root, 2, [_metadata(True)])
    _commit(root, 3, [_add(root, "c.parquet", columns, 5)])
    return root
