"""Commit timestamps: monotonization and timestamp-to-version resolution for time travel.

Responsibility: delta-spark's ``monotonizeCommitTimestamps`` and the lookup behind
``timestampAsOf`` (``DeltaHistoryManager.getActiveCommitAtTime``), over plain
(version, timestamp) pairs.

Invariants: timestamps are epoch milliseconds (UTC). :func:`monotonize` makes a sequence
strictly increasing by bumping each non-increasing timestamp to its predecessor + 1.
:func:`version_at_timestamp` expects ascending, monotonized commits and returns the latest
commit at or before ``t`` among the commits at or after ``earliest_version``; a ``t`` after the
latest commit or before the earliest usable one raises the matching Delta error, with
timestamps rendered ``YYYY-MM-DD HH:MM:SS.fff`` in UTC. Nothing here reads the clock.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from delta_connect_py.errors import (
    TimestampEarlierThanCommitRetentionError,
    TimestampGreaterThanCommitError,
)

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


def format_timestamp_ms(timestamp_ms: int) -> str:
    """``YYYY-MM-DD HH:MM:SS.fff`` in UTC."""
    moment = _EPOCH + timedelta(milliseconds=timestamp_ms)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"


def version_at_timestamp(
    commits: Sequence[CommitTimestamp], timestamp_ms: int, *, path: str, earliest_version: int
) -> int:
    """The version of the latest usable commit with ``timestamp <= timestamp_ms``."""
    usable = [commit for commit in commits if commit.version >= earliest_version]
    if not usable:
        raise ValueError(f"no commits at or after version {earliest_version} in {path}")
    if timestamp_ms > usable[-1].timestamp:
        raise TimestampGreaterThanCommitError(
            provided_timestamp=format_timestamp_ms(timestamp_ms),
            path=path,
            maximum_timestamp=format_timestamp_ms(usable[-1].timestamp),
        )
    if timestamp_ms < usable[0].timestamp:
        raise TimestampEarlierThanCommitRetentionError(
            user_timestamp=format_timestamp_ms(timestamp_ms),
            path=path,
            commit_timestamp=format_timestamp_ms(usable[0].timestamp),
        )
    index = bisect.bisect_right([commit.timestamp for commit in usable], timestamp_ms) - 1
    return usable[index].version
