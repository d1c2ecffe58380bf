"""Publishing checkpoints and deleting expired log files, on the server, with pyarrow.fs.

Responsibility: the mapInArrow bodies that touch ``_delta_log`` directly:
:func:`publish_checkpoint` turns the parquet files Spark's writer left in a staging folder into
a checkpoint under Delta's exact names and then writes ``_last_checkpoint``;
:func:`delete_log_files` deletes (or, dry run, only lists) expired log files and garbage
sidecars; :func:`discard_staging` removes a staging folder after a failed write.

Invariants: a final checkpoint name only ever appears through a rename of a complete file
(atomic on POSIX file systems; a single PUT on object stores), and only after the number of
``add`` rows in the staged files equals the snapshot's ``numOfFiles`` (else
``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` and nothing is renamed). ``_last_checkpoint`` is written
to a temporary name and renamed, only after every part exists under its final name, and never
replaces a hint for a newer version. The staging folder is removed whatever happens. Checkpoint
content is deterministic per (version, number of parts), so a concurrent or repeated publish
of the same checkpoint renames over equal content and leaves a valid table. Staging and
temporary names start with ``_`` (hidden from Spark readers) and match no Delta log pattern.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq

from delta_connect_py.errors import CheckpointSnapshotMismatchError
from delta_connect_py.protocol.cleanup import SidecarFile, unreferenced_sidecars
from delta_connect_py.protocol.filenames import checkpoint_name, multipart_checkpoint_name
from delta_connect_py.protocol.last_checkpoint import (
    LastCheckpoint,
    parse_last_checkpoint,
    serialize_last_checkpoint,
)
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.log_files import LAST_CHECKPOINT_NAME, filesystem_and_path

STAGING_PREFIX = "_delta_connect_staging."
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
    expected_adds: int
    checkpoint_schema: str | None
    #: Test hook: fail after renaming this many parts (simulates a crash mid-publish).
    fail_after_parts: int | None = None


@dataclass(frozen=True)
class DeleteRequest:
    """Expired files to delete and how to sweep sidecars; primitives only."""

    log_dir: str
    paths: tuple[str, ...]
    retained_checkpoints: tuple[str, ...]
    sweep_sidecars: bool
    cutoff_ms: int
    dry_run: bool


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def _staged_parts(fs: pa.fs.FileSystem, staging: str, num_parts: int) -> list[str]:
    """Staged part files by Spark partition id; empty partitions get an empty parquet file."""
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
    schema = pq.read_schema(next(iter(by_part.values())), filesystem=fs)
    for part in range(num_parts):
        if part not in by_part:
            by_part[part] = _write_empty_part(fs, staging, part, schema)
    return [by_part[part] for part in range(num_parts)]


def _write_empty_part(fs: pa.fs.FileSystem, staging: str, part: int, schema: pa.Schema) -> str:
    path = _join(staging, f"part-{part:05d}-empty.snappy.parquet")
    pq.write_table(
        schema.empty_table(),
        path,
        filesystem=fs,
        compression="snappy",
        use_deprecated_int96_timestamps=True,
    )
    return path


def _count(fs: pa.fs.FileSystem, path: str) -> tuple[int, int]:
    """(rows, add rows) of one staged file."""
    rows = pq.read_metadata(path, filesystem=fs).num_rows
    paths = pq.read_table(path, columns=["add.path"], filesystem=fs).column(0)
    return rows, len(paths) - paths.null_count


def _final_names(request: PublishRequest) -> list[str]:
    if not request.multi_part:
        return [checkpoint_name(request.version)]
    return [
        multipart_checkpoint_name(request.version, part, request.num_parts)
        for part in range(1, request.num_parts + 1)
    ]


def _hint_text(request: PublishRequest, rows: int, adds: int, size: int) -> str:
    schema = None if request.checkpoint_schema is None else json.loads(request.checkpoint_schema)
    return serialize_last_checkpoint(
        LastCheckpoint(
            version=request.version,
            size=rows,
            parts=request.num_parts if request.multi_part else None,
            size_in_bytes=size,
            num_of_add_files=adds,
            checkpoint_schema=schema,
        )
    )


def _current_hint_version(fs: pa.fs.FileSystem, path: str) -> int | None:
    try:
        with fs.open_input_stream(path) as stream:
            return parse_last_checkpoint(bytes(stream.read()).decode("utf-8")).version
    except (OSError, ValueError):
        return None


def write_last_checkpoint(fs: pa.fs.FileSystem, log_dir: str, text: str, version: int) -> bool:
    """Atomically replace ``_last_checkpoint`` unless it names a newer version."""
    final = _join(log_dir, LAST_CHECKPOINT_NAME)
    current = _current_hint_version(fs, final)
    if current is not None and current > version:
        return False
    temporary = _join(log_dir, f"{LAST_CHECKPOINT_NAME}.{uuid.uuid4().hex}.tmp")
    with fs.open_output_stream(temporary, compression=None) as out:
        out.write(text.encode("utf-8"))
    fs.move(temporary, final)
    return True


def _publish(fs: pa.fs.FileSystem, staging: str, log_dir: str, request: PublishRequest) -> pa.Table:
    staged = _staged_parts(fs, staging, request.num_parts)
    counts = [_count(fs, path) for path in staged]
    rows, adds = sum(c[0] for c in counts), sum(c[1] for c in counts)
    if adds != request.expected_adds:
        raise WorkerFailure(
            CheckpointSnapshotMismatchError(
                version=request.version,
                path=request.table_root,
                written=adds,
                expected=request.expected_adds,
            )
        )
    finals = [_join(log_dir, name) for name in _final_names(request)]
    for done, (source, target) in enumerate(zip(staged, finals, strict=True), start=1):
        fs.move(source, target)
        if request.fail_after_parts is not None and done >= request.fail_after_parts:
            raise RuntimeError(f"injected failure after publishing {done} checkpoint part(s)")
    sizes = [info.size for info in fs.get_file_info(finals)]
    text = _hint_text(request, rows, adds, sum(sizes))
    written = write_last_checkpoint(fs, log_dir, text, request.version)
    uris = [_join(request.log_dir, name) for name in _final_names(request)]
    return pa.table(
        {
            "path": uris,
            "rows": [c[0] for c in counts],
            "adds": [c[1] for c in counts],
            "bytes": sizes,
            "last_checkpoint": [text if written else None] * len(uris),
        },
        schema=PUBLISHED_SCHEMA,
    )


def _has_rows(batches: Iterable[pa.RecordBatch]) -> bool:
    """Whether this task got the one driving row (other, empty tasks must do nothing)."""
    return any(batch.num_rows for batch in batches)


def publish_checkpoint(
    request: PublishRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): validate, rename parts, write the hint, clean up."""
    if not _has_rows(batches):
        return
    fs, staging = filesystem_and_path(request.staging_dir)
    _, log_dir = filesystem_and_path(request.log_dir)
    try:
        published = _publish(fs, staging, log_dir, request)
    finally:
        _remove_dir(fs, staging)
    yield from published.to_batches()


