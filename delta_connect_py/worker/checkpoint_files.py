"""Publishing checkpoints and deleting expired log files, on the server, with pyarrow.fs.

Responsibility: the mapInArrow bodies that touch ``_delta_log`` directly:
:func:`publish_checkpoint` turns the parquet files Spark's writer left in a staging folder into
a checkpoint under Delta's exact names (classic, multi-part, or a UUID-named V2 checkpoint: the
staged files become ``_sidecars/`` files and a top-level JSON file lists them with the non-file
actions) and then writes ``_last_checkpoint`` (with delta-spark's ``v2Checkpoint`` for a
UUID-named checkpoint; no hint for a cleanup's compatibility copy of an existing
checkpoint); :func:`delete_log_files` deletes (or, dry run, only lists) expired log files,
garbage sidecars and stale staging folders; :func:`discard_staging` removes a staging folder
after a failed write or a refused or failed publish.

Invariants: a final checkpoint name only ever appears through a rename of a complete file
(atomic on POSIX file systems; a single copy on object stores, so on S3 no file above 5 GiB is
published: refused before any rename, see ``protocol.staging``), and only after the number of
``add`` rows in the staged files equals the snapshot's ``numOfFiles`` (else
``DELTA_CHECKPOINT_SNAPSHOT_MISMATCH`` and nothing is renamed). Sidecars get unique names
(derived from the checkpoint's UUID), so they are invisible to readers until the top-level file
naming them is renamed into place. ``_last_checkpoint`` is written to a temporary name and
renamed, only after every part exists under its final name, never replaces a hint for a
newer version, and is removed again when a concurrent cleanup deleted the checkpoint it names
between its read and its replace (no hint then: readers list the log).

Every body is safe under Spark's task retries (``spark.task.maxFailures``, 4 on a cluster): an
expected refusal is a result row (``PUBLISHED_SCHEMA.refusal``), never an exception, and is
recorded in the staging folder so a retry returns it again; a publish retried after a partial
attempt finds the parts already renamed under their final names and finishes the same publish;
deletes of files already gone succeed. A successful publish removes its staging folder; a
refused or failed one leaves it to the client's :func:`discard_staging` job. A folder left by a
killed server is hidden from every reader (``_`` prefix, no Delta log pattern) and removed by a
later publish or ``cleanup_metadata`` once stale (created a day ago, by the time in its name;
``protocol.staging``). No file already under a final name is replaced (another writer's
checkpoint of the same version is kept, as delta-spark keeps it); checkpoint content is
deterministic per (version, layout), so a repeated publish of the same classic or multi-part
checkpoint finds its own parts in place and leaves a valid table. A multi-part set is never
completed with parts of another split: a part in place that does not hold our copy's actions
makes the publish a refusal.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from delta_connect_py.errors import (
    CheckpointSnapshotMismatchError,
    CheckpointUnsupportedError,
    CorruptLogFileError,
    DeltaError,
)
from delta_connect_py.protocol.cleanup import SidecarFile, unreferenced_sidecars
from delta_connect_py.protocol.filenames import (
    checkpoint_name,
    multipart_checkpoint_name,
    parse_log_file,
    uuid_checkpoint_name,
)
from delta_connect_py.protocol.last_checkpoint import (
    LastCheckpoint,
    parse_last_checkpoint,
    serialize_last_checkpoint,
)
from delta_connect_py.protocol.staging import (
    STAGING_PREFIX,
    STALE_STAGING_MS,
    newest_known_mtime,
    single_copy_refusal,
    staging_is_stale,
)
from delta_connect_py.worker.failures import encode_error
from delta_connect_py.worker.log_files import (
    LAST_CHECKPOINT_NAME,
    filesystem_and_path,
    modification_ms,
    path_in_store,
)
from delta_connect_py.worker.pauses import pause_at
from delta_connect_py.worker.stores import NO_STORAGE_OPTIONS, StorageOptions

SIDECAR_DIR = "_sidecars"
#: delta-spark's ``lastCheckpoint`` thresholds: a ``v2Checkpoint`` hint lists the non-file
#: actions, and the sidecars, only when there are at most this many of each.
MAX_HINT_ENTRIES = 30
#: Written into the staging folder when a publish is refused: a retry of the same task
#: (Spark's task retries) reports the same refusal instead of counting again.
REFUSAL_NAME = "_refusal.json"
_SPARK_PART = re.compile(r"part-(\d+)-.*\.parquet")

PUBLISHED_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("rows", pa.int64()),
        ("adds", pa.int64()),
        ("bytes", pa.int64()),
        ("last_checkpoint", pa.string()),
        #: An expected refusal (``failures.encode_error``), in the one row of a refused publish.
        ("refusal", pa.string()),
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
    #: Remove stale staging folders after the publish (not for a cleanup's compatibility
    #: copy: the cleanup sweeps them itself, and lists what it removed).
    sweep_stale_staging: bool = True
    #: Write ``_last_checkpoint`` after the parts (not for a compatibility copy).
    write_hint: bool = True
    #: Test hook: fail once this many parts are in place (simulates a crash mid-publish that
    #: every retry of the task meets again).
    fail_after_parts: int | None = None
    #: Test hook: inject that failure only in task attempts numbered below this (a transient
    #: failure a retry of the task gets past); None: in every attempt.
    fail_in_attempts: int | None = None
    #: The worker's credentials for the store (``DeltaTable.for_path(storage_options=)``).
    storage_options: StorageOptions = NO_STORAGE_OPTIONS
    #: Test hook: a local folder in which the publish pauses before its renames and around
    #: the hint's read and replace (``worker.pauses``); None: no pauses.
    pause_dir: str | None = None


@dataclass(frozen=True)
class DeleteRequest:
    """Expired files to delete and how to sweep sidecars; primitives only."""

    log_dir: str
    paths: tuple[str, ...]
    retained_checkpoints: tuple[str, ...]
    sweep_sidecars: bool
    cutoff_ms: int
    dry_run: bool
    #: Staging folders older than this (ms; see ``protocol.staging``) are removed; None: keep.
    stale_staging_before_ms: int | None = None
    #: The worker's credentials for the store (``DeltaTable.for_path(storage_options=)``).
    storage_options: StorageOptions = NO_STORAGE_OPTIONS
    #: Test hook: a local folder in which the cleanup pauses before each delete and sweep
    #: (``worker.pauses``); None: no pauses.
    pause_dir: str | None = None


@dataclass(frozen=True)
class _Part:
    """One part of the checkpoint: its staged file (None: not staged, because Spark wrote no
    file for an empty partition or an earlier attempt moved it; or not to be moved, because a
    file is at the final path already), its final path, whether a file is there already, its
    counts, and our staged copy of a part whose final path holds a file already (None when
    there is none: an earlier attempt of this task moved it)."""

    staged: pa.fs.FileInfo | None
    final: str
    in_place: bool
    rows: int
    adds: int
    copy_beside: pa.fs.FileInfo | None = None

    @property
    def has_file(self) -> bool:
        return self.staged is not None or self.in_place


def _join(directory: str, name: str) -> str:
    return directory.rstrip("/") + "/" + name


def _staged_files(fs: pa.fs.FileSystem, staging: str, num_parts: int) -> dict[int, pa.fs.FileInfo]:
    """Staged part files by Spark partition id (empty partitions may have none; none at all
    when an earlier attempt of this task moved them and removed the folder)."""
    from pyarrow.fs import FileSelector

    by_part: dict[int, pa.fs.FileInfo] = {}
    for info in fs.get_file_info(FileSelector(staging, allow_not_found=True)):
        match = _SPARK_PART.fullmatch(info.base_name)
        if match is None:
            continue
        part = int(match[1])
        if part in by_part or part >= num_parts:
            raise RuntimeError(f"unexpected staged checkpoint file {info.path}")
        by_part[part] = info
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


def _exists(fs: pa.fs.FileSystem, path: str) -> bool:
    from pyarrow.fs import FileType

    return bool(fs.get_file_info(path).type != FileType.NotFound)


class _UnreadableFileInPlace(Exception):
    """A file already under a checkpoint part's final name whose footer cannot be read (an
    empty or cut file left by a writer that died, or damage)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(path, why)
        self.path, self.why = path, why


