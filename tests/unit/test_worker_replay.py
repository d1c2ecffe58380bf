"""The server-side vectorised replay equals the reference replay, without Spark.

``worker.replay.replay_partition`` is fed the rows a partition would receive; splitting the rows
by the plan's partition key (any number of partitions) must never change the union of results.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from delta_connect_py.errors import LogFileOutsideTableError
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.protocol.replay import reference_replay
from delta_connect_py.worker.failures import WorkerFailure, decode_worker_failure
from delta_connect_py.worker.replay import ReplayConfig, first_foreign_source, replay_partition
from tests.histories import DAY_MS, NOW_MS, history, normalized, versioned_actions

ROOT = "file:/data/table"
LOG_DIR = ROOT + "/_delta_log"
INPUT_SCHEMA = pa.schema([*STATE_SCHEMA, (VERSION_COLUMN, pa.int64()), (FILE_COLUMN, pa.string())])
CONFIG = ReplayConfig(
    table_root=ROOT,
    log_dir=LOG_DIR,
    min_file_retention_timestamp=NOW_MS - 7 * DAY_MS,
    min_set_transaction_retention_timestamp=None,
)


def input_rows(commits: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rows = []
    for version, action in versioned_actions(commits):
        if not any(kind in action for kind in STATE_SCHEMA.names):
            continue
        rows.append(
            {**action, VERSION_COLUMN: version, FILE_COLUMN: f"{LOG_DIR}/{version:020d}.json"}
        )
    return rows


def partition_of(row: dict[str, Any], partitions: int) -> int:
    action = row.get("add") or row.get("remove")
    if action is None:
        return 0
    return hash(action["path"].rsplit("/", 1)[-1].lower()) % partitions


def worker_state(
    rows: list[dict[str, Any]], partitions: int, config: ReplayConfig
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for partition in range(partitions):
        chosen = [row for row in rows if partition_of(row, partitions) == partition]
        batches = pa.Table.from_pylist(chosen, schema=INPUT_SCHEMA).to_batches(max_chunksize=3)
        for batch in replay_partition(config, batches):
            assert batch.schema == STATE_SCHEMA
            out += batch.to_pylist()
    return out


def reference_state(
    commits: list[list[dict[str, Any]]], config: ReplayConfig
) -> list[dict[str, Any]]:
    return reference_replay(
        versioned_actions(commits),
        table_root=config.table_root,
        min_file_retention_timestamp=config.min_file_retention_timestamp,
        min_set_transaction_retention_timestamp=config.min_set_transaction_retention_timestamp,
    ).to_rows()


@settings(max_examples=300, deadline=None)
@given(commits=history(), partitions=st.integers(1, 5), txn_retention=st.booleans())
def test_worker_replay_equals_reference(
    commits: list[list[dict[str, Any]]], partitions: int, txn_retention: bool
) -> None:
    config = ReplayConfig(
        ROOT,
        LOG_DIR,
        CONFIG.min_file_retention_timestamp,
        NOW_MS - 2 * DAY_MS if txn_retention else None,
    )
    ours = worker_state(input_rows(commits), partitions, config)
    assert normalized(ours) == normalized(reference_state(commits, config))


def test_rows_from_outside_the_log_fail_the_task() -> None:
    rows = input_rows([[{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}]])
    rows[0][FILE_COLUMN] = "file:/data/other/_delta_log/00000000000000000000.json"
    with pytest.raises(WorkerFailure) as info:
        list(replay_partition(CONFIG, pa.Table.from_pylist(rows, schema=INPUT_SCHEMA).to_batches()))
    decoded = decode_worker_failure(f"PythonException: ... {info.value} ...")
    assert isinstance(decoded, LogFileOutsideTableError)
    assert "file:/data/other" in str(decoded)


def test_an_escaped_name_cannot_leave_a_directory_already_checked() -> None:
    log = "file:/data/t/_delta_log"
    sources = [f"{log}/{v:020}.json" for v in range(3)]
    assert first_foreign_source(sources, log) is None
    escaping = f"{log}/..%2F..%2Fother%2F00000000000000000003.json"
    assert first_foreign_source([*sources, escaping], log) == escaping
    assert first_foreign_source([*sources, "file:/data/u/_delta_log/x.json"], log) is not None
    assert first_foreign_source([*sources, None], log) == "None"


def test_uri_encoded_source_files_are_accepted() -> None:
    config = ReplayConfig("file:/data/a b", "file:/data/a b/_delta_log", None, None)
    rows = [
        {
            "protocol": {"minReaderVersion": 1, "minWriterVersion": 2},
            VERSION_COLUMN: 0,
            FILE_COLUMN: "file:///data/a%20b/_delta_log/00000000000000000000.json",
        }
    ]
    state = list(
        replay_partition(config, pa.Table.from_pylist(rows, schema=INPUT_SCHEMA).to_batches())
    )
    assert sum(batch.num_rows for batch in state) == 1
