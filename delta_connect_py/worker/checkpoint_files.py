"""Publishing checkpoints and deleting expired log files, on the server, with pyarrow.fs.

Responsibility: the mapInArrow bodies that touch ``_delta_log`` directly:
:func:`publish_checkpoint` turns the parquet files Spark's writer left in a staging folder into
a checkpoint under Delta's exact names (classic, multi-part, or a UUID-named V2 checkpoint: the
staged files become ``_sidecars/`` files and a top-level JSON file lists them with the non-file
actions) and then writes ``_last_checkpoint`` (with delta-spark's ``v2Checkpoint`` for a
UUID-named checkpoint; no hint for a cleanup's compatibility copy of an existing
checkpoint); :func:`delete_log_files` deletes (or, dry run, only lists) expired log files,
garbage sidecars and stale staging folders; :func:`discard_staging` removes a staging folder
after a failed write.

Invariants: a final checkpoint name only ever appears through a rename of a complete file
(atomic on POSIX file systems; a single PUT on object stores), and only after the number of
``add`` rows in the staged files equals the snapshot's ``numOfFiles`` (else
``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` and nothing is renamed). Sidecars get fresh unique names,
so they are invisible to readers until the top-level file naming them is renamed into place.
``_last_checkpoint`` is written to a temporary name and renamed, only after every part exists
under its final name, and never replaces a hint for a newer version. The staging folder is
removed whatever happens, except when the process dies: a folder left by a killed server is
hidden from every reader (``_`` prefix, no Delta log pattern) and removed by a later publish or
``cleanup_metadata`` once nothing has written into it for :data:`STALE_STAGING_MS` (a live
writer's folder is never that old). Checkpoint content is deterministic per (version, layout),
so a concurrent or repeated publish of the same classic or multi-part checkpoint renames over
equal content and leaves a valid table.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from delta_connect_py.errors import CheckpointSnapshotMismatchError
from delta_connect_py.protocol.cleanup import SidecarFile, unreferenced_sidecars
from delta_connect_py.protocol.filenames import (
    checkpoint_name,
    multipart_checkpoint_name,
    uuid_checkpoint_name,
)
from delta_connect_py.protocol.last_checkpoint import (
    LastCheckpoint,
    parse_last_checkpoint,
    serialize_last_checkpoint,
)
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.log_files import (
    LAST_CHECKPOINT_NAME,
    filesystem_and_path,
    path_in_store,
)
from delta_connect_py.worker.stores import NO_STORAGE_OPTIONS, StorageOptions

STAGING_PREFIX = "_delta_connect_staging."
SIDECAR_DIR = "_sidecars"
#: delta-spark's ``lastCheckpoint`` thresholds: a ``v2Checkpoint`` hint lists the non-file
#: actions, and the sidecars, only when there are at most this many of each.
MAX_HINT_ENTRIES = 30
#: A staging folder nothing has written into for this long belongs to a dead writer.
STALE_STAGING_MS = 86_400_000
_SPARK_PART = re.compile(r"part-(\d+)-.*\.parquet")

PUBLISHED_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("adds", pa.int64()),
        ("bytes", pa.int64()),
        ("last_checkpoint", pa.string()),
    ]
)
DELETED_SCHEMA = pa.schema([("path", pa.string())])


@dataclass(frozen=True)
class PublishRequest:
    """One checkpoint to publish; primitives only (pickled to the server)."""

    table_root: str
    log_dir: str
    staging_dir: str
    version: int
    num_parts: int
    multi_part: bool
    #: The snapshot's ``numOfFiles`` the staged add rows must equal; None: not checked (a
    #: compatibility copy of an existing checkpoint).
    expected_adds: int | None
    checkpoint_schema: str | None
    #: UUID-named V2 checkpoint: staged parts become sidecars of a top-level JSON file.
    sidecars: bool = False
    checkpoint_uuid: str = ""
    #: The top-level file's non-file actions (protocol, metaData, txn, domainMetadata) as
    #: JSON lines, and its ``checkpointMetadata`` line.
    non_file_actions: tuple[str, ...] = ()
    #: The client's clock (ms): stale staging folders are judged against it.
    now_ms: int = 0
    #: Write ``_last_checkpoint`` after the parts (not for a compatibility copy).
    write_hint: bool = True
    #: Test hook: fail after renaming this many parts (simulates a crash mid-publish).
    fail_after_parts: int | None = None
    #: The worker's credentials for the store (``DeltaTable.for_path(storage_options=)``).
    storage_options: StorageOptions = NO_STORAGE_OPTIONS


@dataclass(frozen=True)
class DeleteRequest:
    """Expired files to delete and how to sweep sidecars; primitives only."""

    log_dir: str
    paths: tuple[str, ...]
    retained_checkpoints: tuple[str, ...]
    sweep_sidecars: bool
    cutoff_ms: int
    dry_run: bool
    #: Staging folders whose newest file is older than this (ms) are removed; None: keep all.
    stale_staging_before_ms: int | None = None
    #: The worker's credentials for the store (``DeltaTable.for_path(storage_options=)``).
    storage_options: StorageOptions = NO_STORAGE_OPTIONS


@dataclass(frozen=True)
class _Staged:
    """One staged part file: its path (None: Spark wrote no file for an empty partition)."""

    path: str | None
    rows: int
    adds: int


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def _staged_files(fs: pa.fs.FileSystem, staging: str, num_parts: int) -> dict[int, str]:
    """Staged part files by Spark partition id (empty partitions may have none)."""
    from pyarrow.fs import FileSelector

    by_part: dict[int, str] = {}
    for info in fs.get_file_info(FileSelector(staging)):
        match = _SPARK_PART.fullmatch(info.base_name)
        if match is None:
            continue
        part = int(match[1])
        if part in by_part or part >= num_parts:
            raise RuntimeError(f"unexpected staged checkpoint file {info.path}")
        by_part[part] = info.path
    if not by_part:
        raise RuntimeError(f"no staged checkpoint file in {staging}")
    return by_part


def _add_path_column(metadata: pq.FileMetaData) -> int | None:
    for index in range(metadata.num_columns):
        if metadata.schema.column(index).path == "add.path":
            return index
    return None


def _count(fs: pa.fs.FileSystem, path: str) -> tuple[int, int]:
    """(rows, add rows) of one staged file, from the footer when its statistics allow.

    Every row holds one action and a live add always has a path, so the add rows are the rows
    whose ``add.path`` is not null; the footer's null counts give that without reading data.
    """
    metadata = pq.read_metadata(path, filesystem=fs)
    column = _add_path_column(metadata)
    if column is None:
        return metadata.num_rows, 0
    nulls = 0
    for group in range(metadata.num_row_groups):
        stats = metadata.row_group(group).column(column).statistics
        if stats is None or not stats.has_null_count:
            paths = pq.read_table(path, columns=["add.path"], filesystem=fs).column(0)
            return metadata.num_rows, len(paths) - paths.null_count
        nulls += stats.null_count
    return metadata.num_rows, metadata.num_rows - nulls


def _stage(fs: pa.fs.FileSystem, staging: str, request: PublishRequest) -> list[_Staged]:
    """Every part, counted, and the add count checked against the snapshot's."""
    by_part = _staged_files(fs, staging, request.num_parts)
    staged = []
    for part in range(request.num_parts):
        path = by_part.get(part)
        rows, adds = (0, 0) if path is None else _count(fs, path)
        staged.append(_Staged(path, rows, adds))
    adds = sum(s.adds for s in staged)
    if request.expected_adds is not None and adds != request.expected_adds:
        raise WorkerFailure(
            CheckpointSnapshotMismatchError(
                version=request.version,
                path=request.table_root,
                written=adds,
                expected=request.expected_adds,
            )
        )
    return staged