@contextlib.contextmanager
def _reading_in_place(path: str) -> Iterator[None]:
    """A failure to read the file at a part's final name, as ``_UnreadableFileInPlace``."""
    try:
        yield
    except (OSError, pa.ArrowException) as error:
        raise _UnreadableFileInPlace(path, f"{type(error).__name__}: {error}") from error


def _part(fs: pa.fs.FileSystem, staged: pa.fs.FileInfo | None, final: str) -> _Part:
    """A part counted from the file that will be under its final name: the one already there,
    else its staged file.

    A file already at the final name is never replaced: an earlier attempt of this task moved
    it there (checkpoint content is deterministic: the same file), or another writer wrote this
    version's checkpoint, which holds the same state (delta-spark never replaces one either;
    on an object store a replace under a reader mid-file would mix two files' bytes). The
    staged copy then leaves with the staging folder, and the counts, the add check and the hint
    are of the file kept (another writer's rows need not be ours: other tombstones, say).
    """
    if _exists(fs, final):
        with _reading_in_place(final):
            return _Part(None, final, True, *_count(fs, final), copy_beside=staged)
    if staged is not None:
        return _Part(staged, final, False, *_count(fs, staged.path))
    return _Part(None, final, False, 0, 0)


_ACTION_PATHS = ("add", "remove")


