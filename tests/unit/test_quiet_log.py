"""When a listing's mark allows telling an unchanged log without a Spark job."""

from __future__ import annotations

from delta_connect_py.plans.listing import LogListing
from delta_connect_py.protocol.filenames import parse_log_file
from delta_connect_py.quiet_log import QUIET_LOG_MARGIN_MS, LogMark


def _listing(times: list[int], listed_at: int | None) -> LogListing:
    files = []
    for version, time in enumerate(times):
        file = parse_log_file(f"file:/t/_delta_log/{version:020d}.json", 10, time)
        assert file is not None
        files.append(file)
    return LogListing("file:/t/_delta_log", tuple(files), None, True, listed_at_ms=listed_at)


def test_the_mark_holds_the_newest_file_time_and_the_listing_clock() -> None:
    mark = LogMark.of(_listing([5_000, 9_000, 7_000], listed_at=20_000))
    assert mark == LogMark(9_000, 20_000, frozenset({"00000000000000000001.json"}))


def test_a_mark_is_quiet_only_a_margin_after_its_newest_file() -> None:
    newest = 1_700_000_000_000
    assert LogMark(newest, newest + QUIET_LOG_MARGIN_MS).quiet
    assert not LogMark(newest, newest + QUIET_LOG_MARGIN_MS - 1).quiet
    assert not LogMark(newest, newest).quiet
    # A listing whose clock is behind the store's (skew) is not quiet either.
    assert not LogMark(newest, newest - 60_000).quiet


def test_a_mark_without_the_server_clock_is_never_quiet() -> None:
    assert not LogMark.of(_listing([1_000], listed_at=None)).quiet
    assert not LogMark(0, None).quiet
