"""Partition-wise log replay on the server (delta-spark's ``InMemoryLogReplay``), vectorised.

Responsibility: given every action row of one hash partition (all rows for any file key land in
the same partition; every non-file action lands in the null-key partition), emit the
reconstructed state of that partition: the winning add per file key (with ``dataChange=false``),
unexpired tombstones, and for the non-file partition the latest protocol, metaData, txn per
appId and domainMetadata per domain.

Invariants: the newest action per file key ``(canonical path, deletion-vector unique id)`` wins,
ties within one version broken by input order (a stable sort); a row read from a file outside
this table's ``_delta_log`` fails the task with ``DELTA_LOG_FILE_OUTSIDE_TABLE`` rather than
contributing a row. Output matches ``protocol.actions.STATE_SCHEMA`` exactly. The reference
replay in ``protocol.replay`` is the oracle this must agree with.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from delta_connect_py.errors import LogFileOutsideTableError
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.protocol.paths import canonical_path
from delta_connect_py.worker.failures import WorkerFailure

OUTPUT_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ReplayConfig:
    """What one replay needs besides the rows; primitives only (it is pickled to the server)."""

    table_root: str
    log_dir: str
    min_file_retention_timestamp: int | None
    min_set_transaction_retention_timestamp: int | None


def replay_partition(
    config: ReplayConfig, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the replayed state of one partition."""
    collected = [batch for batch in batches if batch.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected).combine_chunks()
    check_source_files(table, config)
    add_path = pc.struct_field(table["add"], "path")
    remove_path = pc.struct_field(table["remove"], "path")
    is_file_action = pc.or_kleene(pc.is_valid(add_path), pc.is_valid(remove_path))
    file_rows = table.filter(is_file_action)
    other_rows = table.filter(pc.invert(is_file_action))
    parts = [replay_non_file_actions(other_rows, config), replay_file_actions(file_rows, config)]
    state = pa.concat_tables(
        [part for part in parts if part.num_rows] or [STATE_SCHEMA.empty_table()]
    )
    yield from state.to_batches(max_chunksize=OUTPUT_BATCH_ROWS)


def check_source_files(table: pa.Table, config: ReplayConfig) -> None:
    """Every row must come from this table's ``_delta_log`` (or its ``_sidecars``)."""
    allowed = {config.log_dir.rstrip("/"), posixpath.join(config.log_dir.rstrip("/"), "_sidecars")}
    allowed = {_comparable_dir(directory) for directory in allowed}
    for source in pc.unique(table[FILE_COLUMN]).to_pylist():
        if source is None or _comparable_dir(posixpath.dirname(unquote(source))) not in allowed:
            raise WorkerFailure(LogFileOutsideTableError(file=source, log_path=config.log_dir))


def _comparable_dir(directory: str) -> str:
    """``file:///a`` and ``file:/a`` name the same directory."""
    if directory.startswith("file:///"):
        return "file:/" + directory[len("file:///") :]
    if directory.startswith("/"):
        return "file:" + directory
    return directory


def replay_file_actions(rows: pa.Table, config: ReplayConfig) -> pa.Table:
    """Newest add/remove per file key; adds live, removes tombstones while retained."""
    if rows.num_rows == 0:
        return STATE_SCHEMA.empty_table()
    keys = file_keys(rows, config.table_root)
    order = pc.sort_indices(
        pa.table({"key": keys, "version": rows[VERSION_COLUMN]}),
        sort_keys=[("key", "ascending"), ("version", "ascending")],
    )
    sorted_keys = pc.take(keys, order)
    last_of_key = pc.not_equal(sorted_keys[:-1], sorted_keys[1:])
    is_last = pa.concat_arrays([last_of_key, pa.array([True])])
    winners = rows.take(pc.filter(order, is_last))
    live = winners.filter(pc.is_valid(pc.struct_field(winners["add"], "path")))
    tombstones = winners.filter(pc.is_valid(pc.struct_field(winners["remove"], "path")))
    tombstones = tombstones.filter(retained_tombstones(tombstones, config))
    return pa.concat_tables(
        [
            state_columns(live, overrides={"add": without_data_change(live["add"])}),
            state_columns(
                tombstones, overrides={"remove": without_data_change(tombstones["remove"])}
            ),
        ]
    )