def _write_empty_part(fs: pa.fs.FileSystem, staging: str, part: int, schema: pa.Schema) -> str:
    path = _join(staging, f"part-{part:05d}-empty.snappy.parquet")
    pq.write_table(schema.empty_table(), path, filesystem=fs, compression="snappy")
    return path


def _with_empty_parts(fs: pa.fs.FileSystem, staging: str, staged: list[_Staged]) -> list[str]:
    """Paths of every part; a multi-part set needs a file even for an empty partition."""
    schema = pq.read_schema(next(s.path for s in staged if s.path), filesystem=fs)
    return [
        s.path if s.path is not None else _write_empty_part(fs, staging, part, schema)
        for part, s in enumerate(staged)
    ]


def _final_names(request: PublishRequest) -> list[str]:
    if not request.multi_part:
        return [checkpoint_name(request.version)]
    return [
        multipart_checkpoint_name(request.version, part, request.num_parts)
        for part in range(1, request.num_parts + 1)
    ]


def _sidecar_name(request: PublishRequest, part: int) -> str:
    """delta-spark's sidecar name: ``<v>.checkpoint.<part>.<parts>.<uuid>.parquet``."""
    return (
        f"{request.version:020d}.checkpoint.{part + 1:010d}.{request.num_parts:010d}."
        f"{uuid.uuid4()}.parquet"
    )