def _action_keys(fs: pa.fs.FileSystem, path: str) -> list[tuple[Any, ...]] | None:
    """Each row's (add path, remove path), sorted: which actions a part holds; None for a file
    without both columns (not a part like ours)."""
    schema = pq.read_schema(path, filesystem=fs)
    for name in _ACTION_PATHS:
        index = schema.get_field_index(name)
        action = schema.field(index).type if index >= 0 else None
        if not isinstance(action, pa.StructType) or action.get_field_index("path") < 0:
            return None
    columns = [f"{name}.path" for name in _ACTION_PATHS]
    table = pq.read_table(path, columns=columns, filesystem=fs)
    keys = zip(*(column.to_pylist() for column in table.columns), strict=True)
    return sorted(keys, key=lambda key: tuple((value is None, value or "") for value in key))


def _same_actions(fs: pa.fs.FileSystem, in_place: str, staged: pa.fs.FileInfo) -> bool:
    """Whether the file at a part's name holds the actions of our staged copy (a concurrent
    checkpoint of ours, split as ours is), not another split of the state; a file in place
    whose rows cannot be read is ``_UnreadableFileInPlace``."""
    ours = _action_keys(fs, staged.path)
    if ours is None:
        return False
    with _reading_in_place(in_place):
        return _action_keys(fs, in_place) == ours


