"""Partition-wise log replay on the server (delta-spark's ``InMemoryLogReplay``), vectorised.

Responsibility: given every action row of one hash partition (all rows for any file key land in
the same partition; every non-file action lands in the null-key partition), emit the
reconstructed state of that partition: the winning add per file key (with ``dataChange=false``),
unexpired tombstones, and for the non-file partition the latest protocol, metaData, txn per
appId and domainMetadata per domain.

Invariants: the newest action per file key ``(canonical path, deletion-vector unique id)`` wins,
ties within one version broken by input order (a stable sort), except in the checkpoint, whose
add beats its remove of the same key; a row read from a file outside
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

from delta_connect_py.errors import (
    CorruptLogFileError,
    LogFileOutsideTableError,
    checkpoint_value_not_utf8,
    corrupt_checkpoint_file,
)
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.protocol.paths import canonical_path
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.line_checks import missing_field

OUTPUT_BATCH_ROWS = 65_536


@dataclass(frozen=True)
class ReplayConfig:
    """What one replay needs besides the rows; primitives only (it is pickled to the server)."""

    table_root: str
    log_dir: str
    min_file_retention_timestamp: int | None
    min_set_transaction_retention_timestamp: int | None
    #: Fields the rows' actions must hold, as ``plans.action_lines.required_fields`` lists
    #: them: a checkpoint's, whose rows Spark reads without testing any (commit lines are
    #: tested as they are read, and replayed without this).
    required_fields: tuple[tuple[str, str | None, tuple[str, ...]], ...] = ()
    #: The version of the checkpoint among the rows (None: none is): its own removes are
    #: tombstones only, never the end of one of its adds.
    checkpoint_version: int | None = None


def replay_partition(
    config: ReplayConfig, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the replayed state of one partition."""
    collected = [batch for batch in batches if batch.num_rows]
    if not collected:
        return
    # Chunks stay as they arrived: rows are only ever taken by index, never copied whole.
    table = pa.Table.from_batches(collected)
    check_source_files(table, config)
    check_required_fields(table, config)
    is_file_action = pc.or_kleene(
        pc.is_valid(pc.struct_field(table["add"], "path")),
        pc.is_valid(pc.struct_field(table["remove"], "path")),
    )
    other_rows = table.filter(pc.invert(is_file_action))
    parts = [
        replay_non_file_actions(other_rows, config),
        replay_file_actions(table, pc.indices_nonzero(is_file_action), config),
    ]
    state = pa.concat_tables(
        [part for part in parts if part.num_rows] or [STATE_SCHEMA.empty_table()]
    )
    yield from state.to_batches(max_chunksize=OUTPUT_BATCH_ROWS)


def check_source_files(table: pa.Table, config: ReplayConfig) -> None:
    """Every row must come from this table's ``_delta_log`` (or its ``_sidecars``)."""
    foreign = first_foreign_source(pc.unique(table[FILE_COLUMN]).to_pylist(), config.log_dir)
    if foreign is not None:
        raise WorkerFailure(LogFileOutsideTableError(file=foreign, log_path=config.log_dir))


def check_required_fields(table: pa.Table, config: ReplayConfig) -> None:
    """A row whose action lacks one of ``config.required_fields`` is ``DELTA_CORRUPT_LOG_FILE``
    naming its file, before the replay: an add without its path would be dropped as no file
    action, and one whose deletion vector has no ``storageType`` keyed as a file without one,
    winning or losing against the wrong actions (the checkpoint's own remove of the file as it
    was before the vector)."""
    for action, descriptor, fields in config.required_fields:
        if action not in table.column_names:
            continue
        struct = table[action]
        if descriptor is not None:
            struct = pc.struct_field(struct, descriptor)  # null where the action is
        present = pc.is_valid(struct)
        for field in fields:
            missing = pc.and_(present, pc.is_null(pc.struct_field(struct, field)))
            if pc.any(missing).as_py():
                row = pc.index(missing, True).as_py()
                raise WorkerFailure(
                    corrupt_checkpoint_file(
                        table[FILE_COLUMN][row].as_py(),
                        table[VERSION_COLUMN][row].as_py(),
                        missing_field(action, descriptor, field),
                    )
                )


def first_foreign_source(sources: Iterable[str | None], log_dir: str) -> str | None:
    """The first of ``sources`` (file URIs) that is not a file of ``log_dir`` or its
    ``_sidecars``; ``None`` when all are. A missing source (``None``) counts as foreign."""
    allowed = {log_dir.rstrip("/"), posixpath.join(log_dir.rstrip("/"), "_sidecars")}
    allowed = {_comparable_dir(directory) for directory in allowed}
    # A partition holds rows of thousands of commits, nearly all in one directory: a name
    # without escapes cannot change its directory when unquoted, so that is checked once.
    checked: set[str] = set()
    for source in sources:
        if source is None:
            return str(source)
        directory, _, name = source.rpartition("/")
        plain_name = "%" not in name
        if plain_name and directory in checked:
            continue
        if _comparable_dir(posixpath.dirname(unquote(source))) not in allowed:
            return source
        if plain_name:
            checked.add(directory)
    return None