def file_keys(rows: pa.Table, table_root: str) -> pa.Array:
    """``canonical path + NUL + deletion-vector unique id`` for every file action row."""
    paths = pc.coalesce(
        pc.struct_field(rows["add"], "path"), pc.struct_field(rows["remove"], "path")
    ).to_pylist()
    dv_ids = deletion_vector_ids(rows).to_pylist()
    return pa.array(
        [
            f"{_canonical(path, table_root)}\x00{dv_id or ''}"
            for path, dv_id in zip(paths, dv_ids, strict=True)
        ],
        type=pa.string(),
    )


def _canonical(path: str, table_root: str) -> str:
    # Most paths are plain relative names; only those with a scheme, a leading slash or an
    # escape need delta-spark's canonicalization.
    if "%" not in path and ":" not in path and not path.startswith("/"):
        return path
    return canonical_path(path, table_root)


def deletion_vector_ids(rows: pa.Table) -> pa.Array:
    """delta-spark's ``uniqueId``: storageType + pathOrInlineDv [+ "@" + offset]; null if no DV."""

    def dv_field(name: str) -> pa.Array:
        return pc.coalesce(
            pc.struct_field(rows["add"], ["deletionVector", name]),
            pc.struct_field(rows["remove"], ["deletionVector", name]),
        )

    base = pc.binary_join_element_wise(dv_field("storageType"), dv_field("pathOrInlineDv"), "")
    offset = pc.cast(dv_field("offset"), pa.string())
    with_offset = pc.binary_join_element_wise(base, offset, "@")
    return pc.if_else(pc.is_valid(offset), with_offset, base)


def retained_tombstones(tombstones: pa.Table, config: ReplayConfig) -> pa.Array:
    if config.min_file_retention_timestamp is None:
        return pa.array([True] * tombstones.num_rows, type=pa.bool_())
    deleted_at = pc.fill_null(
        pc.struct_field(tombstones["remove"], "deletionTimestamp"), pa.scalar(0, pa.int64())
    )
    return pc.greater(deleted_at, pa.scalar(config.min_file_retention_timestamp, pa.int64()))


def without_data_change(actions: pa.ChunkedArray) -> pa.Array:
    """The same add/remove structs with ``dataChange`` set to false."""
    struct = actions.combine_chunks()
    if len(struct) == 0:
        return struct
    children = [
        pa.array([False] * len(struct), type=pa.bool_())
        if field.name == "dataChange"
        else pc.struct_field(struct, field.name)
        for field in struct.type
    ]
    return pa.StructArray.from_arrays(children, fields=list(struct.type), mask=struct.is_null())


def state_columns(rows: pa.Table, overrides: dict[str, Any] | None = None) -> pa.Table:
    """``rows`` reduced to the state columns, cast to the exact state schema."""
    overrides = overrides or {}
    columns = [overrides.get(field.name, rows[field.name]) for field in STATE_SCHEMA]
    return pa.Table.from_arrays(
        [_cast(column, field.type) for column, field in zip(columns, STATE_SCHEMA, strict=True)],
        schema=STATE_SCHEMA,
    )


def _cast(column: Any, target: pa.DataType) -> Any:
    return column if column.type == target else column.cast(target)


def replay_non_file_actions(rows: pa.Table, config: ReplayConfig) -> pa.Table:
    """Latest protocol and metaData, txn per appId, domainMetadata per domain."""
    if rows.num_rows == 0:
        return STATE_SCHEMA.empty_table()
    order = pc.sort_indices(rows[VERSION_COLUMN], sort_keys=[("", "ascending")])
    ordered = rows.take(order)
    latest: dict[str, Any] = {}
    transactions: dict[str, Any] = {}
    domains: dict[str, Any] = {}
    for row in ordered.select([f.name for f in STATE_SCHEMA]).to_pylist():
        if row["protocol"] is not None:
            latest["protocol"] = row["protocol"]
        if row["metaData"] is not None:
            latest["metaData"] = row["metaData"]
        if row["txn"] is not None:
            transactions[row["txn"]["appId"]] = row["txn"]
        if row["domainMetadata"] is not None:
            dm = row["domainMetadata"]
            if dm.get("removed"):
                domains.pop(dm["domain"], None)
            else:
                domains[dm["domain"]] = dm
    kept_txns = [
        txn
        for txn in transactions.values()
        if config.min_set_transaction_retention_timestamp is None
        or (
            txn.get("lastUpdated") is not None
            and txn["lastUpdated"] > config.min_set_transaction_retention_timestamp
        )
    ]
    state_rows = [{name: value} for name, value in latest.items()]
    state_rows += [{"domainMetadata": dm} for dm in domains.values()]
    state_rows += [{"txn": txn} for txn in kept_txns]
    return pa.Table.from_pylist(state_rows, schema=STATE_SCHEMA)
