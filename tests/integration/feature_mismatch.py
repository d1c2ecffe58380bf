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


def _schema_string() -> str:
    fields = [
        {
            "name": name,
            "type": kind,
            "nullable": True,
            "metadata": {
                "delta.columnMapping.id": index,
                "delta.columnMapping.physicalName": f"col-{index}",
            },
        }
        for index, (name, kind) in enumerate((("id", "long"), ("s", "string")), start=1)
    ]
    return json.dumps({"type": "struct", "fields": fields})


def write_table(root: Path, *, list_column_mapping: bool = False) -> Path:
    """The table at ``root``: version 0 with one data file of two rows. With
    ``list_column_mapping`` the protocol lists the feature (a valid table, physical names)."""
    (root / "_delta_log").mkdir(parents=True)
    names = ["col-1", "col-2"] if list_column_mapping else ["id", "s"]
    data = pa.table({names[0]: pa.array([1, 2], pa.int64()), names[1]: ["x", "y"]})
    pq.write_table(data, root / DATA_FILE)
    features = ["columnMapping"] if list_column_mapping else []
    actions = [
        {"commitInfo": {"timestamp": 1_700_000_000_000, "operation": "CREATE TABLE"}},
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": [*features, "deletionVectors"],
                "writerFeatures": [*features, "appendOnly", "changeDataFeed", "deletionVectors"],
            }
        },
        {
            "metaData": {
                "id": "00000000-0000-0000-0000-000000000001",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": _schema_string(),
                "partitionColumns": [],
                "createdTime": 1_700_000_000_000,
                "configuration": {
                    "delta.columnMapping.mode": "name",
                    "delta.columnMapping.maxColumnId": "2",
                    "delta.enableDeletionVectors": "true",
                    "delta.enableChangeDataFeed": "true",
                },
            }
        },
        {
            "add": {
                "path": DATA_FILE,
                "partitionValues": {},
                "size": (root / DATA_FILE).stat().st_size,
                "modificationTime": 1_700_000_000_000,
                "dataChange": True,
            }
        },
    ]
    commit = "\n".join(json.dumps(action) for action in actions) + "\n"
    (root / "_delta_log" / f"{0:020d}.json").write_text(commit)
    return root
