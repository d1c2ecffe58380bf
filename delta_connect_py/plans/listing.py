"""Listing a table's ``_delta_log`` on the server.

Responsibility: one collect that returns every log file's path, size and modification time
together with the text of ``_last_checkpoint`` (and, for a local log, of its newest small
version checksum) (which Spark's readers cannot see: its name starts
with ``_``). A local log is listed by one Python worker task (a directory listing, milliseconds
for 10,000 files); any other file system through Spark's ``binaryFile`` source, which lists
through the server's Hadoop file system and credentials and never reads content.

The listing also carries the server's clock just before it ran (``listed_at_ms``), so that a later
call can ask, with no Spark job, whether any log file was written since
(:func:`log_file_names_modified_after`: the driver lists the folder while analysing a plan).

Invariants: the client never touches the files; a missing ``_delta_log`` yields an empty
listing (the snapshot turns it into ``DELTA_MISSING_DELTA_TABLE``); a corrupt or unreadable
``_last_checkpoint`` yields no hint (the listing decides), never an error; only a corrupt one is
warned about: one the workers cannot reach (an object store they have no credentials for:
``_last_checkpoint`` is read by a Python worker, see ``worker.stores``) is an optional hint
missed, logged at debug level.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F
from pyspark.errors import AnalysisException

from delta_connect_py.plans.protocol_metadata import (
    ScannedPmLines,
    pm_lines_scan,
    scanned_line_columns,
)
from delta_connect_py.plans.spark import (
    collect,
    escape_glob,
    map_in_arrow,
    one_row,
    session_conf,
    spark_schema,
    strict_reader,
    union_all,
)
from delta_connect_py.protocol.filenames import LogFile, parse_log_file
from delta_connect_py.protocol.last_checkpoint import LastCheckpoint, parse_last_checkpoint
from delta_connect_py.worker.log_files import (
    CLOCK_ROW,
    LAST_CHECKPOINT_NAME,
    LISTING_SCHEMA,
    MISSING,
    NO_LOG_DIR,
    PM_CHECKPOINT,
    PM_LINE,
    PM_SCAN,
    UNREACHABLE,
    LastCheckpointRead,
    list_local_log,
    read_last_checkpoint,
)
from delta_connect_py.worker.stores import (
    NO_STORAGE_OPTIONS,
    StorageOptions,
    unsupported_scheme,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

log = logging.getLogger(__name__)

#: Listing many tiny files: one split for all of them instead of one task per few files.
LISTING_CONF = {
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
    "spark.sql.files.openCostInBytes": "0",
}


@dataclass(frozen=True)
class LogListing:
    log_dir: str
    files: tuple[LogFile, ...]
    last_checkpoint: LastCheckpoint | None
    log_dir_exists: bool
    #: Path -> text of the version checksums the listing brought along (a local log's newest
    #: one, see ``worker.log_files.list_local_log``).
    checksum_texts: Mapping[str, str] = field(default_factory=dict)
    #: The server's clock (ms since the epoch) when the listing's query was planned: files
    #: written after the listing have modification times from about then on. None: unknown.
    listed_at_ms: int | None = None
    #: The P&M lines of the newest commits, when asked for and the listing's job read them (a
    #: local log: see ``protocol_metadata.pm_lines_scan``).
    pm_lines: ScannedPmLines | None = None

    @property
    def newest_modification_ms(self) -> int:
        """The newest modification time among the listed log files (0 when none)."""
        return max((f.modification_time for f in self.files), default=0)


def _files_frame(spark: SparkSession, log_dir: str) -> DataFrame:
    return (
        strict_reader(spark)
        .format("binaryFile")
        .load(escape_glob(log_dir))
        .select(
            F.col("path"),
            F.col("length"),
            F.unix_millis(F.col("modificationTime")).alias("modificationTime"),
            F.lit(None).cast("string").alias("content"),
        )
    )


def _clock_frame(spark: SparkSession) -> DataFrame:
    """One row holding the server's clock: ``current_timestamp()`` is fixed when the query is
    planned, before a worker lists and right after the driver lists for ``binaryFile``.

    The milliseconds travel as text: the optimizer folds the clock into a literal, and Spark
    writes a long literal into the Java code it generates, whose compiled classes it caches by
    their text; every listing then compiled its query anew (two classes, 10-15 ms a listing).
    A string literal is passed to the code as a reference instead.
    """
    return one_row(spark).select(
        F.lit("").alias("path"),
        F.lit(CLOCK_ROW).cast("long").alias("length"),
        F.lit(None).cast("long").alias("modificationTime"),
        F.unix_millis(F.current_timestamp()).cast("string").alias("content"),
    )


def _hint_frame(spark: SparkSession, log_dir: str, options: StorageOptions) -> DataFrame:
    request = LastCheckpointRead(log_dir=log_dir, storage_options=options)
    reader = partial(read_last_checkpoint, request)
    # One partition: the reader runs once per partition, and one row is wanted.
    return map_in_arrow(one_row(spark), reader, spark_schema(LISTING_SCHEMA))


def _local_listing_frame(
    spark: SparkSession, log_dir: str, pm_lines_after: int | None
) -> DataFrame:
    scan = None if pm_lines_after is None else pm_lines_scan(pm_lines_after)
    reader = partial(list_local_log, LastCheckpointRead(log_dir=log_dir), scan)
    return map_in_arrow(one_row(spark), reader, spark_schema(LISTING_SCHEMA))


@cache
def _pm_scan_columns() -> tuple[Column, ...]:
    """A local listing's ``content`` and P&M columns (``scanned_line_columns``), built once: a
    column is an immutable expression, and the parse's checks cost milliseconds to build."""
    is_pm_line = F.col("length") == F.lit(PM_LINE)
    # A P&M line comes back parsed only, not also as its text.
    content = F.when(~is_pm_line, F.col("content")).alias("content")
    return (content, *scanned_line_columns(is_pm_line, F.col("content")))


