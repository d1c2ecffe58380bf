"""A few local commits read, parsed and replayed in one Python task (no JVM parse, no shuffle).

Responsibility: ``replay_commit_files``, a mapInArrow body over a single partition holding the
checkpoint's non-file actions (state rows) and one row per commit file to read. Each commit's
state actions are parsed by pyarrow's JSON reader, and everything is replayed by
``worker.replay.replay_partition``: all actions are in this one partition, so every file key's
actions meet as replay requires.

Why: after a checkpoint a snapshot replays a few large commits; Spark's JSON source, a shuffle by
file key and the Arrow conversion into and out of Python cost several times pyarrow's
multi-threaded parse in the worker that replays anyway (L's 9 commits of 10k adds: the replay
job 1.6-2.9 s against about 1 s).

Invariants: the rows equal what Spark's JSON reader makes of the same lines, or the task fails
with ``CommitParseFallbackError`` and the caller reads the commits with Spark instead. It fails
when pyarrow cannot parse a line as the state schema (a type Spark would coerce, a malformed
line, a duplicate key: Spark then decides) and when a string map (``partitionValues``, ``tags``,
``configuration``, ``format.options``) cannot be rebuilt exactly. pyarrow cannot read JSON
objects as maps, so it reads them as structs; a struct keeps neither which keys a row had nor a
row's key order, so a map is rebuilt only when every present object has every key with a
string value, in the first object's order. Key order is not compared: a map's entries are
unordered by the protocol.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.json as pj

from delta_connect_py.errors import CommitParseFallbackError, CorruptLogFileError
from delta_connect_py.protocol.actions import FILE_COLUMN, STATE_SCHEMA, VERSION_COLUMN
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.log_files import file_uri, read_bytes
from delta_connect_py.worker.replay import ReplayConfig, replay_partition

#: Marks the input rows that name a commit file to read (``version``, ``_file``) rather than
#: hold an action.
READ_FILE_COLUMN = "_read_file"
#: Lines starting so hold one action that is not part of the table state (see
#: ``plans.loading.NON_STATE_LINE_PREFIXES``); left out before parsing.
SKIPPED_LINE_PREFIXES = (b'{"commitInfo"', b'{"cdc"')
#: pyarrow parses blocks of this size in parallel.
BLOCK_BYTES = 4 << 20


@dataclass(frozen=True)
class CommitFilesReplay:
    """What the task needs besides its rows; primitives only (it is pickled to the server)."""

    config: ReplayConfig
    table_path: str


def replay_commit_files(
    request: CommitFilesReplay, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the replayed state of the input's actions plus the named commits'."""
    rows = pa.Table.from_batches([batch for batch in batches if batch.num_rows])
    if rows.num_rows == 0:
        return
    # The rows are in one partition (see module).
    to_read = rows[READ_FILE_COLUMN].to_pylist()
    files = [
        (version, path)
        for version, path, read in zip(
            rows[VERSION_COLUMN].to_pylist(), rows[FILE_COLUMN].to_pylist(), to_read, strict=True
        )
        if read
    ]
    given = rows.filter(pa.array([not read for read in to_read])).drop_columns([READ_FILE_COLUMN])
    parts = [given, *(commit_state_rows(version, path, request) for version, path in files)]
    actions = pa.concat_tables([part.cast(ACTION_ROWS_SCHEMA) for part in parts if part.num_rows])
    yield from replay_partition(request.config, actions.to_batches())