def _hint_text(
    request: PublishRequest,
    rows: int,
    adds: int,
    size: int,
    v2_checkpoint: dict[str, Any] | None = None,
) -> str:
    schema = None if request.checkpoint_schema is None else json.loads(request.checkpoint_schema)
    return serialize_last_checkpoint(
        LastCheckpoint(
            version=request.version,
            size=rows,
            parts=request.num_parts if request.multi_part else None,
            size_in_bytes=size,
            num_of_add_files=adds,
            checkpoint_schema=schema,
            v2_checkpoint=v2_checkpoint,
        )
    )


def _mtime_ms(info: pa.fs.FileInfo) -> int:
    """A file's modification time in ms (0 when the file system gives none)."""
    return (info.mtime_ns or 0) // 1_000_000


def _file_entry(name: str, info: pa.fs.FileInfo) -> dict[str, Any]:
    """A file as ``sidecar`` actions and ``_last_checkpoint``'s ``v2Checkpoint`` name it."""
    return {
        "path": name,
        "sizeInBytes": info.size,
        "modificationTime": _mtime_ms(info),
    }


def _v2_checkpoint_hint(
    top: tuple[str, pa.fs.FileInfo], non_file_actions: list[str], sidecars: list[dict[str, Any]]
) -> dict[str, Any]:
    """delta-spark's ``LastCheckpointV2`` for a UUID-named checkpoint: its top-level file, and
    its non-file actions and sidecars where each are at most :data:`MAX_HINT_ENTRIES` (else
    left out: a reader then reads the top-level file)."""
    hint = _file_entry(*top)
    if len(non_file_actions) <= MAX_HINT_ENTRIES:
        hint["nonFileActions"] = [json.loads(line) for line in non_file_actions]
    if len(sidecars) <= MAX_HINT_ENTRIES:
        hint["sidecarFiles"] = sidecars
    return hint


def _current_hint_version(fs: pa.fs.FileSystem, path: str) -> int | None:
    try:
        with fs.open_input_stream(path) as stream:
            return parse_last_checkpoint(bytes(stream.read()).decode("utf-8")).version
    except (OSError, ValueError):
        return None


def _write_via_rename(fs: pa.fs.FileSystem, directory: str, final: str, data: bytes) -> None:
    """Write ``data`` to a temporary ``_``-name in ``directory``, then rename it to ``final``."""
    temporary = _join(directory, f"_delta_connect.{uuid.uuid4().hex}.tmp")
    try:
        with fs.open_output_stream(temporary, compression=None) as out:
            out.write(data)
        fs.move(temporary, final)
    finally:
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(temporary)


def write_last_checkpoint(fs: pa.fs.FileSystem, log_dir: str, text: str, version: int) -> bool:
    """Atomically replace ``_last_checkpoint`` unless it names a newer version."""
    final = _join(log_dir, LAST_CHECKPOINT_NAME)
    current = _current_hint_version(fs, final)
    if current is not None and current > version:
        return False
    _write_via_rename(fs, log_dir, final, text.encode("utf-8"))
    return True


def _rename_all(
    fs: pa.fs.FileSystem, moves: list[tuple[str, str]], request: PublishRequest
) -> None:
    for done, (source, target) in enumerate(moves, start=1):
        fs.move(source, target)
        if request.fail_after_parts is not None and done >= request.fail_after_parts:
            raise RuntimeError(f"injected failure after publishing {done} checkpoint part(s)")