def _listing_rows(
    spark: SparkSession, log_dir: str, options: StorageOptions, pm_lines_after: int | None
) -> list[Any] | None:
    """The listing and hint rows, or None when ``log_dir`` does not exist."""
    if log_dir.startswith("file:"):
        listing = _local_listing_frame(spark, log_dir, pm_lines_after)
        local = union_all([listing, _clock_frame(spark)])
        if pm_lines_after is not None:
            local = local.select("path", "length", "modificationTime", *_pm_scan_columns())
        rows = collect(local, reads_files=False)
        return None if any(length == NO_LOG_DIR for _, length, *_ in rows) else rows
    frames = [_files_frame(spark, log_dir), _clock_frame(spark)]
    if unsupported_scheme(log_dir) is None:  # else no worker can read the hint
        frames.append(_hint_frame(spark, log_dir, options))
    listing = union_all(frames)
    try:
        with session_conf(spark, {}, unconditional_hints=LISTING_CONF):
            return collect(listing)
    except AnalysisException as exc:
        if not _is_path_not_found(exc):
            raise
        return None


def list_log(
    spark: SparkSession,
    log_dir: str,
    options: StorageOptions = NO_STORAGE_OPTIONS,
    pm_lines_after: int | None = None,
) -> LogListing:
    """Every Delta log file in ``log_dir`` plus the parsed ``_last_checkpoint`` hint (read by a
    worker with ``options``, see ``worker.stores``); with ``pm_lines_after``, a local log's
    listing also brings the P&M lines of its commits after that version, or, when a checkpoint
    is newer, the newest checkpoint's P&M and the lines of the commits after it
    (``LogListing.pm_lines``)."""
    rows = _listing_rows(spark, log_dir, options, pm_lines_after)
    if rows is None:
        return LogListing(log_dir, (), None, log_dir_exists=False)
    files: list[LogFile] = []
    checksum_texts: dict[str, str] = {}
    hint_rows: list[Any] = []
    pm_rows: list[Any] = []
    listed_at_ms: int | None = None
    for row in rows:
        # Unpacked: a Row looks a name (or an index) up in Python (thousands of rows).
        path, length, modification_time, content, *_ = row
        if length == CLOCK_ROW:
            listed_at_ms = int(content)
        elif length in _SCAN_KINDS:
            pm_rows.append(row)
        elif _is_hint(path, length):
            hint_rows.append(row)
        else:
            file = parse_log_file(path, length, modification_time)
            if file is not None:
                files.append(file)
            if content:
                checksum_texts[path] = content
    return LogListing(
        log_dir=log_dir,
        files=tuple(sorted(files, key=lambda f: f.name)),
        last_checkpoint=_parse_hint(hint_rows, log_dir),
        log_dir_exists=True,
        checksum_texts=checksum_texts,
        listed_at_ms=listed_at_ms,
        pm_lines=_scanned_pm_lines(pm_rows),
    )