def _stage(
    fs: pa.fs.FileSystem, staging: str, finals: list[str], request: PublishRequest
) -> list[_Part] | DeltaError:
    """Every part, counted; or why nothing may be published (a refusal, as data): another
    writer's incomplete set holds some of the parts, the add count differs from the
    snapshot's, or a file is too large for one rename on this file system."""
    by_part = _staged_files(fs, staging, request.num_parts)
    try:
        parts = [_part(fs, by_part.get(index), final) for index, final in enumerate(finals)]
        incomplete = _incomplete_set_of_another_writer(fs, request, parts)
    except _UnreadableFileInPlace as unreadable:
        return CorruptLogFileError(
            file=_join(request.log_dir, unreadable.path.rsplit("/", 1)[-1]),
            path=request.log_dir,
            reason=(
                f"a file already has the name of the checkpoint of version {request.version} "
                f"and is not a parquet file ({unreadable.why}); it is never replaced, so no "
                "checkpoint of this version was written. Remove that file, or write a "
                "checkpoint of another version"
            ),
        )
    if not any(part.has_file for part in parts):
        raise RuntimeError(f"no staged checkpoint file in {staging}, and none published")
    if incomplete is not None:
        return incomplete
    adds = sum(part.adds for part in parts)
    if request.expected_adds is not None and adds != request.expected_adds:
        return CheckpointSnapshotMismatchError(
            version=request.version,
            path=request.table_root,
            written=adds,
            expected=request.expected_adds,
        )
    to_move = [part.staged.size for part in parts if part.staged is not None]
    too_large = single_copy_refusal(request.log_dir, to_move)
    if too_large is not None:
        return CheckpointUnsupportedError(path=request.table_root, reason=too_large)
    return parts


def _write_empty_part(fs: pa.fs.FileSystem, staging: str, part: int, schema: pa.Schema) -> str:
    path = _join(staging, f"part-{part:05d}-empty.snappy.parquet")
    pq.write_table(schema.empty_table(), path, filesystem=fs, compression="snappy")
    return path


def _moves_with_empty_parts(
    fs: pa.fs.FileSystem, staging: str, parts: list[_Part]
) -> list[tuple[str, str]]:
    """(staged, final) of every part not in place yet; a multi-part set needs a file even for
    an empty partition, written here (with the schema of any other part)."""
    pattern = next(p.staged.path if p.staged is not None else p.final for p in parts if p.has_file)
    schema = pq.read_schema(pattern, filesystem=fs)
    moves = []
    for index, part in enumerate(parts):
        if part.in_place:
            continue
        source = part.staged.path if part.staged is not None else None
        moves.append((source or _write_empty_part(fs, staging, index, schema), part.final))
    return moves


def _final_names(request: PublishRequest) -> list[str]:
    if not request.multi_part:
        return [checkpoint_name(request.version)]
    return [
        multipart_checkpoint_name(request.version, part, request.num_parts)
        for part in range(1, request.num_parts + 1)
    ]


def _sidecar_name(request: PublishRequest, part: int) -> str:
    """delta-spark's sidecar name ``<v>.checkpoint.<part>.<parts>.<uuid>.parquet``, with a
    UUID derived from the checkpoint's: unique, and the same in every attempt of the task."""
    unique = uuid.uuid5(uuid.UUID(request.checkpoint_uuid), str(part))
    return (
        f"{request.version:020d}.checkpoint.{part + 1:010d}.{request.num_parts:010d}."
        f"{unique}.parquet"
    )


def _hint_text(
    request: PublishRequest,
    rows: int,
    adds: int,
    size: int,
    v2_checkpoint: dict[str, Any] | None = None,
    *,
    files_are_ours: bool = True,
) -> str:
    """``_last_checkpoint`` for the published files. ``checkpointSchema`` is our write's
    schema, so it is left out (it is optional) unless every file named is one we wrote: a
    reader trusts it over the file's footer (delta-rs, given a schema with typed stats another
    writer's file lacks, reads no stats at all)."""
    schema = None
    if request.checkpoint_schema is not None and files_are_ours:
        schema = json.loads(request.checkpoint_schema)
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


