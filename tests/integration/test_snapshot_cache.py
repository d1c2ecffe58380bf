"""The session's snapshot cache against a real server, with delta-rs writing between calls.

delta-rs (``deltalake``) is the other writer and the oracle: after every change (a commit, a
checkpoint, a rewritten ``_last_checkpoint``, a cleanup, the table deleted and recreated), the
cached path's snapshot must have delta-rs's version and files, and the state of a snapshot built
without the cache.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake

from delta_connect_py import DeltaTable, snapshot_cache
from delta_connect_py.errors import DeltaError
from delta_connect_py.plans.listing import list_log

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    snapshot_cache.clear()
    entries, max_bytes = snapshot_cache._cache.max_entries, snapshot_cache._cache.max_bytes
    yield
    snapshot_cache.configure(max_entries=entries, max_bytes=max_bytes)
    snapshot_cache.clear()


def _files(snapshot: Any) -> set[str]:
    return {unquote(row["path"]) for row in snapshot.all_files().select("path").collect()}


def _rs(root: Path) -> tuple[int, set[str]]:
    table = RsDeltaTable(str(root))
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    return table.version(), {unquote(p) for p in paths}


def _state(snapshot: Any) -> tuple[Any, ...]:
    state = snapshot.state
    return (
        snapshot.version,
        state.num_of_files,
        state.size_in_bytes,
        state.num_of_removes,
        state.metadata,
        state.protocol,
    )


def _append(root: Path, number: int) -> None:
    write_deltalake(str(root), pa.table({"id": [number], "p": [f"p{number % 3}"]}), mode="append")


def _assert_like_delta_rs(spark: Any, root: Path, snapshot: Any) -> None:
    version, files = _rs(root)
    assert snapshot.version == version
    assert _files(snapshot) == files
    assert snapshot.state.num_of_files == len(files)
    uncached = DeltaTable.for_path(spark, str(root), snapshot_cache=False).snapshot()
    assert _state(snapshot) == _state(uncached)


def _new_table(root: Path, **configuration: str) -> None:
    write_deltalake(
        str(root),
        pa.table({"id": [0, 1], "p": ["p0", "p1"]}),
        partition_by=["p"],
        configuration=configuration or None,
    )


def test_an_unchanged_log_is_answered_from_the_cache_for_every_table_object(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    _new_table(root)
    _append(root, 2)
    first = DeltaTable.for_path(spark, str(root)).snapshot()
    state = first.state
    again = DeltaTable.for_path(spark, str(root)).snapshot()
    assert again is first
    assert again.state_known and again.state is state
    uncached = DeltaTable.for_path(spark, str(root), snapshot_cache=False).snapshot()
    assert uncached is not first
    assert _state(uncached) == _state(first)


def test_the_environment_variable_turns_the_cache_off(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    _new_table(root)
    table = DeltaTable.for_path(spark, str(root))
    monkeypatch.setenv(snapshot_cache.ENABLED_ENV, "0")
    assert table.snapshot() is not table.snapshot()
    assert snapshot_cache.cached_keys() == []
    monkeypatch.setenv(snapshot_cache.ENABLED_ENV, "1")
    assert table.snapshot() is table.snapshot()


def test_another_writer_between_calls_matches_delta_rs(spark: Any, tmp_path: Path) -> None:
    """Commits extend the cached state; a checkpoint, a rewritten hint and a cleanup are seen;
    every step equals delta-rs and a snapshot built without the cache."""
    root = tmp_path / "t"
    _new_table(root, **{"delta.logRetentionDuration": "interval 0 seconds"})
    table = DeltaTable.for_path(spark, str(root))
    cached = table.snapshot()
    _assert_like_delta_rs(spark, root, cached)

    _append(root, 2)
    extended = table.snapshot()
    assert extended.previous is cached  # built on the cached state: only the commit replayed
    _assert_like_delta_rs(spark, root, extended)

    RsDeltaTable(str(root)).delete("id = 0")  # removes a file
    _assert_like_delta_rs(spark, root, table.snapshot())

    RsDeltaTable(str(root)).create_checkpoint()
    checkpointed = table.snapshot()
    _assert_like_delta_rs(spark, root, checkpointed)

    _append(root, 3)
    after_checkpoint = table.snapshot()
    assert after_checkpoint.segment.checkpoint is not None
    _assert_like_delta_rs(spark, root, after_checkpoint)

    # A hint naming an older version (another writer's stale rewrite) changes nothing.
    hint = root / "_delta_log" / "_last_checkpoint"
    hint.write_text('{"version":0,"size":3}')
    assert table.snapshot() is after_checkpoint
    _assert_like_delta_rs(spark, root, after_checkpoint)

    time.sleep(0.05)
    deleted = RsDeltaTable(str(root)).cleanup_metadata()
    assert (root / "_delta_log" / "00000000000000000000.json").exists() is False, deleted
    after_cleanup = table.snapshot()
    _assert_like_delta_rs(spark, root, after_cleanup)
    _append(root, 4)
    _assert_like_delta_rs(spark, root, table.snapshot())


def _recreate(root: Path, commits: int, first_id: int) -> None:
    shutil.rmtree(root)
    write_deltalake(str(root), pa.table({"id": [first_id], "p": ["x"]}), partition_by=["p"])
    for number in range(1, commits):
        _append(root, first_id + number)


@pytest.mark.parametrize("new_commits", [1, 2, 4])
def test_a_table_deleted_and_recreated_at_the_same_path(
    spark: Any, tmp_path: Path, new_commits: int
) -> None:
    """The cached state is at version 1; the new table reaches version 0, 1 or 3: never the old
    state, never the old state extended by the new table's commits."""
    root = tmp_path / "t"
    _new_table(root)
    _append(root, 2)
    table = DeltaTable.for_path(spark, str(root))
    old = table.snapshot()
    assert old.version == 1 and old.state.num_of_files == 3
    _recreate(root, new_commits, first_id=100)
    recreated = table.snapshot()
    assert recreated is not old and recreated.previous is None
    _assert_like_delta_rs(spark, root, recreated)