@dataclass(frozen=True)
class _Published:
    """What one publish made visible: per file (top-level first), and the hint written."""

    uris: list[str]
    rows: list[int]
    adds: list[int]
    sizes: list[int]
    hint: str | None


def _publish_classic(
    fs: pa.fs.FileSystem, staging: str, log_dir: str, request: PublishRequest
) -> _Published:
    staged = _stage(fs, staging, request)
    sources = _with_empty_parts(fs, staging, staged)
    finals = [_join(log_dir, name) for name in _final_names(request)]
    _rename_all(fs, list(zip(sources, finals, strict=True)), request)
    sizes = [info.size for info in fs.get_file_info(finals)]
    rows, adds = [s.rows for s in staged], [s.adds for s in staged]
    uris = [_join(request.log_dir, name) for name in _final_names(request)]
    if not request.write_hint:
        return _Published(uris, rows, adds, sizes, None)
    text = _hint_text(request, sum(rows), sum(adds), sum(sizes))
    written = write_last_checkpoint(fs, log_dir, text, request.version)
    return _Published(uris, rows, adds, sizes, text if written else None)


def _publish_sidecars(
    fs: pa.fs.FileSystem, staging: str, log_dir: str, request: PublishRequest
) -> _Published:
    """Sidecars first (unique names, unreferenced until the top-level file exists), then the
    top-level JSON file by rename, then the hint."""
    staged = [s for s in _stage(fs, staging, request) if s.path is not None and s.rows]
    sidecar_dir = _join(log_dir, SIDECAR_DIR)
    fs.create_dir(sidecar_dir, recursive=True)
    names = [_sidecar_name(request, part) for part in range(len(staged))]
    finals = [_join(sidecar_dir, name) for name in names]
    _rename_all(fs, [(s.path or "", f) for s, f in zip(staged, finals, strict=True)], request)
    infos = fs.get_file_info(finals)
    entries = [_file_entry(name, info) for name, info in zip(names, infos, strict=True)]
    lines = [*request.non_file_actions]
    lines += [json.dumps({"sidecar": entry}, separators=(",", ":")) for entry in entries]
    top_name = uuid_checkpoint_name(request.version, request.checkpoint_uuid, "json")
    top = _join(log_dir, top_name)
    _write_via_rename(fs, log_dir, top, ("\n".join(lines) + "\n").encode("utf-8"))
    top_info = fs.get_file_info(top)
    sizes = [top_info.size, *[info.size for info in infos]]
    rows = [len(lines), *[s.rows for s in staged]]
    adds = [0, *[s.adds for s in staged]]
    v2 = _v2_checkpoint_hint((top_name, top_info), list(request.non_file_actions), entries)
    text = _hint_text(request, sum(rows), sum(adds), sum(sizes), v2)
    written = write_last_checkpoint(fs, log_dir, text, request.version)
    sidecar_uris = [_join(_join(request.log_dir, SIDECAR_DIR), name) for name in names]
    uris = [_join(request.log_dir, top_name), *sidecar_uris]
    return _Published(uris, rows, adds, sizes, text if written else None)


def _has_rows(batches: Iterable[pa.RecordBatch]) -> bool:
    """Whether this task got the one driving row (other, empty tasks must do nothing)."""
    return any(batch.num_rows for batch in batches)


