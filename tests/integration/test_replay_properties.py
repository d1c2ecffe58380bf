"""Property tests on a real Spark Connect server: the DataFrame replay equals the reference replay.

Random protocol-valid histories are written as real ``_delta_log`` directories; the snapshot's
state (replayed with ``mapInArrow`` on the server) must equal ``protocol.replay.reference_replay``
for any number of partitions, replay from a checkpoint must equal full replay, and so must the
state of every snapshot in a chain of updates, however its state query counts the checkpoint.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from delta_connect_py import DeltaTable
from delta_connect_py import snapshot as snapshot_module
from delta_connect_py.plans import loading, replay
from delta_connect_py.plans.state import compute_state
from delta_connect_py.protocol.actions import STATE_SCHEMA
from delta_connect_py.protocol.filenames import checkpoint_name
from delta_connect_py.protocol.replay import reference_replay
from tests.checkpoint_paths import checkpoint_files
from tests.histories import (
    DAY_MS,
    DELETION_VECTORS,
    NOW_MS,
    commit,
    first_commit,
    history,
    normalized,
    state_counting_queries,
    versioned_actions,
    write_log,
)

SETTINGS = settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    # Each example runs Spark jobs: shrinking a failure would take many minutes.
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)


TableDirs = Callable[[], AbstractContextManager[str]]


@pytest.fixture
def new_table_dir(tmp_path: Path) -> TableDirs:
    """A fresh directory for each table (each hypothesis example shares the test's tmp_path),
    removed after use. Under pytest's tmp_path, which follows --basetemp: the server must see
    the tables, and a server in a container sees only the data directory mounted into it."""
    return lambda: tempfile.TemporaryDirectory(dir=tmp_path)


def _reference_rows(commits: list[list[dict[str, Any]]], snapshot: Any) -> list[dict[str, Any]]:
    config = snapshot.replay_config()
    state = reference_replay(
        versioned_actions(commits),
        table_root=config.table_root,
        min_file_retention_timestamp=config.min_file_retention_timestamp,
        min_set_transaction_retention_timestamp=config.min_set_transaction_retention_timestamp,
    )
    return state.to_rows()


def _reference(commits: list[list[dict[str, Any]]], snapshot: Any) -> list[str]:
    return normalized(_reference_rows(commits, snapshot))


def _reference_sums(commits: list[list[dict[str, Any]]], snapshot: Any) -> tuple[int, ...]:
    """(sizeInBytes, numOfFiles, numOfRemoves, numOfSetTransactions) of the reference state."""
    rows = _reference_rows(commits, snapshot)
    adds = [row["add"] for row in rows if row["add"] is not None]
    removes = [row for row in rows if row["remove"] is not None]
    txns = [row for row in rows if row["txn"] is not None]
    return sum(add["size"] for add in adds), len(adds), len(removes), len(txns)


def _sums(state: Any) -> tuple[int, ...]:
    return (
        state.size_in_bytes,
        state.num_of_files,
        state.num_of_removes,
        state.num_of_set_transactions,
    )


def _ours(snapshot: Any) -> list[str]:
    return normalized([row.asDict(recursive=True) for row in snapshot.state_df().collect()])


@SETTINGS
@given(commits=history(), partitions=st.integers(1, 4), json_source_files=st.sampled_from([0, 32]))
def test_dataframe_replay_equals_reference(
    spark: Any,
    new_table_dir: TableDirs,
    commits: list[list[dict[str, Any]]],
    partitions: int,
    json_source_files: int,
) -> None:
    """Either commit reader: Spark's JSON source (few commits) or lines read by workers."""
    with (
        new_table_dir() as tmp,
        mock.patch.object(loading, "MAX_FILES_FOR_JSON_SOURCE", json_source_files),
    ):
        write_log(Path(tmp), commits)
        snapshot = DeltaTable.for_path(spark, tmp).snapshot(snapshot_partitions=partitions)
        assert snapshot.version == len(commits) - 1
        assert _ours(snapshot) == _reference(commits, snapshot)
        state = snapshot.state
        assert state.num_of_protocol == state.num_of_metadata == 1
        assert _sums(state) == _reference_sums(commits, snapshot)


@SETTINGS
@given(commits=history(max_commits=10), data=st.data())
def test_replay_from_checkpoint_equals_full_replay(
    spark: Any, new_table_dir: TableDirs, commits: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    checkpoint_version = data.draw(st.integers(0, len(commits) - 1))
    joined = data.draw(st.booleans(), label="checkpoint files joined")
    with new_table_dir() as tmp, checkpoint_files(joined):
        write_log(Path(tmp), commits)
        table = DeltaTable.for_path(spark, tmp)
        full = table.snapshot()
        _write_reference_checkpoint(Path(tmp), full, commits, checkpoint_version)
        from_checkpoint = table.snapshot()
        assert from_checkpoint.segment.checkpoint is not None
        assert from_checkpoint.segment.checkpoint.version == checkpoint_version
        # The state first: joined, its query assumes plain join keys and checks them
        # alongside; replayed, the replay job counted it and no query runs.
        with mock.patch.object(snapshot_module, "compute_state", wraps=compute_state) as query:
            assert from_checkpoint.state == full.state
        assert query.called == joined
        assert (from_checkpoint._reconstructed.checkpoint is not None) == joined
        assert _sums(from_checkpoint.state) == _reference_sums(commits, from_checkpoint)
        assert _ours(from_checkpoint) == _ours(full)


@SETTINGS
@given(commits=history(max_commits=10), data=st.data())
def test_a_chain_of_updates_equals_the_reference(
    spark: Any, new_table_dir: TableDirs, commits: list[list[dict[str, Any]]], data: st.DataObject
) -> None:
    """update() after one to three commits at a time, from a snapshot with or without a
    checkpoint under it, with the updates' replay kept beside the first or folded into it each
    time, rows or state queried first, and a newer checkpoint appearing on the way (then a new
    snapshot is loaded from it, and later updates build on that): every state equals the
    reference replay's."""
    last = len(commits) - 1
    first = data.draw(st.integers(0, last - 1), label="first version")
    checkpoint = data.draw(st.none() | st.integers(0, first), label="checkpoint version")
    newer = data.draw(st.none() | st.integers(first + 1, last), label="newer checkpoint version")
    max_update_bytes = data.draw(st.sampled_from([0, 1 << 20]), label="MAX_UPDATE_BYTES")
    joined = data.draw(st.booleans(), label="checkpoint files joined")
    with (
        new_table_dir() as tmp,
        mock.patch.object(replay, "MAX_UPDATE_BYTES", max_update_bytes),
        checkpoint_files(joined),
    ):
        write_log(Path(tmp), commits[: first + 1])
        table = DeltaTable.for_path(spark, tmp)
        if checkpoint is not None:
            _write_reference_checkpoint(Path(tmp), table.snapshot(), commits, checkpoint)
        snapshot = table.snapshot()
        version = first
        while True:
            expected = commits[: version + 1]
            assert snapshot.version == version
            if data.draw(st.booleans(), label="state first"):
                assert _sums(snapshot.state) == _reference_sums(expected, snapshot)
            assert _ours(snapshot) == _reference(expected, snapshot)
            assert _sums(snapshot.state) == _reference_sums(expected, snapshot)
            if version == last:
                break
            version = min(last, version + data.draw(st.integers(1, 3), label="new commits"))
            write_log(Path(tmp), commits[: version + 1])
            loads_newer = newer is not None and newer <= version
            if loads_newer:
                _write_reference_checkpoint(Path(tmp), snapshot, commits, newer)
                newer = None
            snapshot = snapshot.update()
            # Built on the earlier state, unless a newer checkpoint is there to load.
            assert (snapshot.previous is None) == loads_newer


def _write_reference_checkpoint(
    table: Path, snapshot: Any, commits: list[list[dict[str, Any]]], version: int
) -> None:
    """A classic checkpoint at ``version`` of the table at ``table`` (of which ``snapshot`` is
    a snapshot), from the reference replay (every tombstone and transaction kept)."""
    state = reference_replay(
        versioned_actions(commits[: version + 1]),
        table_root=snapshot.replay_config().table_root,
        min_file_retention_timestamp=None,
        min_set_transaction_retention_timestamp=None,
    )
    checkpoint = pa.Table.from_pylist(state.to_rows(), schema=STATE_SCHEMA)
    pq.write_table(checkpoint, table / "_delta_log" / checkpoint_name(version))


def _file(kind: str, path: str, dv: dict[str, Any] | None = None) -> dict[str, Any]:
    action: dict[str, Any] = {"path": path, "size": 7, "dataChange": True, "deletionVector": dv}
    if kind == "add":
        action.update(partitionValues={}, modificationTime=NOW_MS, stats='{"numRecords":1}')
    else:
        action["deletionTimestamp"] = NOW_MS
    return {kind: action}


@pytest.mark.parametrize("escaped_commit", [False, True])
@pytest.mark.usefixtures("checkpoint_files_joined")
def test_checkpoint_rows_are_matched_by_file_key(
    spark: Any, new_table_dir: TableDirs, escaped_commit: bool
) -> None:
    """Checkpoint rows superseded by a commit go, whichever way keys are joined: paths as
    written when every replayed key is plain without a DV, canonical keys otherwise."""
    dv = DELETION_VECTORS[1]
    checkpointed = [
        _file("add", "a.parquet"),
        _file("add", "a.parquet", dv),  # another logical file: only its DV differs
        _file("add", "c%2fd.parquet"),
        _file("add", "/abs/e.parquet"),
        _file("add", "kept.parquet"),
    ]
    after = [_file("remove", "a.parquet"), _file("add", "new.parquet")]
    if escaped_commit:  # other spellings of two checkpointed files' canonical paths
        after += [_file("remove", "c%2Fd.parquet"), _file("remove", "file:/abs/e.parquet")]
    commits = [first_commit(), checkpointed, after]
    with new_table_dir() as tmp:
        write_log(Path(tmp), commits)
        table = DeltaTable.for_path(spark, tmp)
        full = table.snapshot()
        _write_reference_checkpoint(Path(tmp), full, commits, 1)
        from_checkpoint = table.snapshot()

        # The state query assumes plain keys and checks them alongside; escaped ones make it
        # compute again with canonical keys.
        assert from_checkpoint._reconstructed.plain_keys is None
        num_of_files = from_checkpoint.state.num_of_files
        assert from_checkpoint._reconstructed.plain_keys is not escaped_commit
        assert _ours(from_checkpoint) == _reference(commits, from_checkpoint) == _ours(full)
        live = {row["path"] for row in from_checkpoint.all_files().collect()}
        gone = {"c%2fd.parquet", "/abs/e.parquet"} if escaped_commit else set()
        assert (
            live
            == {"a.parquet", "c%2fd.parquet", "/abs/e.parquet", "kept.parquet", "new.parquet"}
            - gone
        )
        assert num_of_files == len(live)


@pytest.mark.parametrize("escaped_first", [False, True])
@pytest.mark.usefixtures("checkpoint_files_joined")
def test_update_matches_checkpoint_rows_by_file_key(
    spark: Any, new_table_dir: TableDirs, escaped_first: bool
) -> None:
    """An update's join keys follow every replayed key, earlier and new: a commit with other
    spellings of checkpointed paths after plain ones makes them canonical, and plain commits
    after escaped ones keep them canonical."""
    checkpointed = [_file("add", name) for name in ("a.parquet", "c%2fd.parquet", "kept.parquet")]
    plain = [_file("remove", "a.parquet"), _file("add", "new.parquet")]
    escaped = [_file("remove", "c%2Fd.parquet"), _file("add", "b.parquet", DELETION_VECTORS[1])]
    later = [plain, escaped] if not escaped_first else [escaped, plain]
    commits = [first_commit(), checkpointed, *later]
    with new_table_dir() as tmp:
        write_log(Path(tmp), commits[:3])
        table = DeltaTable.for_path(spark, tmp)
        _write_reference_checkpoint(Path(tmp), table.snapshot(), commits, 1)
        before = table.snapshot()
        assert before.state.num_of_files > 0
        assert before._reconstructed.plain_keys is not escaped_first
        write_log(Path(tmp), commits)

        updated = before.update()
        assert updated.previous is before
        # A key that is not plain stays in the first replay; the update's replay job observed
        # the new keys, escaped ones among them.
        assert updated._reconstructed.plain_keys is False
        assert _ours(updated) == _reference(commits, updated) == _ours(table.snapshot())
        assert updated._reconstructed.plain_keys is False
        assert updated.state.num_of_files == 3
        live = {row["path"] for row in updated.all_files().collect()}
        assert live == {"kept.parquet", "new.parquet", "b.parquet"}


@pytest.mark.parametrize("joined", [False, True])
def test_retention_horizons_are_exclusive_for_checkpoint_and_replayed_rows(
    spark: Any, new_table_dir: TableDirs, joined: bool
) -> None:
    """A tombstone deleted, or a txn last updated, exactly at its horizon is dropped and one a
    millisecond later kept, whether the row comes from the checkpoint or from a commit, the
    checkpoint's file actions joined at query time or replayed with the commits."""
    retention_days = 2
    txn_horizon = NOW_MS - retention_days * DAY_MS
    tombstone_horizon = NOW_MS - 7 * DAY_MS  # delta.deletedFileRetentionDuration's default

    def tombstone(path: str, deleted_at: int) -> dict[str, Any]:
        return {"remove": {"path": path, "deletionTimestamp": deleted_at, "dataChange": True}}

    def txn(app: str, updated_at: int) -> dict[str, Any]:
        return {"txn": {"appId": app, "version": 1, "lastUpdated": updated_at}}

    def around(horizon: int, make: Any, prefix: str) -> list[dict[str, Any]]:
        offsets = {"before": -1, "at": 0, "after": 1}
        return [make(f"{prefix}-{name}", horizon + offset) for name, offset in offsets.items()]

    setup = first_commit()
    setup[1]["metaData"]["configuration"] = {
        "delta.setTransactionRetentionDuration": f"interval {retention_days} days"
    }
    checkpointed = around(tombstone_horizon, tombstone, "c") + around(txn_horizon, txn, "c")
    replayed = around(tombstone_horizon, tombstone, "r") + around(txn_horizon, txn, "r")
    commits = [setup, checkpointed, replayed]
    with new_table_dir() as tmp, checkpoint_files(joined):
        write_log(Path(tmp), commits)
        table = DeltaTable.for_path(spark, tmp)
        _write_reference_checkpoint(Path(tmp), table.snapshot(), commits, 1)
        snapshot = dataclasses.replace(table.snapshot(), created_at_ms=NOW_MS)
        assert snapshot.segment.checkpoint is not None

        assert {row["path"] for row in snapshot.tombstones().collect()} == {"c-after", "r-after"}
        assert snapshot.transactions == {"c-after": 1, "r-after": 1}
        assert snapshot.state.num_of_removes == 2
        assert snapshot.state.num_of_set_transactions == 2
        assert _ours(snapshot) == _reference(commits, snapshot)


@contextmanager
def _clock(start_ms: int) -> Iterator[list[int]]:
    """Snapshots taken inside the block are taken at ``clock[0]`` (tombstone retention's now)."""
    clock = [start_ms]
    with (
        mock.patch("delta_connect_py.snapshot.now_ms", lambda: clock[0]),
    ):
        yield clock


@contextmanager
def _checkpointed(
    spark: Any,
    new_table_dir: TableDirs,
    commits: list[list[dict[str, Any]]],
    version: int,
    max_update_bytes: int,
    joined: bool = True,
) -> Iterator[tuple[Path, Any, list[int]]]:
    """A table of ``commits`` (in a directory from ``new_table_dir``) with a reference checkpoint
    at ``version``: its directory, the
    ``DeltaTable``, and the clock its snapshots are taken at (``_clock``, from ``NOW_MS``), with
    ``MAX_UPDATE_BYTES`` patched to ``max_update_bytes``, and the checkpoint's file actions
    ``joined`` at query time (default) or replayed with the commits."""
    with (
        new_table_dir() as tmp,
        _clock(NOW_MS) as clock,
        mock.patch.object(replay, "MAX_UPDATE_BYTES", max_update_bytes),
        checkpoint_files(joined),
    ):
        write_log(Path(tmp), commits)
        table = DeltaTable.for_path(spark, tmp)
        _write_reference_checkpoint(Path(tmp), table.snapshot(), commits, version)
        yield Path(tmp), table, clock


def _metadata_with(configuration: dict[str, str]) -> dict[str, Any]:
    metadata = first_commit()[1]
    metadata["metaData"]["configuration"] = configuration
    return metadata


@pytest.mark.parametrize("max_update_bytes", [replay.MAX_UPDATE_BYTES, 0])
def test_updates_missing_the_earlier_rows_are_counted_on_their_sums(
    spark: Any, new_table_dir: TableDirs, max_update_bytes: int
) -> None:
    """After update(), a state whose new keys are neither in the checkpoint nor in the first
    replay is counted as the last full query's sums of those plus the update's observed
    aggregations, also when each update folds its replay into the first; a retention horizon
    moved back, a counted checkpoint tombstone expiring, a checkpointed file removed, and a file
    of the first replay removed each make the full query run again. After such a query the
    updates' keys are left out of the sums: later updates are probed for their new keys only,
    by exact key (a file of another directory with the same name runs the query). Every state
    equals the reference replay's."""

    def tombstone(path: str, deleted_at: int) -> dict[str, Any]:
        return {"remove": {"path": path, "deletionTimestamp": deleted_at, "dataChange": True}}

    checkpointed = [
        *(_file("add", name) for name in ("a.parquet", "b.parquet", "c%20d.parquet")),
        _file("add", "sub/b.parquet"),
        tombstone("counted.parquet", NOW_MS - 6 * DAY_MS),  # within the default 7 days
        tombstone("expired.parquet", NOW_MS - 10 * DAY_MS),
    ]
    commits = [first_commit(), checkpointed, [_file("add", "r.parquet")]]
    folds = max_update_bytes == 0
    # (commit, clock, whether its state runs the state query, reading the checkpoint)
    steps: list[tuple[list[dict[str, Any]], int, bool]] = [
        ([_file("add", "new-1.parquet")], NOW_MS, False),
        # A longer retention: the tombstone expired before counts again.
        (
            [
                _metadata_with({"delta.deletedFileRetentionDuration": "interval 30 days"}),
                _file("add", "new-2.parquet"),
            ],
            NOW_MS + DAY_MS,
            True,
        ),
        # new-1 is in the updates' replay, or folded into the first replay.
        ([_file("add", "new-3.parquet"), _file("remove", "new-1.parquet")], NOW_MS + DAY_MS, folds),
        # A file of the first replay: the query leaves the updates' keys out of its sums, so
        # the next update is probed for its new key only.
        ([_file("remove", "r.parquet")], NOW_MS + DAY_MS, True),
        ([_file("add", "new-5.parquet")], NOW_MS + DAY_MS, False),
        ([_file("add", "new-4.parquet")], NOW_MS + 21 * DAY_MS, True),  # one counted expires
        ([_file("remove", "b.parquet")], NOW_MS + 21 * DAY_MS, True),  # a checkpointed file
        ([_file("add", "new-6.parquet")], NOW_MS + 21 * DAY_MS, False),
        # b's key is among the counted updates' (unless they were folded since).
        ([_file("add", "b.parquet")], NOW_MS + 21 * DAY_MS, folds),
        # Another file of the same name: a hit.
        ([_file("remove", "sub/b.parquet")], NOW_MS + 21 * DAY_MS, True),
    ]
    with _checkpointed(spark, new_table_dir, commits, 1, max_update_bytes) as (tmp, table, clock):
        snapshot = table.snapshot()
        assert _sums(snapshot.state) == _reference_sums(commits, snapshot) == (35, 5, 1, 0)
        for actions, now, runs_query in steps:
            commits.append(actions)
            write_log(tmp, commits)
            clock[0] = now
            snapshot = snapshot.update()
            assert snapshot.previous is not None
            state, queried = state_counting_queries(snapshot)
            assert queried is runs_query, actions
            assert snapshot._reconstructed.plain_keys is True  # each update's replay observed
            assert _sums(state) == _reference_sums(commits, snapshot)
            assert state == table.snapshot().state
            assert _ours(snapshot) == _reference(commits, snapshot)
        # 11 adds of 7 bytes (b twice), less r, new-1, sub/b and the first b.
        assert _sums(snapshot.state) == (56, 8, 4, 0)


def test_keys_folded_twice_before_a_state_query_are_not_lost(
    spark: Any, new_table_dir: TableDirs
) -> None:
    """Two folds before any state query (the rows asked for instead, which keeps the chain of
    updates): the first folded replay removed a checkpointed file, so the state after the second
    must not be counted on the earlier checkpoint sums."""
    checkpointed = [_file("add", name) for name in ("a.parquet", "b.parquet")]
    commits = [first_commit(), checkpointed]
    with _checkpointed(spark, new_table_dir, commits, 1, max_update_bytes=0) as (
        tmp,
        table,
        _,
    ):  # folds each
        snapshot = table.snapshot()
        assert snapshot.state.num_of_files == 2
        for actions in ([_file("remove", "a.parquet")], [_file("add", "new.parquet")]):
            commits.append(actions)
            write_log(tmp, commits)
            snapshot = snapshot.update()
            assert snapshot.previous is not None
            snapshot.state_df()
        state, queried = state_counting_queries(snapshot)
        assert _sums(state) == _reference_sums(commits, snapshot) == (14, 2, 1, 0)
        assert queried


@st.composite
def _appends_or_commits(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly new files (as appends write them), now and then any commit of ``history``."""
    if draw(st.integers(0, 3)) == 0:
        return draw(commit())
    names = draw(st.lists(st.uuids(), min_size=1, max_size=3))
    return [_file("add", f"new-{name}.parquet") for name in names]


@SETTINGS
@given(
    commits=history(max_commits=4),
    updates=st.lists(
        st.tuples(
            _appends_or_commits(),
            st.sampled_from([0, DAY_MS, 3 * DAY_MS]),
            st.booleans(),
        ),
        min_size=1,
        max_size=5,
    ),
    max_update_bytes=st.sampled_from([0, 1 << 20]),
    joined=st.booleans(),
)
def test_a_chain_of_updates_on_a_checkpoint_equals_the_reference(
    spark: Any,
    new_table_dir: TableDirs,
    commits: list[list[dict[str, Any]]],
    updates: list[tuple[list[dict[str, Any]], int, bool]],
    max_update_bytes: int,
    joined: bool,
) -> None:
    """update() after appends and other commits over a checkpointed table, the clock moving on
    between them (tombstones expire), the updates' replay folded each time or kept, and the
    state queried after some updates only: each state, counted on the checkpoint's earlier
    sums or in full, equals the reference replay's."""
    with _checkpointed(
        spark, new_table_dir, commits, len(commits) - 1, max_update_bytes, joined
    ) as (
        tmp,
        table,
        clock,
    ):
        snapshot = table.snapshot()
        assert _sums(snapshot.state) == _reference_sums(commits, snapshot)
        for commit_actions, clock_step, query_state in updates:
            commits.append(commit_actions)
            write_log(tmp, commits)
            clock[0] += clock_step
            snapshot = snapshot.update()
            if query_state:
                assert _sums(snapshot.state) == _reference_sums(commits, snapshot)
            else:  # the rows only: the next update still builds on this state
                snapshot.state_df()
        assert _sums(snapshot.state) == _reference_sums(commits, snapshot)
        assert _ours(snapshot) == _reference(commits, snapshot)