def _file_entry(name: str, info: pa.fs.FileInfo) -> dict[str, Any]:
    """A file as ``sidecar`` actions and ``_last_checkpoint``'s ``v2Checkpoint`` name it."""
    return {
        "path": name,
        "sizeInBytes": info.size,
        "modificationTime": modification_ms(info),
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


def _has_checkpoint_file(fs: pa.fs.FileSystem, log_dir: str, version: int) -> bool:
    """Whether any checkpoint file of ``version`` is in the log (complete or not: a writer
    publishes its checkpoint's files before its hint, so a hint's own files are there)."""
    from pyarrow.fs import FileSelector

    prefix = f"{version:020d}.checkpoint."
    listing = fs.get_file_info(FileSelector(log_dir, allow_not_found=True))
    return any(info.base_name.startswith(prefix) for info in listing)


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


def write_last_checkpoint(
    fs: pa.fs.FileSystem,
    log_dir: str,
    text: str,
    version: int,
    pause_dir: str | None = None,
    checkpoint_files: tuple[str, ...] = (),
) -> bool:
    """Atomically replace ``_last_checkpoint`` unless it names a newer checkpoint.

    A hint naming a newer version whose checkpoint does not exist (a hint left beyond a
    table that was recreated, or whose checkpoint was deleted) is replaced: readers such as
    delta-rs fail on it, while a hint naming an older checkpoint is always safe to read from.

    The read and the replace are not one atomic step: another writer may checkpoint a newer
    version and clean up expired files in between, deleting ``checkpoint_files`` (the files
    the hint names). Then the hint just written would name files that are gone, and it is
    removed again (only while it is still ours): readers list the log without a hint.
    """
    final = _join(log_dir, LAST_CHECKPOINT_NAME)
    pause_at(pause_dir, "hint-read")
    current = _current_hint_version(fs, final)
    if current is not None and current > version and _has_checkpoint_file(fs, log_dir, current):
        return False
    pause_at(pause_dir, "hint-replace")
    _write_via_rename(fs, log_dir, final, text.encode("utf-8"))
    _delete_hadoop_checksum(fs, final)
    if all(_exists(fs, path) for path in checkpoint_files):
        return True
    with contextlib.suppress(FileNotFoundError):
        if _read_text(fs, final) == text:
            fs.delete_file(final)
    return False


def _read_text(fs: pa.fs.FileSystem, path: str) -> str:
    with fs.open_input_stream(path) as stream:
        return bytes(stream.read()).decode("utf-8")


def _rename_all(
    fs: pa.fs.FileSystem, moves: list[tuple[str, str]], in_place: int, request: PublishRequest
) -> None:
    """Move every staged part to its final name (``in_place`` parts are there already)."""
    _inject_failure(request, in_place)
    # One pause for the whole set: delta-rs 1.6's post-commit log cleanup takes any part of an
    # incomplete multi-part set for a checkpoint (bench/README.md, the concurrency report).
    pause_at(request.pause_dir, "rename")
    for source, target in moves:
        fs.move(source, target)
        in_place += 1
        _inject_failure(request, in_place)


def _inject_failure(request: PublishRequest, in_place: int) -> None:
    if request.fail_after_parts is None or not 0 < request.fail_after_parts <= in_place:
        return
    if request.fail_in_attempts is None or _task_attempt() < request.fail_in_attempts:
        raise RuntimeError(f"injected failure after publishing {in_place} checkpoint part(s)")


def _task_attempt() -> int:
    """Which attempt of its Spark task this is (0: the first; also outside Spark)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    return 0 if context is None else context.attemptNumber()


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
) -> _Published | DeltaError:
    names = _final_names(request)
    parts = _stage(fs, staging, [_join(log_dir, name) for name in names], request)
    if isinstance(parts, DeltaError):
        return parts
    moves = _moves_with_empty_parts(fs, staging, parts)
    _rename_all(fs, moves, sum(part.in_place for part in parts), request)
    sizes = [info.size for info in fs.get_file_info([part.final for part in parts])]
    rows, adds = [p.rows for p in parts], [p.adds for p in parts]
    uris = [_join(request.log_dir, name) for name in names]
    if not request.write_hint:
        return _Published(uris, rows, adds, sizes, None)
    ours = not any(part.in_place for part in parts)
    text = _hint_text(request, sum(rows), sum(adds), sum(sizes), files_are_ours=ours)
    finals = tuple(part.final for part in parts)
    written = write_last_checkpoint(fs, log_dir, text, request.version, request.pause_dir, finals)
    return _Published(uris, rows, adds, sizes, text if written else None)


def _incomplete_set_of_another_writer(
    fs: pa.fs.FileSystem, request: PublishRequest, parts: list[_Part]
) -> CheckpointUnsupportedError | None:
    """A refusal when some parts of a multi-part set are another writer's, split otherwise than
    ours, and the others would be ours: our parts beside its parts could leave an action out
    or hold one twice. (A part an earlier attempt of this task moved has no staged copy left;
    one a concurrent checkpoint of ours published holds our copy's actions.) The parts' actions
    are read only for a set that would mix files in place with ours."""
    if len(parts) < 2 or all(part.in_place for part in parts):
        return None
    foreign = [
        part.final
        for part in parts
        if part.copy_beside is not None and not _same_actions(fs, part.final, part.copy_beside)
    ]
    if not foreign:
        return None
    names = ", ".join(path.rsplit("/", 1)[-1] for path in foreign)
    return CheckpointUnsupportedError(
        path=request.table_root,
        reason=(
            f"another writer's incomplete multi-part checkpoint of version {request.version} "
            f"is in the log ({len(foreign)} of its {len(parts)} parts: {names}); its parts are "
            "never replaced, and ours need not split the actions as it did, so nothing was "
            "written. Readers ignore the incomplete set: write a single-file checkpoint "
            "(part_size=None), or one of another version or part count"
        ),
    )


def _publish_sidecars(
    fs: pa.fs.FileSystem, staging: str, log_dir: str, request: PublishRequest
) -> _Published | DeltaError:
    """Sidecars first (unique names, unreferenced until the top-level file exists), then the
    top-level JSON file by rename, then the hint. Empty partitions get no sidecar."""
    sidecar_dir = _join(log_dir, SIDECAR_DIR)
    all_names = [_sidecar_name(request, part) for part in range(request.num_parts)]
    parts = _stage(fs, staging, [_join(sidecar_dir, name) for name in all_names], request)
    if isinstance(parts, DeltaError):
        return parts
    kept = [(name, part) for name, part in zip(all_names, parts, strict=True) if part.rows]
    names, parts = [name for name, _ in kept], [part for _, part in kept]
    fs.create_dir(sidecar_dir, recursive=True)
    moves = [(p.staged.path, p.final) for p in parts if p.staged is not None and not p.in_place]
    _rename_all(fs, moves, sum(part.in_place for part in parts), request)
    infos = fs.get_file_info([part.final for part in parts])
    entries = [_file_entry(name, info) for name, info in zip(names, infos, strict=True)]
    lines = [*request.non_file_actions]
    lines += [json.dumps({"sidecar": entry}, separators=(",", ":")) for entry in entries]
    top_name = uuid_checkpoint_name(request.version, request.checkpoint_uuid, "json")
    top = _join(log_dir, top_name)
    pause_at(request.pause_dir, "top-level")
    if not _exists(fs, top):  # else written by an earlier attempt, with these very lines
        _write_via_rename(fs, log_dir, top, ("\n".join(lines) + "\n").encode("utf-8"))
    top_info = fs.get_file_info(top)
    sizes = [top_info.size, *[info.size for info in infos]]
    rows = [len(lines), *[p.rows for p in parts]]
    adds = [0, *[p.adds for p in parts]]
    v2 = _v2_checkpoint_hint((top_name, top_info), list(request.non_file_actions), entries)
    text = _hint_text(request, sum(rows), sum(adds), sum(sizes), v2)
    named = (top, *(part.final for part in parts))
    written = write_last_checkpoint(fs, log_dir, text, request.version, request.pause_dir, named)
    sidecar_uris = [_join(_join(request.log_dir, SIDECAR_DIR), name) for name in names]
    uris = [_join(request.log_dir, top_name), *sidecar_uris]
    return _Published(uris, rows, adds, sizes, text if written else None)


def _has_rows(batches: Iterable[pa.RecordBatch]) -> bool:
    """Whether this task got the one driving row (other, empty tasks must do nothing)."""
    return any(batch.num_rows for batch in batches)


def _recorded_refusal(fs: pa.fs.FileSystem, staging: str) -> str | None:
    """The refusal an earlier attempt of this task recorded in the staging folder, if any."""
    try:
        with fs.open_input_stream(_join(staging, REFUSAL_NAME)) as stream:
            return bytes(stream.read()).decode("utf-8")
    except FileNotFoundError:
        return None


def _refusal_row(refusal: str) -> pa.Table:
    row = {name: None for name in PUBLISHED_SCHEMA.names}
    return pa.Table.from_pylist([{**row, "refusal": refusal}], schema=PUBLISHED_SCHEMA)


def publish_checkpoint(
    request: PublishRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): validate, rename parts, write the hint, clean up.

    Safe to retry (Spark retries a failed task): an expected refusal is returned as a row, not
    raised, and recorded in the staging folder (left for the client to discard), so a retry
    reports it again; parts an earlier attempt moved are found under their final names and
    not moved again, and an attempt that finds the staging folder gone reports the published
    files. An unexpected failure raises and leaves the staging folder for the retry (the
    client discards it when the job fails).
    """
    if not _has_rows(batches):
        return
    fs, staging = filesystem_and_path(request.staging_dir, request.storage_options)
    log_dir = path_in_store(request.log_dir)
    refusal = _recorded_refusal(fs, staging)
    if refusal is not None:
        yield from _refusal_row(refusal).to_batches()
        return
    publish = _publish_sidecars if request.sidecars else _publish_classic
    published = publish(fs, staging, log_dir, request)
    if isinstance(published, DeltaError):
        text = encode_error(published)
        _write_via_rename(fs, staging, _join(staging, REFUSAL_NAME), text.encode("utf-8"))
        yield from _refusal_row(text).to_batches()
        return
    _remove_dir(fs, staging)
    if request.sweep_stale_staging:
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
            "refusal": [None] * len(published.uris),
        },
        schema=PUBLISHED_SCHEMA,
    )
    yield from table.to_batches()