def _comparable_dir(directory: str) -> str:
    """``file:///a`` and ``file:/a`` name the same directory."""
    if directory.startswith("file:///"):
        return "file:/" + directory[len("file:///") :]
    if directory.startswith("/"):
        return "file:" + directory
    return directory


def replay_file_actions(table: pa.Table, file_rows: pa.Array, config: ReplayConfig) -> pa.Table:
    """Newest add/remove per file key among ``table``'s rows at indices ``file_rows``; adds
    live, removes tombstones while retained. Only the winners' action column is copied."""
    if len(file_rows) == 0:
        return STATE_SCHEMA.empty_table()
    adds, removes = (_rows_of(table[name], file_rows, table.num_rows) for name in ("add", "remove"))
    add_paths = pc.struct_field(adds, "path")
    keys = file_keys(
        pc.coalesce(add_paths, pc.struct_field(removes, "path")), adds, removes, config
    )
    versions = _rows_of(table[VERSION_COLUMN], file_rows, table.num_rows)
    sort_columns = {"key": keys, "version": versions}
    if config.checkpoint_version is not None:
        # Within the checkpoint, an add beats a remove of its key (delta-rs and Delta Kernel
        # read it so, as does the state over a checkpoint not replayed, ``plans.replay``); a
        # valid checkpoint never holds both.
        at_checkpoint = pc.equal(versions, pa.scalar(config.checkpoint_version, pa.int64()))
        sort_columns["checkpoint_add"] = pc.and_(at_checkpoint, pc.is_valid(add_paths))
    order = pc.sort_indices(
        pa.table(sort_columns), sort_keys=[(name, "ascending") for name in sort_columns]
    )
    sorted_keys = pc.take(keys, order)
    if isinstance(sorted_keys, pa.ChunkedArray):
        sorted_keys = sorted_keys.combine_chunks()
    is_last = pa.concat_arrays([pc.not_equal(sorted_keys[:-1], sorted_keys[1:]), pa.array([True])])
    winners = pc.filter(order, is_last)
    live, tombstones = _winning_actions(adds, removes, add_paths, winners)
    live = without_data_change(live)
    tombstones = tombstones.filter(retained_tombstones(tombstones, config))
    return pa.concat_tables(
        [
            single_action_rows("add", live),
            single_action_rows("remove", without_data_change(tombstones)),
        ]
    )


def _winning_actions(
    adds: pa.ChunkedArray, removes: pa.ChunkedArray, add_paths: pa.Array, winners: pa.Array
) -> tuple[pa.ChunkedArray, pa.ChunkedArray]:
    """The winning adds and removes; without a take when every row wins (no key repeats),
    the common case of appends, and without any copy when those rows are all adds."""
    if len(winners) == len(adds):
        is_add = pc.is_valid(add_paths)
        if pc.all(is_add).as_py():
            return adds, removes.slice(0, 0)
        return adds.filter(is_add), removes.filter(pc.invert(is_add))
    winner_is_add = pc.is_valid(pc.take(add_paths, winners))
    return (
        adds.take(pc.filter(winners, winner_is_add)),
        removes.take(pc.filter(winners, pc.invert(winner_is_add))),
    )


def _rows_of(column: pa.ChunkedArray, indices: pa.Array, num_rows: int) -> pa.ChunkedArray:
    # Copying nested structs is the costliest step of a replay: skip it when every row is kept.
    return column if len(indices) == num_rows else column.take(indices)


def _cast(column: Any, target: pa.DataType) -> Any:
    return column if column.type == target else column.cast(target)


def single_action_rows(name: str, actions: pa.Array) -> pa.Table:
    """State rows holding ``actions`` in column ``name`` and null in every other column."""
    columns = [
        _cast(actions, field.type) if field.name == name else pa.nulls(len(actions), field.type)
        for field in STATE_SCHEMA
    ]
    return pa.Table.from_arrays(columns, schema=STATE_SCHEMA)


def file_keys(paths: pa.Array, adds: pa.Array, removes: pa.Array, config: ReplayConfig) -> pa.Array:
    """``canonical path + NUL + deletion-vector unique id`` for every file action row."""
    canonical = canonical_paths(paths, config.table_root)
    dv_ids = pc.fill_null(deletion_vector_ids(adds, removes), "")
    return pc.binary_join_element_wise(canonical, dv_ids, "\x00")