def test_time_travel_is_cached_by_version_until_the_log_drops_it(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    _new_table(root, **{"delta.logRetentionDuration": "interval 0 seconds"})
    for number in range(2, 5):
        _append(root, number)
    table = DeltaTable.for_path(spark, str(root))
    at_one = table.snapshot(version=1)
    assert _files(at_one) == {
        unquote(p)
        for p in RsDeltaTable(str(root), version=1)
        .get_add_actions(flatten=True)
        .column("path")
        .to_pylist()
    }
    assert table.snapshot(version=1) is at_one
    latest = table.snapshot()
    assert table.snapshot(version=latest.version) is latest  # the latest entry serves its version

    RsDeltaTable(str(root)).create_checkpoint()
    time.sleep(0.05)
    RsDeltaTable(str(root)).cleanup_metadata()
    uncached = DeltaTable.for_path(spark, str(root), snapshot_cache=False)
    with pytest.raises(DeltaError) as without_cache:
        uncached.snapshot(version=1)
    with pytest.raises(DeltaError) as with_cache:
        table.snapshot(version=1)
    assert with_cache.value.getErrorClass() == without_cache.value.getErrorClass()
    assert str(with_cache.value) == str(without_cache.value)


def test_the_cache_is_per_session(spark: Any, spark_remote: str, tmp_path: Path) -> None:
    from pyspark.sql import SparkSession

    root = tmp_path / "t"
    _new_table(root)
    mine = DeltaTable.for_path(spark, str(root)).snapshot()
    other_session = SparkSession.builder.remote(spark_remote).create()
    try:
        theirs = DeltaTable.for_path(other_session, str(root)).snapshot()
        assert theirs is not mine
        assert theirs.spark is other_session
        assert DeltaTable.for_path(other_session, str(root)).snapshot() is theirs
        assert {key.session_id for key in snapshot_cache.cached_keys()} == {
            spark.session_id,
            other_session.session_id,
        }
    finally:
        other_session.stop()
    # A stopped session's entries go at the next call.
    assert DeltaTable.for_path(spark, str(root)).snapshot() is mine
    assert {key.session_id for key in snapshot_cache.cached_keys()} == {spark.session_id}


def test_eviction_by_count_and_bytes_releases_the_server_state(spark: Any, tmp_path: Path) -> None:
    roots = [tmp_path / name for name in ("a", "b", "c")]
    for root in roots:
        _new_table(root)
    snapshot_cache.configure(max_entries=2)
    snapshots = []
    for root in roots:
        snapshots.append(DeltaTable.for_path(spark, str(root)).snapshot())
        assert snapshots[-1].state.num_of_files == 2  # its state is on the server
    # a, the least recently used, was evicted when c came in.
    assert [key.table_root.rsplit("/", 1)[-1] for key in snapshot_cache.cached_keys()] == [
        "b",
        "c",
    ]
    assert "_reconstructed" not in snapshots[0].__dict__  # released
    assert DeltaTable.for_path(spark, str(roots[0])).snapshot() is not snapshots[0]

    snapshot_cache.configure(max_bytes=snapshot_cache.cached_bytes() - 1)
    assert len(snapshot_cache.cached_keys()) == 1
    snapshot_cache.configure(max_bytes=0)
    assert snapshot_cache.cached_keys() == []
    fresh = DeltaTable.for_path(spark, str(roots[1])).snapshot()
    assert DeltaTable.for_path(spark, str(roots[1])).snapshot() is not fresh


def _writers() -> list[Callable[[Path], object]]:
    return [
        lambda root: _append(root, 9),
        lambda root: RsDeltaTable(str(root)).create_checkpoint(),
        lambda root: RsDeltaTable(str(root)).delete("id = 1"),
    ]


@pytest.mark.parametrize("writer", range(3))
def test_a_computed_state_stays_right_when_asked_again_after_a_write(
    spark: Any, tmp_path: Path, writer: int
) -> None:
    root = tmp_path / "t"
    _new_table(root)
    table = DeltaTable.for_path(spark, str(root))
    before = table.snapshot()
    assert before.state.num_of_files == 2
    _writers()[writer](root)
    after = table.snapshot()
    if writer == 1:  # a checkpoint of the same version: the same state, rebuilt
        assert after.version == before.version
    _assert_like_delta_rs(spark, root, after)
    assert os.path.isdir(root / "_delta_log")


def _age_log(root: Path, seconds: float = 3600) -> None:
    """Make every log file ``seconds`` old, as a log nobody has written to for a while."""
    then = time.time() - seconds
    for file in (root / "_delta_log").iterdir():
        os.utime(file, (then, then))


def _quiet_table(root: Path) -> None:
    """A two-version table nobody has written to for an hour."""
    _new_table(root)
    _append(root, 2)
    _age_log(root)


def test_a_listing_carries_the_server_clock(spark: Any, tmp_path: Path) -> None:
    """The clock a quiet log is judged by: the server's, taken as the listing ran (the server
    runs on this machine, so its clock is the test's)."""
    root = tmp_path / "t"
    _quiet_table(root)
    before_ms = time.time() * 1000
    listing = list_log(spark, (root / "_delta_log").as_uri())
    after_ms = time.time() * 1000
    assert listing.listed_at_ms is not None
    assert before_ms - 1000 <= listing.listed_at_ms <= after_ms + 1000
    assert listing.listed_at_ms - listing.newest_modification_ms >= 3000 * 1000


@pytest.mark.cluster
def test_a_quiet_unchanged_log_is_answered_without_listing_it(
    spark: Any, tmp_path: Path, listings: list[str]
) -> None:
    root = tmp_path / "t"
    _quiet_table(root)
    table = DeltaTable.for_path(spark, str(root))
    first = table.snapshot()
    assert len(listings) == 1
    assert table.snapshot() is first
    assert DeltaTable.for_path(spark, str(root)).snapshot() is first
    assert len(listings) == 1  # both answered by a look for newer files, no listing job
    _assert_like_delta_rs(spark, root, first)


def test_a_young_log_is_listed_until_it_is_quiet(
    spark: Any, tmp_path: Path, listings: list[str]
) -> None:
    """Files written less than the margin before the listing may share a time with a later
    write (whole-second stores): such a log is listed on every call."""
    root = tmp_path / "t"
    _new_table(root)
    table = DeltaTable.for_path(spark, str(root))
    first = table.snapshot()
    assert table.snapshot() is first
    assert len(listings) == 2
    _age_log(root)  # rewrites every file's time: seen by the next listing
    aged = table.snapshot()
    assert len(listings) == 3
    assert table.snapshot() is aged
    assert len(listings) == 3


@pytest.mark.cluster
@pytest.mark.parametrize(
    "change",
    [
        "commit",
        "checkpoint",
        "recreated with the same file names",
        "restored from a copy with older times",
        "log folder deleted",
    ],
)
def test_a_change_to_a_quiet_log_is_seen(
    spark: Any, tmp_path: Path, listings: list[str], change: str
) -> None:
    root = tmp_path / "t"
    _quiet_table(root)
    table = DeltaTable.for_path(spark, str(root))
    quiet = table.snapshot()
    assert quiet.state.num_of_files == 3
    if change == "commit":
        _append(root, 3)
    elif change == "checkpoint":
        RsDeltaTable(str(root)).create_checkpoint()
    elif change == "restored from a copy with older times":
        backup = tmp_path / "backup"
        _new_table(backup)
        _append(backup, 200)
        _age_log(backup, seconds=7200)  # older than the quiet log's files
        shutil.rmtree(root)
        shutil.copytree(backup, root)  # keeps the times, as cp -a or rsync -a do
    elif change == "recreated with the same file names":
        _recreate(root, 2, first_id=100)
        assert sorted(p.name for p in (root / "_delta_log").glob("*.json")) == [
            f"{v:020d}.json" for v in range(2)
        ]
    else:
        shutil.rmtree(root / "_delta_log")
        with pytest.raises(DeltaError, match="DELTA_MISSING_DELTA_TABLE"):
            table.snapshot()
        return
    changed = table.snapshot()
    assert len(listings) == 2
    assert changed is not quiet
    _assert_like_delta_rs(spark, root, changed)


def test_history_of_a_quiet_unchanged_log_is_kept(
    spark: Any, tmp_path: Path, listings: list[str]
) -> None:
    root = tmp_path / "t"
    _quiet_table(root)
    table = DeltaTable.for_path(spark, str(root))
    first = table.history()
    assert [row["version"] for row in first.collect()] == [1, 0]
    assert table.history() is first
    assert DeltaTable.for_path(spark, str(root)).history() is first
    assert len(listings) == 1
    newest = table.history(limit=1)  # another limit, another result
    assert [row["version"] for row in newest.collect()] == [1]
    assert len(listings) == 2
    _append(root, 3)
    assert [row["version"] for row in table.history().collect()] == [2, 1, 0]
    assert len(listings) == 3
    uncached = DeltaTable.for_path(spark, str(root), snapshot_cache=False)
    assert uncached.history() is not uncached.history()