def _remove_dir(fs: pa.fs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def discard_staging(
    staging_dir: str, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: remove a staging folder left by a failed write (if it exists)."""
    if not _has_rows(batches):
        return
    fs, staging = filesystem_and_path(staging_dir)
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

    selector = FileSelector(_join(log_dir, "_sidecars"), allow_not_found=True)
    return [
        SidecarFile(info.base_name, (info.mtime_ns or 0) // 1_000_000)
        for info in fs.get_file_info(selector)
        if info.type == FileType.File
    ]


def _garbage_sidecars(fs: pa.fs.FileSystem, log_dir: str, request: DeleteRequest) -> list[str]:
    referenced: list[str] = []
    for uri in request.retained_checkpoints:
        referenced += _sidecar_references(fs, filesystem_and_path(uri)[1])
    garbage = unreferenced_sidecars(_sidecars_present(fs, log_dir), referenced, request.cutoff_ms)
    return [_join(_join(request.log_dir, "_sidecars"), sidecar.name) for sidecar in garbage]


def _delete(fs: pa.fs.FileSystem, uri: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(filesystem_and_path(uri)[1])


def delete_log_files(
    request: DeleteRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): delete expired files in order, then garbage sidecars."""
    if not _has_rows(batches):
        return
    fs, log_dir = filesystem_and_path(request.log_dir)
    for uri in request.paths:
        if not request.dry_run:
            _delete(fs, uri)
    sidecars = _garbage_sidecars(fs, log_dir, request) if request.sweep_sidecars else []
    for uri in sidecars:
        if not request.dry_run:
            _delete(fs, uri)
    yield pa.RecordBatch.from_pylist(
        [{"path": uri} for uri in [*request.paths, *sidecars]], schema=DELETED_SCHEMA
    )
