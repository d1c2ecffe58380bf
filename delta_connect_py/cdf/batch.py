"""Batch reads of the change data feed: ``DeltaTable.load_cdf``.

Responsibility: delta-spark's ``CDCReader.changesToDF``: resolve the range from versions or
timestamps, check it (:mod:`delta_connect_py.cdf.checks`) and build its rows
(:mod:`delta_connect_py.cdf.rows`).

Invariants: a start (version or timestamp) is required (``DELTA_NO_START_FOR_CDC_READ``); a range
past the latest version is an error unless ``allow_out_of_range``, then an empty frame with the
result schema.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from delta_connect_py import arguments
from delta_connect_py.cdf.checks import (
    check_batch_range,
    check_features_in_range,
    check_protocols,
    last_metadata,
    read_schema,
)
from delta_connect_py.cdf.commits import (
    commit_timestamps_ms,
    commits_by_version,
    commits_for_range,
    read_commit_changes,
    readable_start_metadata,
    snapshot_at,
)
from delta_connect_py.cdf.rows import changes_frame, entries_of
from delta_connect_py.errors import (
    CdcStartVersionAfterLatestError,
    InvalidCdcRangeError,
    NoStartForCdcReadError,
    TimestampGreaterThanCommitError,
)
from delta_connect_py.job_log import logged_job
from delta_connect_py.protocol.cdf import index_commit
from delta_connect_py.protocol.timestamps import active_commit, format_timestamp_ms
from delta_connect_py.table_log import to_epoch_ms

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from delta_connect_py.plans.listing import LogListing
    from delta_connect_py.table_log import TableLog


_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Range:
    start: int
    end: int
    empty: bool = False


def _resolve_range(
    table: TableLog,
    listing: LogListing,
    latest: int,
    starting: tuple[int | None, datetime | str | None],
    ending: tuple[int | None, datetime | str | None],
    allow_out_of_range: bool,
) -> _Range:
    """Versions from the options (timestamps: first commit at/after start, last at/before end)."""
    start_version, start_ts = starting  # checked by ``load_cdf``: at most one of each pair
    end_version, end_ts = ending
    if start_version is None and start_ts is None:
        # delta-spark's batch reader has no default start (readChangeFeed without one fails).
        raise NoStartForCdcReadError(path=table.table_root)
    start = 0 if start_version is None else start_version
    end = latest if end_version is None else min(end_version, latest)
    if start_ts is not None or end_ts is not None:
        timeline = table.commit_timeline(listing, table.log_segment(None, listing))
        last = timeline.commits[-1]
        if start_ts is not None:
            t = to_epoch_ms(table.spark, start_ts)
            # delta-spark: the commit active then if it was made exactly then, else the next.
            active = active_commit(timeline.commits, t, timeline.ict)
            start = active.version if active.timestamp >= t else active.version + 1
            if start > last.version:
                if allow_out_of_range:
                    return _Range(latest + 1, latest, empty=True)
                raise TimestampGreaterThanCommitError(
                    provided_timestamp=format_timestamp_ms(t),
                    path=table.table_root,
                    maximum_timestamp=format_timestamp_ms(last.timestamp),
                )
        if end_ts is not None:
            # After the last commit: delta-spark's time travel refusal, unless out of range is
            # allowed (its timestampOutOfRange setting), which ends at the latest version.
            end_ms = to_epoch_ms(table.spark, end_ts)
            clamped = end_ms > last.timestamp and allow_out_of_range
            end = latest if clamped else table.version_at_ms(end_ms, listing, timeline)
        if start_ts is not None and end_ts is not None and end == start - 1:
            return _Range(start, end, empty=True)
    return _Range(start, end)


def load_cdf(
    table: TableLog,
    starting_version: int | None = None,
    ending_version: int | None = None,
    *,
    starting_timestamp: datetime | str | None = None,
    ending_timestamp: datetime | str | None = None,
    allow_out_of_range: bool = False,
) -> DataFrame:
    """Changed rows of versions ``[start, end]`` (end defaults to the latest version).

    A start (version or timestamp) is required, as in delta-spark (``DELTA_NO_START_FOR_CDC_READ``
    otherwise). Runs small Spark jobs now (listing, the start snapshot's P&M, one collect of the
    range's file actions; the latest P&M when ``end`` is before it); the returned DataFrame reads
    the data files lazily.
    """
    function = "load_cdf"
    starting_version, starting_timestamp = arguments.version_or_timestamp(
        function,
        arguments.cdf_version(function, starting_version, "starting_version"),
        starting_timestamp,
        ("starting_version", "starting_timestamp"),
    )
    ending_version, ending_timestamp = arguments.version_or_timestamp(
        function,
        arguments.cdf_version(function, ending_version, "ending_version"),
        ending_timestamp,
        ("ending_version", "ending_timestamp"),
    )
    with logged_job(_log, "change data feed read", table=table.table_root):
        return _load_cdf(
            table,
            (starting_version, starting_timestamp),
            (ending_version, ending_timestamp),
            allow_out_of_range,
        )


def _load_cdf(
    table: TableLog,
    starting: tuple[int | None, datetime | str | None],
    ending: tuple[int | None, datetime | str | None],
    allow_out_of_range: bool,
) -> DataFrame:
    """``load_cdf`` with its arguments checked: the range's jobs, and its lazy rows."""
    listing = table.list_log()
    latest = table.log_segment(None, listing).version
    window = _resolve_range(
        table,
        listing,
        latest,
        starting,
        ending,
        allow_out_of_range,
    )
    if window.empty or window.start > latest:
        if not window.empty and not allow_out_of_range:
            raise CdcStartVersionAfterLatestError(
                start=window.start, latest=latest, path=table.table_root
            )
        return changes_frame(table.spark, snapshot_at(table, listing, latest).metadata, [])
    if window.end < window.start:
        raise InvalidCdcRangeError(start=window.start, end=window.end)
    commits = commits_by_version(listing)
    files = commits_for_range(table, listing, commits, window.start, window.end)
    changes = read_commit_changes(table, files)
    check_protocols(table.table_root, changes)
    start_metadata = readable_start_metadata(table, listing, changes[0])
    check_features_in_range(table, listing, changes, start_checked=True)
    end_metadata = last_metadata(start_metadata, changes)
    read = read_schema(table, listing, start_metadata, end_metadata, window.end, latest)
    bounds = (window.start, window.end)
    check_batch_range(table.table_root, start_metadata, changes, bounds, read)
    timestamps = commit_timestamps_ms(commits, changes, window.start, window.end)
    indexed = [f for change in changes for f in index_commit(change)]
    entries = entries_of(table.table_root, indexed, timestamps)
    return changes_frame(table.spark, read.metadata, entries, table.table_root)