def canonical_paths(paths: pa.Array, table_root: str) -> pa.Array:
    """delta-spark's canonical path of every path; computed in Python only for the paths that
    need it (a scheme, a leading slash or an escape), the rest are their own canonical form."""
    needs_work = pc.or_kleene(
        pc.or_kleene(pc.match_substring(paths, "%"), pc.match_substring(paths, ":")),
        pc.starts_with(paths, "/"),
    )
    if not pc.any(needs_work).as_py():
        return paths
    plain = paths.to_pylist()
    flags = needs_work.to_pylist()
    return pa.array(
        [
            canonical_path(p, table_root) if flag else p
            for p, flag in zip(plain, flags, strict=True)
        ],
        type=pa.string(),
    )


def deletion_vector_ids(adds: pa.Array, removes: pa.Array) -> pa.Array:
    """delta-spark's ``uniqueId``: storageType + pathOrInlineDv [+ "@" + offset]; null if no DV."""

    def dv_field(name: str) -> pa.Array:
        return pc.coalesce(
            pc.struct_field(adds, ["deletionVector", name]),
            pc.struct_field(removes, ["deletionVector", name]),
        )

    base = pc.binary_join_element_wise(dv_field("storageType"), dv_field("pathOrInlineDv"), "")
    offset = pc.cast(dv_field("offset"), pa.string())
    with_offset = pc.binary_join_element_wise(base, offset, "@")
    return pc.if_else(pc.is_valid(offset), with_offset, base)


def retained_tombstones(tombstones: pa.Array, config: ReplayConfig) -> pa.Array:
    """Which ``remove`` structs are deleted after the retention horizon (all without one)."""
    if config.min_file_retention_timestamp is None:
        return pa.repeat(pa.scalar(True), len(tombstones))
    deleted_at = pc.fill_null(
        pc.struct_field(tombstones, "deletionTimestamp"), pa.scalar(0, pa.int64())
    )
    return pc.greater(deleted_at, pa.scalar(config.min_file_retention_timestamp, pa.int64()))


def without_data_change(actions: pa.Array | pa.ChunkedArray) -> pa.ChunkedArray:
    """The same add/remove structs with ``dataChange`` set to false (no copy of the rest)."""
    chunks = actions.chunks if isinstance(actions, pa.ChunkedArray) else [actions]
    return pa.chunked_array([_chunk_without_data_change(chunk) for chunk in chunks], actions.type)


def _chunk_without_data_change(struct: pa.StructArray) -> pa.StructArray:
    # .field(i) is the raw child (no copy); the parent's validity is passed on as the mask.
    children = [
        pa.repeat(pa.scalar(False), len(struct))
        if field.name == "dataChange"
        else struct.field(index)
        for index, field in enumerate(struct.type)
    ]
    return pa.StructArray.from_arrays(children, fields=list(struct.type), mask=struct.is_null())


def _decoded_rows(rows: pa.Table) -> list[dict[str, Any]]:
    """The state columns of ``rows`` as Python values. A string that is not UTF-8 (from a
    checkpoint: Spark's parquet reader passes its bytes on) is ``DELTA_CORRUPT_LOG_FILE``
    naming its file and column, not a ``UnicodeDecodeError``."""
    names = [f.name for f in STATE_SCHEMA]
    try:
        decoded: list[dict[str, Any]] = rows.select(names).to_pylist()
    except UnicodeDecodeError:
        raise WorkerFailure(_first_not_utf8(rows, names)) from None
    return decoded


def _first_not_utf8(rows: pa.Table, names: list[str]) -> CorruptLogFileError:
    """The error naming the file and column of the first of ``rows`` (a few non-file actions)
    holding a string that is not UTF-8."""
    for index in range(rows.num_rows):
        row = rows.slice(index, 1)
        for name in names:
            try:
                row[name].to_pylist()
            except UnicodeDecodeError:
                file, version = row[FILE_COLUMN][0].as_py(), row[VERSION_COLUMN][0].as_py()
                return checkpoint_value_not_utf8(file, version, name)
    return checkpoint_value_not_utf8(
        rows[FILE_COLUMN][0].as_py(), rows[VERSION_COLUMN][0].as_py(), None
    )


def replay_non_file_actions(rows: pa.Table, config: ReplayConfig) -> pa.Table:
    """Latest protocol and metaData, txn per appId, domainMetadata per domain."""
    if rows.num_rows == 0:
        return STATE_SCHEMA.empty_table()
    order = pc.sort_indices(rows[VERSION_COLUMN], sort_keys=[("", "ascending")])
    ordered = rows.take(order)
    latest: dict[str, Any] = {}
    transactions: dict[str, Any] = {}
    domains: dict[str, Any] = {}
    for row in _decoded_rows(ordered):
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
