"""Commit timestamp monotonization and timestamp -> version (notes 2.4)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from delta_connect_py.errors import (
    TimestampEarlierThanCommitRetentionError,
    TimestampGreaterThanCommitError,
)
from delta_connect_py.protocol.timestamps import (
    CommitTimestamp,
    IctStart,
    active_commit,
    format_timestamp_ms,
    monotonize,
    utc_datetime,
    version_at_timestamp,
)


def test_monotonize() -> None:
    assert monotonize([]) == []
    assert monotonize([5]) == [5]
    assert monotonize([1, 2, 3]) == [1, 2, 3]
    assert monotonize([10, 10, 5, 20, 19]) == [10, 11, 12, 20, 21]


@given(st.lists(st.integers(min_value=0, max_value=10**13)))
def test_monotonize_strictly_increasing(timestamps: list[int]) -> None:
    result = monotonize(timestamps)
    assert len(result) == len(timestamps)
    assert all(a < b for a, b in itertools.pairwise(result))
    assert all(r >= t for r, t in zip(result, timestamps, strict=True))


def test_format() -> None:
    assert format_timestamp_ms(0) == "1970-01-01 00:00:00.000"
    assert format_timestamp_ms(1_700_000_000_123) == "2023-11-14 22:13:20.123"
    assert format_timestamp_ms(-62_135_596_800_000) == "0001-01-01 00:00:00.000"


@pytest.mark.parametrize("timestamp_ms", [253_402_300_800_000, -62_135_596_800_001, 2**63 - 1])
def test_a_moment_outside_the_years_a_datetime_holds(timestamp_ms: int) -> None:
    assert utc_datetime(timestamp_ms) is None
    assert format_timestamp_ms(timestamp_ms) == f"{timestamp_ms} ms after the epoch"


def test_the_last_moment_a_datetime_holds() -> None:
    moment = utc_datetime(253_402_300_799_999)
    assert moment is not None and (moment.year, moment.microsecond) == (9999, 999_000)


COMMITS = [CommitTimestamp(v, t) for v, t in [(0, 1000), (1, 2000), (2, 3000), (3, 4000)]]


@pytest.mark.parametrize(("t", "version"), [(1000, 0), (1999, 0), (2000, 1), (3500, 2), (4000, 3)])
def test_version_at_timestamp(t: int, version: int) -> None:
    assert version_at_timestamp(COMMITS, t, path="/t", earliest_version=0) == version


def test_after_latest() -> None:
    with pytest.raises(TimestampGreaterThanCommitError) as info:
        version_at_timestamp(COMMITS, 4001, path="/t", earliest_version=0)
    params = info.value.getMessageParameters()
    assert params["provided_timestamp"] == "1970-01-01 00:00:04.001"
    assert params["maximum_timestamp"] == "1970-01-01 00:00:04.000"
    assert params["path"] == "/t"


def test_before_earliest_usable() -> None:
    with pytest.raises(TimestampEarlierThanCommitRetentionError) as info:
        version_at_timestamp(COMMITS, 2500, path="/t", earliest_version=2)
    assert info.value.getMessageParameters()["commit_timestamp"] == "1970-01-01 00:00:03.000"
    assert info.value.getMessageParameters()["user_timestamp"] == "1970-01-01 00:00:02.500"
    with pytest.raises(TimestampEarlierThanCommitRetentionError):
        version_at_timestamp(COMMITS, 999, path="/t", earliest_version=0)
    assert version_at_timestamp(COMMITS, 3000, path="/t", earliest_version=2) == 2


def test_no_usable_commits() -> None:
    with pytest.raises(ValueError):
        version_at_timestamp(COMMITS, 3000, path="/t", earliest_version=9)


#: In-commit timestamps from v3 (enabled at 3000 ms); v0-v2 copied later, their file times
#: rewritten to 9000-9002 ms (as ``cp -r`` leaves them), after every in-commit timestamp.
COPIED = [CommitTimestamp(v, t) for v, t in [(0, 9000), (1, 9001), (2, 9002)]] + [
    CommitTimestamp(v, t) for v, t in [(3, 3000), (4, 4000), (5, 5000)]
]
ICT_FROM_3 = IctStart(3, 3000)


@pytest.mark.parametrize(("t", "version"), [(3000, 3), (3999, 3), (4000, 4), (5000, 5)])
def test_a_time_after_the_enablement_is_searched_among_in_commit_timestamps(
    t: int, version: int
) -> None:
    found = version_at_timestamp(COPIED, t, path="/t", earliest_version=0, ict=ICT_FROM_3)
    assert found == version


def test_a_time_before_the_enablement_is_searched_among_file_times_only() -> None:
    with pytest.raises(TimestampEarlierThanCommitRetentionError) as info:
        version_at_timestamp(COPIED, 2999, path="/t", earliest_version=0, ict=ICT_FROM_3)
    assert info.value.getMessageParameters()["commit_timestamp"] == "1970-01-01 00:00:09.000"
    # Before the enablement time by the property, after the rewritten file times: the last
    # commit before the in-commit timestamps (delta-spark's non-ICT range), not an error.
    late_enablement = IctStart(3, 9500)
    assert (
        version_at_timestamp(COPIED, 9400, path="/t", earliest_version=0, ict=late_enablement) == 2
    )
    with pytest.raises(TimestampGreaterThanCommitError):
        version_at_timestamp(COPIED, 5001, path="/t", earliest_version=0, ict=ICT_FROM_3)


def test_in_commit_timestamps_from_creation_or_none_before_the_earliest_usable_commit() -> None:
    from_creation = [CommitTimestamp(v, 1000 * (v + 1)) for v in range(3)]
    assert active_commit(from_creation, 2500, IctStart(0, None)) == from_creation[1]
    # Enabled at v3 but v0-v2 gone: a time before the enablement has only the first commit.
    assert active_commit(COPIED[3:], 100, ICT_FROM_3) == COPIED[3]