#: The ``length`` of the rows a P&M scan adds to a listing (``worker.log_files``).
_SCAN_KINDS = frozenset((PM_LINE, PM_SCAN, PM_CHECKPOINT))


def _scanned_pm_lines(rows: Sequence[Any]) -> ScannedPmLines | None:
    """The P&M lines of a listing's rows, when it made the scan (its ``PM_SCAN`` row)."""
    scans = [row for row in rows if row["length"] == PM_SCAN]
    if len(scans) != 1:
        return None
    lines = [row for row in rows if row["length"] == PM_LINE]
    checkpoint = [row for row in rows if row["length"] == PM_CHECKPOINT]
    return ScannedPmLines(
        after_version=scans[0]["modificationTime"],
        newest_version=int(scans[0]["content"]),
        checkpoint_files=tuple(row["path"] for row in checkpoint),
        checkpoint_schema=checkpoint[0]["content"] if checkpoint else None,
        rows=tuple(
            {
                "version": row["modificationTime"],
                "protocol": row["protocol"],
                "metaData": row["metaData"],
                "ict": row["ict"],
                "invalid": row["invalid"],
            }
            for row in lines
        ),
    )


def log_file_names_modified_after(
    spark: SparkSession, log_dir: str, after_ms: int
) -> list[str] | None:
    """The names of the visible files in ``log_dir`` modified strictly after ``after_ms`` (ms
    since the epoch); None when ``log_dir`` does not exist.

    One ``AnalyzePlan`` request and no Spark job: the driver lists the folder while resolving a
    ``binaryFile`` read, filtered by its ``modifiedAfter`` option (microseconds, UTC), and
    ``inputFiles`` returns the names. The files' sizes and times do not travel.
    """
    after = datetime.fromtimestamp(after_ms / 1000, tz=timezone.utc)
    reader = (
        strict_reader(spark)
        .format("binaryFile")
        .option("timeZone", "UTC")
        .option("modifiedAfter", after.strftime("%Y-%m-%dT%H:%M:%S.%f"))
    )
    try:
        paths = reader.load(escape_glob(log_dir)).inputFiles()
    except AnalysisException as exc:
        if not _is_path_not_found(exc):
            raise
        return None
    return [path.rsplit("/", 1)[-1] for path in paths]


def _is_path_not_found(exc: AnalysisException) -> bool:
    """Whether Spark refused a read because its path does not exist (a missing log folder)."""
    return "PATH_NOT_FOUND" in str(exc)


def _is_hint(path: str, length: int) -> bool:
    """Whether a listing row is the ``_last_checkpoint`` row (a file row never has a name
    starting with ``_``)."""
    return length < 0 or path.endswith("/" + LAST_CHECKPOINT_NAME)


def _parse_hint(hint_rows: Sequence[Any], log_dir: str) -> LastCheckpoint | None:
    if not hint_rows:
        return None
    row = hint_rows[0]
    length, content = row["length"], row["content"]
    if length == MISSING:
        return None
    if length == UNREACHABLE:
        log.debug("%s/_last_checkpoint not read by the workers (%s)", log_dir, content)
        return None
    try:
        return parse_last_checkpoint(content)
    except ValueError as exc:
        log.warning(
            "%s/_last_checkpoint is corrupted (%s). Will search the checkpoint files directly",
            log_dir,
            exc if length >= 0 else content,
        )
        return None