def _remove_dir(fs: pa.fs.FileSystem, path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        fs.delete_dir(path)


def _newest_mtime_ms(fs: pa.fs.FileSystem, folder: pa.fs.FileInfo) -> int | None:
    from pyarrow.fs import FileSelector

    infos = [folder, *fs.get_file_info(FileSelector(folder.path, recursive=True))]
    return newest_known_mtime(modification_ms(info, fs) for info in infos)


def _staging_folders(fs: pa.fs.FileSystem, log_dir: str) -> list[pa.fs.FileInfo]:
    """The staging folders directly under ``log_dir``.

    pyarrow's GCS listing names objects only, so a folder that exists only as the prefix of its
    objects (no placeholder object: nothing made it a folder but the files under it) is missing
    from a plain listing; on GCS the folders are taken from one recursive listing instead."""
    from pyarrow.fs import FileSelector, FileType

    if fs.type_name != "gcs":
        return [
            info
            for info in fs.get_file_info(FileSelector(log_dir))
            if info.type == FileType.Directory and info.base_name.startswith(STAGING_PREFIX)
        ]
    prefix = log_dir.rstrip("/") + "/"
    names = set()
    for info in fs.get_file_info(FileSelector(log_dir, recursive=True)):
        top, nested, _ = info.path[len(prefix) :].rstrip("/").partition("/")
        if top.startswith(STAGING_PREFIX) and (nested or info.type == FileType.Directory):
            names.add(top)
    return [fs.get_file_info(prefix + name) for name in sorted(names)]


def _stale_staging(
    fs: pa.fs.FileSystem, log_dir: str, log_uri: str, before_ms: int, delete: bool
) -> list[str]:
    """Staging folders (URIs) of writers that died before ``before_ms``
    (``protocol.staging.staging_is_stale``); removed if ``delete``."""
    stale = []
    for info in _staging_folders(fs, log_dir):
        with contextlib.suppress(FileNotFoundError):  # removed meanwhile by its own writer
            newest = partial(_newest_mtime_ms, fs, info)
            if staging_is_stale(info.base_name, before_ms, newest):
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
        SidecarFile(info.base_name, modification_ms(info, fs))
        for info in fs.get_file_info(selector)
        if info.type == FileType.File
    ]


