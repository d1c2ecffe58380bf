"""A Delta table's location and its log: listing, log segments and commit timestamps.

Responsibility: :class:`TableLog` turns a user's path into the table root and ``_delta_log``
location the server reads, lists the log, chooses a log segment (latest, a version, or the
version active at a timestamp) and loads its protocol and metadata, retrying from earlier
checkpoints where one cannot be read. It is what the feature modules (snapshots, history,
checkpoints, the change data feed) read a table through; :class:`~delta_connect_py.table.DeltaTable`
is the public facade over it.

Invariants: a TableLog holds no table state (every call lists the log afresh), so versions never
change in place; table paths are kept in Hadoop's unescaped form (``file:/a b``) and escaped for
globbing only where handed to a Spark reader.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING

import pyspark.sql.connect.functions as F
from pyspark.sql.types import LongType, StructField, StructType

from delta_connect_py import arguments
from delta_connect_py.errors import (
    CorruptLogFileError,
    DeltaError,
    InvalidTimestampError,
    MissingCommitInfoError,
    MissingCommitTimestampError,
    MissingDeltaTableError,
)
from delta_connect_py.plans.listing import LogListing, list_log
from delta_connect_py.plans.loading import (
    COMMIT_SPARK_SCHEMA,
    malformed_commits_reported,
    read_commits,
)
from delta_connect_py.plans.protocol_metadata import ProtocolAndMetadata, protocol_and_metadata
from delta_connect_py.plans.spark import collect, map_in_arrow, one_row
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.segment import (
    LogSegment,
    build_log_segment,
    earliest_reconstructable_version,
)
from delta_connect_py.protocol.timestamps import (
    CommitTimeline,
    CommitTimestamp,
    ict_start,
    monotonize,
    version_at_timestamp,
)
from delta_connect_py.worker.stores import (
    NO_STORAGE_OPTIONS,
    AccessProbe,
    StorageOptions,
    check_worker_access,
    probe_access,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
#: delta-spark's ``spark.databricks.delta.snapshotLoading.maxRetries``: how many earlier
#: checkpoints a snapshot tries when its checkpoint cannot be read.
SNAPSHOT_LOADING_MAX_RETRIES = 2


def qualify_table_path(path: str) -> str:
    """``/a/b`` -> ``file:/a/b``; ``file:///a/b/`` -> ``file:/a/b``; other URIs unchanged."""
    path = str(path)
    if not _SCHEME.match(path):
        path = "file:" + os.path.abspath(os.path.expanduser(path))
    if path.startswith("file:"):
        path = "file:/" + path[len("file:") :].lstrip("/")
    return path.rstrip("/") if path.rstrip("/") else path


#: The access probe's output (it yields no rows), as a type: a DDL string would cost pyspark an
#: analysis request to parse it.
_NO_ROWS_SCHEMA = StructType([StructField("id", LongType())])


