"""Reading ``_delta_log`` files that Spark's file readers cannot see, on the server.

Responsibility: read ``_last_checkpoint`` (a name starting with ``_`` is invisible to every Spark
file reader) with pyarrow's file systems inside a Python worker, with delta-spark's tries; list a
local ``_delta_log`` (with the text of its newest small version checksum).

Invariants: a missing file is reported as missing, never as corrupt; a file that cannot be parsed
(or fails its checksum) is retried up to ``tries`` times, one second apart, and then reported as
corrupt with the reason, so the client falls back to the listing; a file the worker cannot read
at all (no credentials for the store, no network: an ``OSError``) is reported as unreachable at
once, without retries, and the listing decides too; nothing is ever written.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, AnyStr
from urllib.parse import quote, quote_from_bytes

import pyarrow as pa
import pyarrow.compute as pc

from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.protocol.filenames import LogFileKind, parse_log_file
from delta_connect_py.protocol.last_checkpoint import (
    CorruptLastCheckpointError,
    parse_last_checkpoint,
)
from delta_connect_py.protocol.segment import CheckpointChoice, complete_checkpoints
from delta_connect_py.worker.checkpoint_pm import checkpoint_pm
from delta_connect_py.worker.failures import WorkerFailure
from delta_connect_py.worker.line_checks import (
    LINE_PROBLEM_COLUMN,
    NOT_UTF8,
    corrupt_line,
    line_problem,
    line_problems,
    shape_problem,
)
from delta_connect_py.worker.stores import NO_STORAGE_OPTIONS, StorageOptions, open_store

LAST_CHECKPOINT_NAME = "_last_checkpoint"
MISSING = -1
CORRUPT = -2
#: The worker could not read ``_last_checkpoint`` (credentials, network): not a property of it.
UNREACHABLE = -4
#: The ``length`` of the one row a listing yields when ``_delta_log`` does not exist.
NO_LOG_DIR = -3
#: The ``length`` of the listing's row that carries the server's clock, not a file.
CLOCK_ROW = -5
#: The ``length`` of a listing row that carries a commit line that may hold protocol or
#: metadata (``content``), of the commit whose version is its ``modificationTime``.
PM_LINE = -6
#: The ``length`` of the listing row saying which commits the P&M scan read: those after
#: ``modificationTime`` up to the version in ``content``. Without it, no scan was made.
PM_SCAN = -7
#: The ``length`` of a listing row naming (``path``) a file of the checkpoint whose P&M the
#: scan read, of the version in ``modificationTime``; its ``PM_LINE`` rows have that version.
#: The first one's ``content`` is the schema Spark would infer for the files (JSON), or null.
PM_CHECKPOINT = -8

#: The row layout shared with the log listing, so both arrive in one collect.
LISTING_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("length", pa.int64()),
        ("modificationTime", pa.int64()),
        ("content", pa.string()),
    ]
)


@dataclass(frozen=True)
class LastCheckpointRead:
    log_dir: str
    tries: int = 3
    retry_seconds: float = 1.0
    storage_options: StorageOptions = NO_STORAGE_OPTIONS


def filesystem_and_path(
    uri: str, options: StorageOptions = NO_STORAGE_OPTIONS, *, resolve_region: bool = True
) -> tuple[pa.fs.FileSystem, str]:
    """A pyarrow file system for a Hadoop-style URI (``file:/x``, ``s3a://b/x``, ``/x``),
    opened with ``options``, else the worker's own environment (see ``worker.stores``)."""
    from pyarrow import fs

    local = _local_path(uri)
    if local is not None:
        return fs.LocalFileSystem(), local
    return open_store(uri, options, resolve_region=resolve_region)


def path_in_store(uri: str) -> str:
    """The path ``filesystem_and_path`` gives for ``uri``, without opening the store."""
    local = _local_path(uri)
    if local is not None:
        return local
    if uri.startswith(("abfs://", "abfss://")):
        authority, _, path = uri.split("://", 1)[1].partition("/")
        return f"{authority.rpartition('@')[0]}/{path}".rstrip("/")
    return uri.split(":", 1)[1].lstrip("/")


def _local_path(uri: str) -> str | None:
    """The local path of a ``file:`` URI or an absolute path, else None."""
    if uri.startswith("file:"):
        return "/" + uri[len("file:") :].lstrip("/")
    if uri.startswith("/"):
        return uri
    return None


def file_uri(path: str) -> str:
    """The URI form of a Hadoop-style path, as Spark reports ``_metadata.file_path``:
    ``PurePosixPath(local path).as_uri()`` for a local one."""
    local = _local_path(path)
    if local is None:
        return quote(path, safe=":/@")
    directory, _, name = local.rpartition("/")
    plain_name = name not in ("", ".", "..") and not local.startswith("//")
    directory_uri = _directory_uri(directory or "/") if plain_name else None
    if directory_uri is None:
        return PurePosixPath(local).as_uri()  # pathlib normalizes what the fast path cannot
    # Per directory once: building the whole URI with pathlib for each of M's 10,000 commits
    # took 0.2-0.3 s of a single task.
    return directory_uri + quote_from_bytes(os.fsencode(name))


#: ``_directory_uri``'s memo. Not ``functools.lru_cache``: its wrapper pickles by reference,
#: and this module reaches the server's workers by value, where it cannot be imported.
_DIRECTORY_URIS: dict[str, str | None] = {}


def _directory_uri(directory: str) -> str | None:
    """``file:`` URI of a local directory, ending with a slash; None unless the directory is
    written as pathlib writes it (no empty or ``.`` segments, no trailing slash)."""
    if directory not in _DIRECTORY_URIS:
        if len(_DIRECTORY_URIS) >= 64:
            _DIRECTORY_URIS.clear()
        as_path = PurePosixPath(directory)
        uri = as_path.as_uri() if str(as_path) == directory else None
        _DIRECTORY_URIS[directory] = uri if uri is None or uri.endswith("/") else uri + "/"
    return _DIRECTORY_URIS[directory]


def read_bytes(
    uri: str, options: StorageOptions = NO_STORAGE_OPTIONS, *, resolve_region: bool = True
) -> bytes | None:
    """The file's content, or None when it does not exist."""
    local = _local_path(uri)
    if local is not None:
        # The common case, many small commits: plain open() costs least per file (with a pyarrow
        # file system object per file, M's 10,000 commits took 0.48-0.70 s, not 0.37-0.43 s).
        try:
            with open(local, "rb") as file:
                return file.read()
        except FileNotFoundError:
            return None
    filesystem, path = filesystem_and_path(uri, options, resolve_region=resolve_region)
    try:
        with filesystem.open_input_stream(path) as stream:
            return bytes(stream.read())
    except FileNotFoundError:
        return None


def read_text(
    uri: str, options: StorageOptions = NO_STORAGE_OPTIONS, *, resolve_region: bool = True
) -> str | None:
    """The file's text, or None when it does not exist."""
    content = read_bytes(uri, options, resolve_region=resolve_region)
    return None if content is None else content.decode("utf-8")


def read_last_checkpoint(
    request: LastCheckpointRead, _: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: one listing-shaped row for ``_last_checkpoint``."""
    uri = request.log_dir.rstrip("/") + "/" + LAST_CHECKPOINT_NAME
    length, content = _read_with_tries(uri, request)
    yield pa.RecordBatch.from_pylist(
        [{"path": uri, "length": length, "modificationTime": 0, "content": content}],
        schema=LISTING_SCHEMA,
    )


@dataclass(frozen=True)
class PmLinesScan:
    """Commit lines a local listing reads besides the names: of the commits after
    ``after_version``, those that can hold protocol or metadata (the lines a P&M read of those
    commits parses, see ``CommitLinesRead``), when the commits hold at most ``max_bytes``. When
    a checkpoint is newer than ``after_version``, the newest one's P&M and the commits after it
    instead (``pm_scan_rows``)."""

    after_version: int
    only_containing: tuple[str, ...]
    newest_also_containing: tuple[str, ...]
    max_bytes: int


def modification_ms(info: pa.fs.FileInfo, filesystem: pa.fs.FileSystem | None = None) -> int:
    """A file's modification time in ms (0 when the file system gives none). pyarrow keeps it
    as nanoseconds in an int64, which wraps a time after 2262 round to one before 1970; a local
    file's is then read again from ``os.stat``, which has no such bound."""
    mtime_ns = info.mtime_ns or 0
    if mtime_ns < 0:  # rare: the listing's per-file path does no more than the division
        from pyarrow.fs import LocalFileSystem

        if isinstance(filesystem, LocalFileSystem):
            with contextlib.suppress(OSError):
                mtime_ns = os.stat(info.path).st_mtime_ns
    return mtime_ns // 1_000_000


def list_local_log(
    request: LastCheckpointRead, scan: PmLinesScan | None, _: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: every visible file of a local ``_delta_log`` plus the hint row; the
    newest version checksum's row carries its text (``content``), so that a snapshot of the
    latest version takes its protocol and metadata from it without another job; with a
    ``scan``, also the P&M lines it asks for (``pm_scan_rows``).

    Visible means what Spark's file sources would list: regular files whose names do not start
    with ``_`` or ``.``. Paths keep the Hadoop form of ``log_dir`` (``file:/a b/_delta_log/x``).
    """
    from pyarrow import fs

    filesystem, local_dir = filesystem_and_path(request.log_dir)
    try:
        infos = filesystem.get_file_info(fs.FileSelector(local_dir, recursive=False))
    except (FileNotFoundError, NotADirectoryError):
        infos = None
    if infos is None:
        rows = [{"path": request.log_dir, "length": NO_LOG_DIR, "modificationTime": 0}]
        yield pa.RecordBatch.from_pylist(rows, schema=LISTING_SCHEMA)
        return
    prefix = request.log_dir.rstrip("/") + "/"
    visible = [
        info
        for info in infos
        if info.type == fs.FileType.File and not info.base_name.startswith(("_", "."))
    ]
    newest_checksum = _newest_checksum(visible)
    yield pa.RecordBatch.from_pydict(
        {
            "path": [prefix + info.base_name for info in visible],
            "length": [info.size for info in visible],
            "modificationTime": [modification_ms(info, filesystem) for info in visible],
            "content": [
                _checksum_text(info.path) if info is newest_checksum else None for info in visible
            ],
        },
        schema=LISTING_SCHEMA,
    )
    if scan is not None:
        scanned = pm_scan_rows(scan, request.log_dir, [(prefix + i.base_name, i) for i in visible])
        if scanned:
            yield pa.RecordBatch.from_pylist(scanned, schema=LISTING_SCHEMA)
    yield from read_last_checkpoint(request, [])


def pm_scan_rows(scan: PmLinesScan, log_dir: str, files: Sequence[tuple[str, Any]]) -> list[Any]:
    """The ``PM_LINE`` rows ``scan`` asks for, then the ``PM_SCAN`` row; none at all when the
    scan does not apply (a newer checkpoint not in parquet, too many bytes) or meets a line the
    P&M read would fail on (the client then runs that read, which reports it).

    When a complete checkpoint is newer than ``scan.after_version``, the newest one (the one a
    snapshot of the latest version starts from) is read first (``checkpoint_pm``, its
    files named by ``PM_CHECKPOINT`` rows), then the commits after it.
    """
    log_files = [parse_log_file(path, info.size, 0) for path, info in files]
    listed = [log_file for log_file in log_files if log_file is not None]
    checkpoints = [c for c in complete_checkpoints(listed) if c.version > scan.after_version]
    checkpoint_rows: list[dict[str, Any]] = []
    start = scan.after_version
    if checkpoints:
        checkpoint = checkpoints[-1]
        checkpoint_rows = _checkpoint_pm_rows(checkpoint, files)
        if not checkpoint_rows:
            return []
        start = checkpoint.version
    commits: dict[int, tuple[str, Any]] = {}
    for (path, info), log_file in zip(files, log_files, strict=True):
        if log_file is None or log_file.version <= start:
            continue
        if log_file.kind is LogFileKind.CHECKSUM:
            continue
        if log_file.kind is not LogFileKind.COMMIT or log_file.version in commits:
            return []  # a newer (incomplete) checkpoint or a compaction: left to the read
        commits[log_file.version] = (path, info)
    versions = sorted(commits)
    commit_bytes = sum(commits[v][1].size for v in versions)
    if not (versions or checkpoint_rows) or commit_bytes > scan.max_bytes:
        return []
    newest = versions[-1] if versions else start
    request = CommitLinesRead(
        table_path=log_dir,
        only_containing=scan.only_containing,
        newest_also_containing=scan.newest_also_containing,
        newest_version=newest,
    )
    rows = checkpoint_rows
    for version in versions:
        path, info = commits[version]
        lines = _checked_lines(request, version, info.path)
        if lines is None:
            return []
        rows += [
            {"path": path, "length": PM_LINE, "modificationTime": version, "content": line}
            for line in lines
        ]
    scanned = {"path": log_dir, "length": PM_SCAN, "modificationTime": start}
    return [*rows, {**scanned, "content": str(newest)}]


def _checkpoint_pm_rows(
    checkpoint: CheckpointChoice, files: Sequence[tuple[str, Any]]
) -> list[Any]:
    """The ``PM_CHECKPOINT`` rows naming a parquet ``checkpoint``'s files (the first one's
    ``content``: the schema Spark would infer for them, when known), then its P&M actions as
    ``PM_LINE`` rows; none when they cannot be read as the client would."""
    if checkpoint.files[0].name.endswith(".json"):
        return []
    local_paths = {path: info.path for path, info in files}
    paths = [f.path for f in checkpoint.files]
    found = checkpoint_pm([local_paths[path] for path in paths])
    if found is None:
        return []
    named = [
        {"path": path, "length": PM_CHECKPOINT, "modificationTime": checkpoint.version}
        for path in paths
    ]
    named[0]["content"] = found.spark_schema
    line_row = {"path": paths[0], "length": PM_LINE, "modificationTime": checkpoint.version}
    return named + [{**line_row, "content": line} for line in found.lines]


def _checked_lines(request: CommitLinesRead, version: int, path: str) -> list[str] | None:
    """``_wanted_lines`` as text; None when a line has a problem the read would fail on."""
    try:
        lines = _wanted_lines(request, version, path)
        if any(line_problem(line) is not None for line in lines):
            return None
        return [line.decode("utf-8") for line in lines]
    except (WorkerFailure, UnicodeDecodeError):
        return None


#: A version checksum up to this size travels with the listing (delta-spark's hold the table's
#: files only for small tables).
MAX_LISTED_CHECKSUM_BYTES = 1 << 20


def _newest_checksum(infos: list[Any]) -> Any:
    """The file info of the newest ``<version>.crc`` when small enough to travel, else None."""
    parsed = [(parse_log_file(info.base_name, info.size, 0), info) for info in infos]
    checksums = [(f.version, info) for f, info in parsed if f and f.kind is LogFileKind.CHECKSUM]
    if not checksums:
        return None
    _, newest = max(checksums, key=lambda pair: pair[0])
    return newest if newest.size <= MAX_LISTED_CHECKSUM_BYTES else None


def _checksum_text(local_path: str) -> str | None:
    """The checksum file's text; None when it is gone or not UTF-8 (the client then reads it
    as before)."""
    try:
        with open(local_path, "rb") as file:
            return file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _read_with_tries(uri: str, request: LastCheckpointRead) -> tuple[int, str | None]:
    reason = "unknown"
    for attempt in range(request.tries):
        try:
            # A hint is not worth a region lookup (seconds when S3 cannot be reached).
            content = read_bytes(uri, request.storage_options, resolve_region=False)
        except (OSError, WorkerFailure) as exc:  # not the file's fault: no retry helps
            return UNREACHABLE, f"{type(exc).__name__}: {exc}"
        if content is None:
            return MISSING, None
        try:
            text = content.decode("utf-8")  # a damaged byte may leave no UTF-8: corrupt too
            parse_last_checkpoint(text)
            return len(text), text
        except (CorruptLastCheckpointError, ValueError) as exc:
            reason = f"{type(exc).__name__}: {exc}"
        if attempt + 1 < request.tries:
            time.sleep(request.retry_seconds)
    return CORRUPT, reason


#: One row per line of a commit file, tagged with the commit's version and its file URI, and
#: why its text is not one valid action (``line_checks.line_problem``; null for a valid line).
COMMIT_LINES_SCHEMA = pa.schema(
    [
        ("version", pa.int64()),
        ("_file", pa.string()),
        ("value", pa.string()),
        (LINE_PROBLEM_COLUMN, pa.string()),
    ]
)


@dataclass(frozen=True)
class CommitLinesRead:
    table_path: str
    #: When given, only lines containing one of these strings are returned (a cheap superset
    #: filter; the caller parses and checks what it gets).
    only_containing: tuple[str, ...] = ()
    #: More strings wanted only in the commit of version ``newest_version``.
    newest_also_containing: tuple[str, ...] = ()
    newest_version: int | None = None
    #: Lines starting with one of these are left out (a line holds one action, named first).
    skip_prefixes: tuple[str, ...] = ()

    def wanted_in(self, version: int) -> tuple[str, ...]:
        if version == self.newest_version:
            return self.only_containing + self.newest_also_containing
        return self.only_containing


def _wanted(text: AnyStr, only_containing: tuple[AnyStr, ...]) -> bool:
    return not only_containing or any(wanted in text for wanted in only_containing)


def read_commit_lines(
    request: CommitLinesRead, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body: the lines of the commit files named in ``(version, path)`` rows.

    Reading many tiny files here costs a fraction of a millisecond each, where Spark's file
    sources pay a per-file setup; Spark still parses the JSON (``from_json``). Lines are split
    where Spark's text reader splits them (``\\n``, ``\\r``, ``\\r\\n``) and kept as bytes until
    one Arrow buffer is built from them (building strings line by line took most of the time).
    Each line's text is checked here, as bytes (``line_checks``): a line that is not UTF-8, or
    that no query parses and is not one JSON object, fails the task; a returned line carries
    its problem, which fails the query that parses it (``plans.action_lines``).
    """
    lines = _LineBuffer()
    for batch in batches:
        for version, path in zip(
            batch.column("version").to_pylist(), batch.column("path").to_pylist(), strict=True
        ):
            lines.add(version, path, _wanted_lines(request, version, path))
            if lines.size >= LINE_BATCH_BYTES:
                yield lines.flush()
    if lines.versions:
        yield lines.flush()


def read_assigned_commit_lines(
    request: CommitLinesRead,
    assigned: Sequence[Sequence[tuple[int, str]]],
    batches: Iterable[pa.RecordBatch],
) -> Iterator[pa.RecordBatch]:
    """mapInArrow body over task numbers (``id`` rows, one per task, as ``spark.range`` makes
    them): ``read_commit_lines`` of the ``(version, path)`` files ``assigned[id]``."""
    named = (
        pa.record_batch(
            {
                "version": pa.array([version for version, _ in assigned[task]], pa.int64()),
                "path": pa.array([path for _, path in assigned[task]], pa.string()),
            }
        )
        for batch in batches
        for task in batch.column("id").to_pylist()
    )
    yield from read_commit_lines(request, named)


#: Lines are sent in batches of about this many bytes: well under Arrow's 32-bit string offsets,
#: and small enough that Spark parses the first batch while the worker still reads the next
#: (S's 1,000 commits, 8 MB of lines: a fresh state 0.24 s against 0.27 s in one 64 MB batch).
LINE_BATCH_BYTES = 1 << 20


def _wanted_lines(request: CommitLinesRead, version: int, path: str) -> list[bytes]:
    """The non-blank lines of one commit holding a wanted string, without skipped prefixes."""
    content = read_bytes(path)
    if content is None:
        raise WorkerFailure(
            CorruptLogFileError(
                file=path, path=request.table_path, reason="it disappeared while read"
            )
        )
    wanted = tuple(text.encode() for text in request.wanted_in(version))
    # One scan of the raw bytes skips most commits (those holding no wanted string) without
    # splitting them into lines.
    if not _wanted(content, wanted):
        return []
    skipped = tuple(prefix.encode() for prefix in request.skip_prefixes)
    kept = []
    for line in content.splitlines():
        if not line or line.isspace():
            continue
        if _wanted(line, wanted) and not line.startswith(skipped):
            kept.append(line)  # checked in full (_LineBuffer.add), failed by the parsing query
        else:
            problem = shape_problem(line)  # a line no query parses: one JSON object, whole
            if problem is not None:
                text = line.decode("utf-8", "replace")
                raise WorkerFailure(corrupt_line(file_uri(path), version, problem, text))
    return kept


class _LineBuffer:
    """Lines gathered from commit files, turned into one Arrow batch at a time."""

    def __init__(self) -> None:
        self.versions: list[int] = []
        self.files: list[str] = []
        self.lines: list[bytes] = []
        self.size = 0

    def add(self, version: int, path: str, lines: list[bytes]) -> None:
        if not lines:  # most commits, when only some actions are wanted
            return
        self.versions += [version] * len(lines)
        self.files += [file_uri(path)] * len(lines)
        self.lines += lines
        self.size += sum(map(len, lines))

    def flush(self) -> pa.RecordBatch:
        lengths = pa.array([0, *map(len, self.lines)], pa.int64())
        offsets = pc.cumulative_sum(lengths).cast(pa.int32())  # checked: fails past 2 GiB
        values = pa.Array.from_buffers(
            pa.string(),
            len(self.lines),
            [None, offsets.buffers()[1], pa.py_buffer(b"".join(self.lines))],
        )
        self._check_utf8(values)
        batch = pa.RecordBatch.from_arrays(
            [
                pa.array(self.versions, pa.int64()),
                pa.array(self.files, pa.string()),
                values,
                line_problems(values),
            ],
            schema=COMMIT_LINES_SCHEMA,
        )
        self.versions, self.files, self.lines, self.size = [], [], [], 0
        return batch

    def _check_utf8(self, values: pa.Array) -> None:
        """A file whose lines are not UTF-8 fails the task, named (one validation of the whole
        batch; the lines are decoded one by one only to find the culprit)."""
        try:
            values.validate(full=True)
        except pa.ArrowInvalid:
            for version, file, line in zip(self.versions, self.files, self.lines, strict=True):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    text = line.decode("utf-8", "replace")
                    raise WorkerFailure(corrupt_line(file, version, NOT_UTF8, text)) from exc
            raise