def _checkpoints_now(fs: pa.fs.FileSystem, log_dir: str, request: DeleteRequest) -> list[str]:
    """Paths of the checkpoints to keep: the plan's, and any another writer published since
    the plan's listing (its sidecars may be fresh, or made old by time passing meanwhile)."""
    from pyarrow.fs import FileSelector

    deleted = {uri.rsplit("/", 1)[-1] for uri in request.paths}
    kept = {path_in_store(uri) for uri in request.retained_checkpoints}
    for info in fs.get_file_info(FileSelector(log_dir)):
        listed = parse_log_file(info.base_name, info.size or 0, 0)
        if listed is not None and listed.is_checkpoint and info.base_name not in deleted:
            kept.add(info.path)
    return sorted(kept)


def _garbage_sidecars(fs: pa.fs.FileSystem, log_dir: str, request: DeleteRequest) -> list[str]:
    """The sidecars no kept checkpoint references and older than the cutoff; none when a kept
    checkpoint file cannot be read (an empty part of a writer that died, damage): what it
    references is unknown, so every sidecar is kept."""
    referenced: list[str] = []
    for path in _checkpoints_now(fs, log_dir, request):
        try:
            referenced += _sidecar_references(fs, path)
        except FileNotFoundError:
            continue  # gone since the listing (another writer's cleanup): references nothing
        except (OSError, pa.ArrowException, ValueError, KeyError, TypeError):
            return []  # ValueError: not JSON or not UTF-8; KeyError, TypeError: not actions
    garbage = unreferenced_sidecars(_sidecars_present(fs, log_dir), referenced, request.cutoff_ms)
    return [_join(_join(request.log_dir, SIDECAR_DIR), sidecar.name) for sidecar in garbage]