@dataclass(frozen=True)
class TableLog:
    """The log of the Delta table at ``table_root``, read through ``spark``."""

    spark: SparkSession
    table_root: str
    #: Credentials for what the server's Python workers do on the store themselves (see
    #: ``DeltaTable.for_path``); never shown in ``repr``.
    storage_options: StorageOptions = field(default=NO_STORAGE_OPTIONS, repr=False)
    #: Whether snapshots may be answered from the session's snapshot cache (``snapshot_cache``).
    snapshot_cache: bool = field(default=True, repr=False, compare=False)

    def check_worker_file_access(self, operation: str) -> None:
        """Fail now, with a clear error, when the server's Python workers cannot write to this
        table's store (a scheme pyarrow cannot open; no or wrong credentials): before
        ``operation`` runs any job that writes."""
        check_worker_access(self.table_root, operation)
        if self.table_root.startswith("file:"):
            return
        probe = AccessProbe(operation, self.log_dir, self.storage_options)
        job = map_in_arrow(one_row(self.spark), partial(probe_access, probe), _NO_ROWS_SCHEMA)
        collect(job)

    @property
    def log_dir(self) -> str:
        """The ``_delta_log`` folder's URI."""
        return f"{self.table_root}/_delta_log"

    def list_log(self, pm_lines_after: int | None = None) -> LogListing:
        """Every log file with size and modification time (one Spark job); with
        ``pm_lines_after``, for a snapshot about to load its protocol and metadata, a local
        log's P&M lines of the commits after that version too (``list_log``)."""
        return list_log(self.spark, self.log_dir, self.storage_options, pm_lines_after)

    def log_segment(
        self, version: int | None = None, listing: LogListing | None = None
    ) -> LogSegment:
        """The log files that make up ``version`` (None: the latest): a checkpoint and the
        commits after it (lists the log unless given ``listing``; reads no file content)."""
        listing = listing or self.list_log()
        if not listing.files:
            raise MissingDeltaTableError(path=self.table_root, log_path=self.log_dir)
        return build_log_segment(
            self.table_root,
            self.log_dir,
            listing.files,
            version=version,
            last_checkpoint=listing.last_checkpoint,
        )

    def latest_version(self) -> int:
        """The newest version (lists the log; reads no file content)."""
        return self.log_segment().version

    def loaded_segment(
        self, segment: LogSegment, listing: LogListing, *, state_follows: bool = True
    ) -> tuple[LogSegment, ProtocolAndMetadata]:
        """``segment`` and its protocol and metadata; when its checkpoint cannot be read, the
        same version rebuilt from an earlier checkpoint, or from commit 0. Without
        ``state_follows``, for a caller that wants the P&M only, a checkpoint whose P&M the
        listing brought is not read at all (``protocol_and_metadata``).

        delta-spark's snapshot-loading retries: at most ``SNAPSHOT_LOADING_MAX_RETRIES``
        earlier checkpoints; the first error when none of them (nor the commits) rebuilds the
        version. Only a failure to read a checkpoint file is retried: an unreadable commit
        would be read again from any earlier checkpoint.
        """
        first_error: CorruptLogFileError | None = None
        for _ in range(SNAPSHOT_LOADING_MAX_RETRIES + 1):
            try:
                checksum_text = (
                    None
                    if segment.checksum is None
                    else listing.checksum_texts.get(segment.checksum.path)
                )
                pm = protocol_and_metadata(
                    self.spark,
                    segment,
                    self.log_dir,
                    checksum_text=checksum_text,
                    scanned=listing.pm_lines,
                    state_follows=state_follows,
                )
                return segment, pm
            except CorruptLogFileError as error:
                if segment.checkpoint is None or not _reads_checkpoint(error, segment):
                    if first_error is None:
                        raise
                    raise first_error from error
                first_error = first_error or error
                try:
                    segment = build_log_segment(
                        self.table_root,
                        self.log_dir,
                        listing.files,
                        version=segment.version,
                        checkpoint_before=segment.checkpoint.version,
                    )
                except DeltaError:
                    raise first_error from None
        assert first_error is not None
        raise first_error

    def segment_around(
        self, segment: LogSegment, error: CorruptLogFileError
    ) -> tuple[LogSegment, ProtocolAndMetadata] | None:
        """After ``error``, a failure to read ``segment``'s checkpoint (or a sidecar) whose P&M
        were not read by Spark: ``loaded_segment`` of a new listing, with Spark's P&M read,
        when that reads around the checkpoint (an earlier one, or commit 0); else None."""
        if segment.checkpoint is None or not _reads_checkpoint(error, segment):
            return None
        try:
            loaded, pm = self.loaded_segment(segment, self.list_log())
        except DeltaError:
            return None
        return None if loaded == segment else (loaded, pm)

    def version_at(self, timestamp: datetime | str, listing: LogListing | None = None) -> int:
        """delta-spark's ``getActiveCommitAtTime``: the latest commit at or before ``timestamp``."""
        if arguments.timestamp("version_at", timestamp) is None:
            raise arguments.invalid_type(
                "version_at", "timestamp", timestamp, arguments.TIMESTAMP_EXPECTED
            )
        return self.version_at_ms(to_epoch_ms(self.spark, timestamp), listing)

    def version_at_ms(
        self,
        timestamp_ms: int,
        listing: LogListing | None = None,
        timeline: CommitTimeline | None = None,
    ) -> int:
        """``version_at`` a time already in milliseconds since the epoch (``timeline``: the
        listing's ``commit_timeline``, when the caller has it)."""
        listing = listing or self.list_log()
        if timeline is None:
            timeline = self.commit_timeline(listing, self.log_segment(None, listing))
        return version_at_timestamp(
            timeline.commits,
            timestamp_ms,
            path=self.table_root,
            earliest_version=earliest_reconstructable_version(listing.files),
            ict=timeline.ict,
        )

    def commit_timeline(self, listing: LogListing, latest: LogSegment) -> CommitTimeline:
        """Every listed commit's timestamp: monotonized file times, in-commit ones from the
        version the latest metadata says they begin at (when it enables them)."""
        commits = [f for f in listing.files if f.kind is LogFileKind.COMMIT]
        file_times = monotonize([f.modification_time for f in commits])
        timestamps = {f.version: t for f, t in zip(commits, file_times, strict=True)}
        _, latest_pm = self.loaded_segment(latest, listing, state_follows=False)
        ict = ict_start(latest_pm.metadata.configuration)
        if ict is not None:
            found = self._commit_info_timestamps([f for f in commits if f.version >= ict.version])
            timestamps.update({v: t for v, t in found.items() if t is not None})
        ordered = tuple(CommitTimestamp(v, t) for v, t in sorted(timestamps.items()))
        return CommitTimeline(ordered, ict)

    def version_in_commit_timestamp(self, segment: LogSegment) -> int:
        """The ``inCommitTimestamp`` of the commit of ``segment.version``, read from its commit
        file (delta-spark's ``Snapshot.getInCommitTimestampOpt`` when neither the version
        checksum nor the P&M read had it: a segment that ends at a checkpoint). A commit
        without ``commitInfo`` is ``DELTA_MISSING_COMMIT_INFO``, one without the timestamp
        ``DELTA_MISSING_COMMIT_TIMESTAMP``."""
        version = segment.version
        own = [f for f in segment.all_commits if f.version == version]
        if not own:
            raise MissingCommitInfoError(version=version, path=self.table_root, file_listed=False)
        found = self._commit_info_timestamps(own)
        if version not in found:
            raise MissingCommitInfoError(version=version, path=self.table_root)
        ict = found[version]
        if ict is None:
            raise MissingCommitTimestampError(version=version, path=self.table_root)
        return ict

    def _commit_info_timestamps(self, commits: list[LogFile]) -> dict[int, int | None]:
        """The ``commitInfo.inCommitTimestamp`` of each commit that has a ``commitInfo`` (None
        where it has no such field; a commit with several keeps one that has it)."""
        if not commits:
            return {}
        frame = read_commits(self.spark, commits).where(F.col("commitInfo").isNotNull())
        with malformed_commits_reported(self.spark, commits, self.table_root, COMMIT_SPARK_SCHEMA):
            rows = collect(frame.select("version", "commitInfo.inCommitTimestamp"))
        found: dict[int, int | None] = {}
        for row in rows:
            if found.get(row["version"]) is None:
                found[row["version"]] = row["inCommitTimestamp"]
        return found