def publish_checkpoint(
    request: PublishRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): validate, rename parts, write the hint, clean up."""
    if not _has_rows(batches):
        return
    fs, staging = filesystem_and_path(request.staging_dir, request.storage_options)
    log_dir = path_in_store(request.log_dir)
    publish = _publish_sidecars if request.sidecars else _publish_classic
    try:
        published = publish(fs, staging, log_dir, request)
    finally:
        _remove_dir(fs, staging)
    # Best effort, after our own publish: folders left by writers that died long ago.
    with contextlib.suppress(OSError):
        _stale_staging(fs, log_dir, request.log_dir, request.now_ms - STALE_STAGING_MS, True)
    table = pa.table(
        {
            "path": published.uris,
            "rows": published.rows,
            "adds": published.adds,
            "bytes": published.sizes,
            "last_checkpoint": [published.hint] * len(published.uris),
        },
        schema=PUBLISHED_SCHEMA,
    )
    yield from table.to_batches()


def _remove_dir(fs: pa.fs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def _newest_mtime_ms(fs: pa.fs.FileSystem, folder: pa.fs.FileInfo) -> int:
    from pyarrow.fs import FileSelector

    infos = [folder, *fs.get_file_info(FileSelector(folder.path, recursive=True))]
    return max(_mtime_ms(info) for info in infos)


def _stale_staging(
    fs: pa.fs.FileSystem, log_dir: str, log_uri: str, before_ms: int, delete: bool
) -> list[str]:
    """Staging folders (URIs) nothing has written into since ``before_ms``; removed if
    ``delete``."""
    from pyarrow.fs import FileSelector, FileType

    stale = []
    for info in fs.get_file_info(FileSelector(log_dir)):
        if info.type != FileType.Directory or not info.base_name.startswith(STAGING_PREFIX):
            continue
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by its own writer
            if _newest_mtime_ms(fs, info) < before_ms:
                if delete:
                    _remove_dir(fs, info.path)
                stale.append(_join(log_uri, info.base_name))
    return stale


def discard_staging(
    staging_dir: str,
    batches: Iterable[pa.RecordBatch],
    storage_options: StorageOptions = NO_STORAGE_OPTIONS,
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: remove a staging folder left by a failed write (if it exists)."""
    if not _has_rows(batches):
        return
    fs, staging = filesystem_and_path(staging_dir, storage_options)
    _remove_dir(fs, staging)
    yield pa.RecordBatch.from_pylist([{"path": staging_dir}], schema=DELETED_SCHEMA)


def _sidecar_references(fs: pa.fs.FileSystem, path: str) -> list[str]:
    """``sidecar.path`` values of one checkpoint file (parquet or V2 JSON)."""
    if path.endswith(".json"):
        with fs.open_input_stream(path) as stream:
            lines = bytes(stream.read()).decode("utf-8").splitlines()
        actions = [json.loads(line) for line in lines if line.strip()]
        return [a["sidecar"]["path"] for a in actions if isinstance(a.get("sidecar"), dict)]
    if "sidecar" not in pq.read_schema(path, filesystem=fs).names:
        return []
    column = pq.read_table(path, columns=["sidecar.path"], filesystem=fs).column(0)
    return [value for value in column.to_pylist() if value is not None]


def _sidecars_present(fs: pa.fs.FileSystem, log_dir: str) -> list[SidecarFile]:
    from pyarrow.fs import FileSelector, FileType

    selector = FileSelector(_join(log_dir, SIDECAR_DIR), allow_not_found=True)
    return [
        SidecarFile(info.base_name, _mtime_ms(info))
        for info in fs.get_file_info(selector)
        if info.type == FileType.File
    ]


def _garbage_sidecars(fs: pa.fs.FileSystem, log_dir: str, request: DeleteRequest) -> list[str]:
    referenced: list[str] = []
    for uri in request.retained_checkpoints:
        referenced += _sidecar_references(fs, path_in_store(uri))
    garbage = unreferenced_sidecars(_sidecars_present(fs, log_dir), referenced, request.cutoff_ms)
    return [_join(_join(request.log_dir, SIDECAR_DIR), sidecar.name) for sidecar in garbage]


def _delete(fs: pa.fs.FileSystem, uri: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(path_in_store(uri))


def delete_log_files(
    request: DeleteRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): delete expired files in order, then garbage sidecars,
    then stale staging folders."""
    if not _has_rows(batches):
        return
    fs, log_dir = filesystem_and_path(request.log_dir, request.storage_options)
    for uri in request.paths:
        if not request.dry_run:
            _delete(fs, uri)
    sidecars = _garbage_sidecars(fs, log_dir, request) if request.sweep_sidecars else []
    for uri in sidecars:
        if not request.dry_run:
            _delete(fs, uri)
    staging: list[str] = []
    if request.stale_staging_before_ms is not None:
        before = request.stale_staging_before_ms
        staging = _stale_staging(fs, log_dir, request.log_dir, before, not request.dry_run)
    yield pa.RecordBatch.from_pylist(
        [{"path": uri} for uri in [*request.paths, *sidecars, *staging]], schema=DELETED_SCHEMA
    )