def _without_maps(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every map field left out: pyarrow infers those (see module)."""
    if pa.types.is_struct(data_type):
        return pa.struct(
            [
                pa.field(field.name, _without_maps(field.type))
                for field in data_type
                if not pa.types.is_map(field.type)
            ]
        )
    return data_type


_PARSE_SCHEMA = pa.schema([pa.field(f.name, _without_maps(f.type)) for f in STATE_SCHEMA])
#: The action rows replay takes: the state actions and where each came from.
ACTION_ROWS_SCHEMA = pa.schema(
    [*STATE_SCHEMA, pa.field(VERSION_COLUMN, pa.int64()), pa.field(FILE_COLUMN, pa.string())]
)


def commit_state_rows(version: int, path: str, request: CommitFilesReplay) -> pa.Table:
    """The state actions of one commit file as ``STATE_SCHEMA`` rows plus version and file."""
    lines = _state_lines(path, request)
    if not lines:
        return ACTION_ROWS_SCHEMA.empty_table()
    try:
        parsed = pj.read_json(
            io.BytesIO(b"\n".join(lines)),
            read_options=pj.ReadOptions(block_size=BLOCK_BYTES),
            parse_options=pj.ParseOptions(
                explicit_schema=_PARSE_SCHEMA, unexpected_field_behavior="infer"
            ),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise _fallback(path, f"pyarrow cannot parse it: {exc}") from exc
    columns = [_conformed(parsed[field.name], field.type, path) for field in STATE_SCHEMA]
    rows = parsed.num_rows
    columns += [
        pa.chunked_array([pa.repeat(pa.scalar(version, pa.int64()), rows)]),
        pa.chunked_array([pa.repeat(pa.scalar(file_uri(path), pa.string()), rows)]),
    ]
    return pa.Table.from_arrays(columns, schema=ACTION_ROWS_SCHEMA)


def _state_lines(path: str, request: CommitFilesReplay) -> list[bytes]:
    content = read_bytes(path)
    if content is None:
        raise WorkerFailure(
            CorruptLogFileError(
                file=path, path=request.table_path, reason="it disappeared while read"
            )
        )
    # Spark's text reader splits at \n, \r and \r\n, as splitlines does for bytes.
    return [
        line
        for line in content.splitlines()
        if line and not line.isspace() and not line.startswith(SKIPPED_LINE_PREFIXES)
    ]


def _fallback(path: str, reason: str) -> WorkerFailure:
    return WorkerFailure(CommitParseFallbackError(file=path, reason=reason))


def _conformed(column: pa.ChunkedArray, target: pa.DataType, path: str) -> pa.ChunkedArray:
    return pa.chunked_array(
        [_conformed_chunk(chunk, target, path) for chunk in column.chunks], target
    )


def _conformed_chunk(array: pa.Array, target: pa.DataType, path: str) -> pa.Array:
    """``array`` (as parsed) as ``target``: maps rebuilt from inferred structs."""
    if pa.types.is_map(target):
        return _map_from_struct(array, target, path)
    if pa.types.is_struct(target):
        assert isinstance(array, pa.StructArray)
        present = {field.name for field in array.type}
        children = [
            _conformed_chunk(array.field(field.name), field.type, path)
            if field.name in present
            else pa.nulls(len(array), field.type)
            for field in target
        ]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    return array if array.type == target else array.cast(target)


def _map_from_struct(array: pa.Array, target: pa.MapType, path: str) -> pa.Array:
    """A string map per row from the struct pyarrow inferred for the JSON objects."""
    if pa.types.is_null(array.type):  # every object absent or null
        return pa.nulls(len(array), target)
    if not pa.types.is_struct(array.type):
        raise _fallback(path, f"a map field was parsed as {array.type}")
    assert isinstance(array, pa.StructArray)
    names = [field.name for field in array.type]
    valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    values = []
    for index, field in enumerate(array.type):
        child = array.field(index)
        if not (pa.types.is_string(field.type) or pa.types.is_null(field.type)):
            raise _fallback(path, f"map value {field.name!r} is {field.type}, not a string")
        # A null value in a present object may be an absent key: the struct cannot tell.
        if np.any(valid & ~np.asarray(child.is_valid().to_numpy(zero_copy_only=False))):
            raise _fallback(path, f"map key {field.name!r} is absent or null in some object")
        values.append(child.cast(pa.string()))
    rows = np.flatnonzero(valid)
    counts = np.where(valid, len(names), 0)
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    keys = pa.array(np.tile(np.array(names, dtype=object), len(rows)), pa.string())
    # Entry j of the i-th present row is value j of that row: row-major over the children.
    stacked = pa.concat_arrays(values) if values else pa.array([], pa.string())
    order = (np.arange(len(names))[None, :] * len(array) + rows[:, None]).ravel()
    items = stacked.take(pa.array(order, pa.int64()))
    return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=pa.array(~valid))
