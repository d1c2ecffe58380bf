"""``BaseSums``: when an earlier count of tombstones still holds, and adding two counts."""

from __future__ import annotations

import pytest

from delta_connect_py.plans.state import BaseSums


def _sums(horizon: int | None, oldest: int | None) -> BaseSums:
    return BaseSums(100, 3, 1 if oldest is not None else 0, horizon, oldest)


@pytest.mark.parametrize(
    ("horizon", "oldest", "later", "holds"),
    [
        (1_000, 5_000, 1_000, True),  # same horizon
        (1_000, 5_000, 4_999, True),  # the oldest counted tombstone still after it
        (1_000, 5_000, 5_000, False),  # exactly at the horizon: expired (exclusive)
        (1_000, 5_000, 9_000, False),
        (1_000, None, 9_000, True),  # no tombstone counted: none can expire
        (1_000, None, 999, False),  # horizon back: an uncounted tombstone may count now
        (1_000, 5_000, 999, False),
        (None, None, None, True),  # every tombstone counted, then and now
        (None, 5_000, 1_000, False),
        (1_000, None, None, False),
    ],
)
def test_holds_at(horizon: int | None, oldest: int | None, later: int | None, holds: bool) -> None:
    assert _sums(horizon, oldest).holds_at(later) is holds


def test_plus_adds_under_the_later_horizon_with_the_oldest_tombstone() -> None:
    earlier = BaseSums(100, 3, 1, 1_000, 5_000)
    later = BaseSums(10, 1, 2, 2_000, 4_000)
    assert earlier.plus(later) == BaseSums(110, 4, 3, 2_000, 4_000)
    assert earlier.plus(BaseSums(0, 0, 0, 2_000, None)) == BaseSums(100, 3, 1, 2_000, 5_000)


def test_plus_refuses_a_count_that_no_longer_holds() -> None:
    with pytest.raises(AssertionError):
        BaseSums(100, 3, 1, 1_000, 5_000).plus(BaseSums(0, 0, 0, 6_000, None))
