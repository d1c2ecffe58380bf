"""The commits of a change data feed range and what they say.

Responsibility: find the commit files of a version range (refusing a gap:
``DELTA_MISSING_FILES_UNEXPECTED_VERSION``), collect their file actions once
(``filterCDCActions`` per commit, stats dropped: metadata-sized, never table rows), the metadata
in effect at a version (without a job where a commit or an earlier answer says it), and each
version's commit timestamp (in-commit timestamp, else the commit file's time monotonized over
versions ``start - 100 .. end``, delta-spark's rule).

Invariants: a range's start version is one a snapshot can be built at (else that snapshot's
error); every snapshot made here is checked to be readable.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyspark.sql.connect.functions as F

from delta_connect_py.errors import (
    MissingFilesUnexpectedVersionError,
)
from delta_connect_py.plans.loading import (
    COMMIT_SPARK_SCHEMA,
    malformed_commits_reported,
    read_commits,
)
from delta_connect_py.plans.spark import collect
from delta_connect_py.protocol.actions import Metadata
from delta_connect_py.protocol.cdf import (
    CommitChanges,
    filter_cdc_actions,
)
from delta_connect_py.protocol.filenames import LogFile, LogFileKind
from delta_connect_py.protocol.timestamps import monotonize
from delta_connect_py.snapshot import Snapshot, check_snapshot_readable, now_ms
from delta_connect_py.table_schema import check_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.table_log import TableLog


#: delta-spark monotonizes commit times starting this many versions before the range.
POTENTIALLY_UNMONOTONIZED_TIMESTAMPS = 100
_ACTION_COLUMNS = ("add", "remove", "cdc", "commitInfo", "metaData", "protocol")


def commits_by_version(listing: LogListing) -> dict[int, LogFile]:
    commits: dict[int, LogFile] = {}
    for file in listing.files:
        if file.kind is LogFileKind.COMMIT:
            commits.setdefault(file.version, file)
    return commits


def require_commits(
    path: str, commits: Mapping[int, LogFile], start: int, end: int
) -> list[LogFile]:
    """The commit files of ``start..end``; the first missing one is a data-loss error."""
    missing = next((v for v in range(start, end + 1) if v not in commits), None)
    if missing is not None:
        seen = min((v for v in commits if v > missing), default=end + 1)
        raise MissingFilesUnexpectedVersionError(
            path=path,
            expected_version=missing,
            seen_version=seen,
            missing=_ranges(range(missing, seen)),
        )
    return [commits[v] for v in range(start, end + 1)]


def _ranges(versions: Sequence[int]) -> str:
    if len(versions) <= 3:
        return ", ".join(map(str, versions))
    return f"{versions[0]}..{versions[-1]} ({len(versions)} versions)"


def commits_for_range(
    table: TableLog, listing: LogListing, commits: Mapping[int, LogFile], start: int, end: int
) -> list[LogFile]:
    """The commits of ``start..end``. Like delta-spark, the start version must be one a
    snapshot can be built at (else that snapshot's error, e.g. a truncated log)."""
    if start not in commits:
        table.log_segment(start, listing)
    return require_commits(table.table_root, commits, start, end)


def _action_frame(spark: SparkSession, files: Sequence[LogFile]) -> DataFrame:
    frame = read_commits(spark, files)
    # Whole actions, not their required fields: a line is checked as its row is read, and an
    # action missing its path must reach the check (DELTA_CORRUPT_LOG_FILE), not be skipped.
    present = reduce(operator.or_, [F.col(name).isNotNull() for name in _ACTION_COLUMNS])
    return frame.where(present).select(
        "version",
        F.monotonically_increasing_id().alias("_order"),
        F.col("add").dropFields("stats", "tags").alias("add"),
        F.col("remove").dropFields("stats", "tags").alias("remove"),
        F.col("cdc").dropFields("tags").alias("cdc"),
        F.col("commitInfo"),
        F.col("metaData"),
        F.col("protocol"),
    )


def read_commit_changes(table: TableLog, files: Sequence[LogFile]) -> list[CommitChanges]:
    """``filterCDCActions`` of each commit in ``files`` (one collect of file actions); a
    metaData whose schema is not one is ``DELTA_CORRUPT_LOG_FILE`` naming its commit."""
    if not files:
        return []
    with malformed_commits_reported(table.spark, files, table.table_root, COMMIT_SPARK_SCHEMA):
        rows = collect(_action_frame(table.spark, files))
    rows.sort(key=lambda r: (r["version"], r["_order"]))
    lines: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        values = row.asDict(recursive=True)
        lines[values["version"]].append({name: values[name] for name in _ACTION_COLUMNS})
    changes = [filter_cdc_actions(f.version, lines.get(f.version, [])) for f in files]
    for file, change in zip(files, changes, strict=True):
        if change.metadata is not None:
            metadata = Metadata.from_action(change.metadata)
            check_schema(metadata, file.path, table.log_dir, change.version)
    return changes


def snapshot_at(table: TableLog, listing: LogListing, version: int) -> Snapshot:
    """The snapshot at ``version`` from an existing listing (one P&M job, no re-listing)."""
    segment, pm = table.loaded_segment(table.log_segment(version, listing), listing)
    check_snapshot_readable(table, pm, segment.version)
    return Snapshot(table=table, segment=segment, protocol_and_metadata=pm, created_at_ms=now_ms())


def metadata_at(
    table: TableLog,
    listing: LogListing,
    first: CommitChanges,
    known: Mapping[int, Metadata] | None = None,
) -> Metadata:
    """The metadata at ``first``'s version without a job when possible: its own metaData
    action, else a known metadata of that version or the one before, else the snapshot's."""
    known = known or {}
    if first.metadata is not None:
        return Metadata.from_action(first.metadata)
    for version in (first.version, first.version - 1):
        if version in known:
            return known[version]
    return snapshot_at(table, listing, first.version).metadata


def readable_start_metadata(table: TableLog, listing: LogListing, first: CommitChanges) -> Metadata:
    """The metadata at ``first``'s version, where the protocol in force is readable.

    ``check_protocols`` checks ``first``'s own protocol action; without one, the start
    snapshot (which delta-spark's ``changesToDF`` always loads) checks the protocol in force,
    even when ``first``'s metaData alone would have given the metadata."""
    if first.metadata is not None and first.protocol is None:
        return snapshot_at(table, listing, first.version).metadata
    return metadata_at(table, listing, first)


def commit_timestamps_ms(
    commits: Mapping[int, LogFile], changes: Sequence[CommitChanges], start: int, end: int
) -> dict[int, int]:
    """Per version: the in-commit timestamp, else the monotonized commit-file time."""
    window = [
        v for v in sorted(commits) if start - POTENTIALLY_UNMONOTONIZED_TIMESTAMPS <= v <= end
    ]
    times = monotonize([commits[v].modification_time for v in window])
    result = dict(zip(window, times, strict=True))
    for change in changes:
        if change.in_commit_timestamp is not None:
            result[change.version] = change.in_commit_timestamp
    return result
