"""Which reader reads a segment's commits: Spark's text source for a few small files, else
``commit_lines`` (Python workers for a local log)."""

from __future__ import annotations

from delta_connect_py.plans.loading import (
    MAX_BYTES_FOR_JSON_SOURCE,
    MAX_FILES_FOR_JSON_SOURCE,
    read_by_text_source,
)
from delta_connect_py.protocol.filenames import LogFile, LogFileKind


def _commits(sizes: list[int]) -> list[LogFile]:
    return [
        LogFile(
            path=f"file:/t/_delta_log/{version:020d}.json",
            name=f"{version:020d}.json",
            kind=LogFileKind.COMMIT,
            version=version,
            size=size,
            modification_time=0,
        )
        for version, size in enumerate(sizes)
    ]


def test_a_few_small_commits_are_read_by_the_text_source() -> None:
    assert read_by_text_source(_commits([75_000] * 10))
    assert read_by_text_source(_commits([MAX_BYTES_FOR_JSON_SOURCE // 8] * 8))


def test_many_commits_are_read_by_workers() -> None:
    assert not read_by_text_source(_commits([100] * (MAX_FILES_FOR_JSON_SOURCE + 1)))


def test_a_few_large_commits_are_read_by_workers() -> None:
    assert not read_by_text_source(_commits([MAX_BYTES_FOR_JSON_SOURCE // 8 + 1] * 8))
    assert not read_by_text_source(_commits([MAX_BYTES_FOR_JSON_SOURCE + 1]))