def _delete(fs: pa.fs.FileSystem, uri: str) -> None:
    """Delete a log file, and its Hadoop checksum file."""
    path = path_in_store(uri)
    with contextlib.suppress(FileNotFoundError):
        fs.delete_file(path)
    _delete_hadoop_checksum(fs, path)


def _delete_hadoop_checksum(fs: pa.fs.FileSystem, path: str) -> None:
    """Delete the hidden ``.<name>.crc`` that Hadoop's local file system writes beside each
    file, when ``path`` is deleted or replaced: delta-spark's deletes take it too, and a stale
    one no longer matches a replaced file. Only a local disk has them."""
    from pyarrow.fs import LocalFileSystem

    if isinstance(fs, LocalFileSystem):
        directory, _, name = path.rpartition("/")
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(f"{directory}/.{name}.crc")


def delete_log_files(
    request: DeleteRequest, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body (run on one row): delete expired files in order, then garbage sidecars,
    then stale staging folders."""
    if not _has_rows(batches):
        return
    fs, log_dir = filesystem_and_path(request.log_dir, request.storage_options)
    for index, uri in enumerate(request.paths):
        if not request.dry_run:
            pause_at(request.pause_dir, f"delete-{index}")
            _delete(fs, uri)
    pause_at(request.pause_dir, "sweep")
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
