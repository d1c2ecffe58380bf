"""Commit timestamps: monotonization and timestamp-to-version resolution for time travel.

Responsibility: delta-spark's ``monotonizeCommitTimestamps`` and the lookup behind
``timestampAsOf`` (``DeltaHistoryManager.getActiveCommitAtTime``), over plain
(version, timestamp) pairs.

Invariants: timestamps are epoch milliseconds (UTC). :func:`monotonize` makes a sequence
strictly increasing by bumping each non-increasing timestamp to its predecessor + 1.
:func:`version_at_timestamp` expects ascending commits (file times monotonized, in-commit
timestamps where the table has them) and returns the latest commit at or before ``t`` among
the commits at or after ``earliest_version``, searching only the in-commit-timestamp range or
only the range before it (:func:`active_commit`); a ``t`` after the latest commit or before the
range's first raises the matching Delta error, with timestamps rendered
``YYYY-MM-DD HH:MM:SS.fff`` in UTC. Nothing here reads the clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from delta_connect_py.errors import (
    TimestampEarlierThanCommitRetentionError,
    TimestampGreaterThanCommitError,
)
from delta_connect_py.protocol import properties as props

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class CommitTimestamp:
    """A commit version and its (monotonized) timestamp in ms."""

    version: int
    timestamp: int


def monotonize(timestamps: Sequence[int]) -> list[int]:
    """Walking ascending, whenever ``ts[i] >= ts[i+1]`` set ``ts[i+1] = ts[i] + 1``."""
    result: list[int] = []
    for timestamp in timestamps:
        result.append(timestamp if not result or timestamp > result[-1] else result[-1] + 1)
    return result


def utc_datetime(timestamp_ms: int) -> datetime | None:
    """``timestamp_ms`` as a UTC ``datetime``; None outside the years 1-9999 it can hold (a
    long's milliseconds reach some 292 million years either side of the epoch)."""
    try:
        return _EPOCH + timedelta(milliseconds=timestamp_ms)
    except OverflowError:
        return None


def format_timestamp_ms(timestamp_ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.fff`` in UTC; the milliseconds themselves for a moment outside the
    years 1-9999, which error messages name too."""
    moment = utc_datetime(timestamp_ms)
    if moment is None:
        return f"{timestamp_ms} ms after the epoch"
    return f"{moment.year:04d}-{moment:%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


@dataclass(frozen=True)
class IctStart:
    """Where a table's in-commit timestamps begin: the first version whose timestamp is its
    ``inCommitTimestamp``, and the enablement time (``delta.inCommitTimestampEnablement*``);
    ``enabled_ms`` None: in-commit timestamps from the table's creation."""

    version: int
    enabled_ms: int | None


def ict_start(configuration: Mapping[str, str]) -> IctStart | None:
    """Where the in-commit timestamps of a table whose latest metadata has ``configuration``
    begin (None: they are not enabled): its enablement properties, else from creation."""
    if not props.in_commit_timestamps_enabled(configuration):
        return None
    enablement = props.ict_enablement(configuration)
    return IctStart(*enablement) if enablement else IctStart(0, None)


@dataclass(frozen=True)
class CommitTimeline:
    """Every listed commit's timestamp (ascending versions) and where in-commit timestamps
    begin (None: the table has none)."""

    commits: tuple[CommitTimestamp, ...]
    ict: IctStart | None = None


def active_commit(
    commits: Sequence[CommitTimestamp], timestamp_ms: int, ict: IctStart | None = None
) -> CommitTimestamp:
    """delta-spark's ``getActiveCommitAtTime`` search over ``commits`` (ascending, non-empty):
    a time at or after the in-commit timestamps' enablement is searched among the commits that
    have one, any other among those before them (by monotonized file time), so that file times
    rewritten by a copy never mix with in-commit timestamps. The latest commit of that range at
    or before ``timestamp_ms``, else the range's first commit (then later than the time); the
    table's first commit when the range is empty."""
    if ict is None:
        window = list(commits)
    elif ict.enabled_ms is None or ict.enabled_ms <= timestamp_ms:
        window = [c for c in commits if c.version >= ict.version]
    else:
        window = [c for c in commits if c.version < ict.version]
    if not window:
        return commits[0]
    index = bisect.bisect_right([commit.timestamp for commit in window], timestamp_ms) - 1
    return window[max(index, 0)]


def version_at_timestamp(
    commits: Sequence[CommitTimestamp],
    timestamp_ms: int,
    *,
    path: str,
    earliest_version: int,
    ict: IctStart | None = None,
) -> int:
    """The version active at ``timestamp_ms`` (:func:`active_commit` of the usable commits);
    a time before it (``DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION``) or after the latest
    commit (``DELTA_TIMESTAMP_GREATER_THAN_COMMIT``) is refused, as delta-spark refuses it."""
    usable = [commit for commit in commits if commit.version >= earliest_version]
    if not usable:
        raise ValueError(f"no commits at or after version {earliest_version} in {path}")
    commit = active_commit(usable, timestamp_ms, ict)
    if commit.timestamp > timestamp_ms:
        raise TimestampEarlierThanCommitRetentionError(
            user_timestamp=format_timestamp_ms(timestamp_ms),
            path=path,
            commit_timestamp=format_timestamp_ms(commit.timestamp),
        )
    if commit == usable[-1] and commit.timestamp < timestamp_ms:
        raise TimestampGreaterThanCommitError(
            provided_timestamp=format_timestamp_ms(timestamp_ms),
            path=path,
            maximum_timestamp=format_timestamp_ms(commit.timestamp),
        )
    return commit.version