def to_epoch_ms(spark: SparkSession, timestamp: datetime | str) -> int:
    """``timestamp`` in milliseconds since the epoch, read as delta-spark reads a
    ``timestampAsOf`` or ``startingTimestamp``: a string as Spark casts it to a timestamp
    (``2024``, ``2024-01-01 10:00``, ``...T10:00:00Z``, ``... UTC``, ``... Europe/Paris``),
    a datetime as itself; without a zone, in the session's time zone
    (``spark.sql.session.timeZone``). Anything Spark cannot cast is
    ``DELTA_TIMESTAMP_INVALID``. A zone-aware datetime needs no request; any other value one
    (its cast, no Spark job)."""
    if isinstance(timestamp, datetime) and timestamp.tzinfo is not None:
        return _floor_ms(timestamp)
    text = timestamp.isoformat(sep=" ") if isinstance(timestamp, datetime) else timestamp
    cast = F.unix_millis(F.lit(text).try_cast("timestamp")).alias("ms")
    rows = collect(spark.sql("SELECT 1").select(cast), reads_files=False)
    millis = rows[0]["ms"]
    if millis is None:
        raise InvalidTimestampError(timestamp=text)
    return int(millis)


def _floor_ms(timestamp: datetime) -> int:
    """An aware datetime in whole milliseconds, earlier ones rounded down (as Spark does)."""
    since_epoch = timestamp - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return since_epoch // timedelta(milliseconds=1)


def _reads_checkpoint(error: CorruptLogFileError, segment: LogSegment) -> bool:
    """Whether the file ``error`` could not read is one of the segment's checkpoint files, or
    a sidecar (which only a V2 checkpoint names)."""
    assert segment.checkpoint is not None
    file = error.message_parameters.get("file", "")
    names = {checkpoint_file.name for checkpoint_file in segment.checkpoint.files}
    return file.rsplit("/", 1)[-1] in names or "/_delta_log/_sidecars/" in file
