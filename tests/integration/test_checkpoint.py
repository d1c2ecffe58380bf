"""Checkpoints and expired-log cleanup written on the server, checked with delta-rs,
delta-kernel-rs (polars-deltalake) and our own replay, each loading the table from our checkpoint
alone (earlier commits deleted in a copy)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import unquote

import polars_deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py import checkpoints
from delta_connect_py import snapshot as snapshot_module
from delta_connect_py.errors import (
    CheckpointNonExistTableError,
    CheckpointSnapshotMismatchError,
    CheckpointUnsupportedError,
    DeltaError,
    MissingDeltaTableError,
    UnsupportedFeaturesForReadError,
    UnsupportedFeaturesForWriteError,
)
from delta_connect_py.plans.state import compute_state
from delta_connect_py.protocol.filenames import (
    LogFileKind,
    checkpoint_name,
    commit_name,
    multipart_checkpoint_name,
    parse_log_file,
)
from delta_connect_py.protocol.last_checkpoint import parse_last_checkpoint
from delta_connect_py.protocol.staging import staging_folder_name
from delta_connect_py.table import DeltaTable

deltalake = pytest.importorskip("deltalake")

CONFORMANCE_TABLES = [
    "golden/basic-with-inserts-deletes-checkpoint/delta",
    "golden/only-checkpoint-files/delta",
    "golden/dv-partitioned-with-checkpoint/delta",
    "dat/basic_partitioned/delta",
    "dat/multi_partitioned/delta",
    "kernel/app-txn-no-checkpoint/delta",
    "delta-rs/table-with-domain-metadata/delta",
]
V2_TABLE = "golden/v2-checkpoint-parquet/delta"


def log_names(root: Path) -> list[str]:
    return sorted(os.listdir(root / "_delta_log"))


def state_of(spark: Any, root: Path, version: int | None = None) -> dict[str, Any]:
    """Our snapshot's state as comparable plain values."""
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot(version)
    rows = snapshot.all_files().select("path", "deletionVector", "size").collect()
    tombstones = snapshot.tombstones().select("path").collect()
    state = snapshot.state
    result = {
        "version": snapshot.version,
        "adds": sorted((r["path"], str(r["deletionVector"]), r["size"]) for r in rows),
        "removes": sorted(r["path"] for r in tombstones),
        "txns": snapshot.transactions,
        "protocol": snapshot.protocol,
        "metadata": snapshot.metadata,
        "domains": state.domain_metadata,
    }
    snapshot.unpersist()
    return result


def delta_rs_files(root: Path, version: int | None = None) -> tuple[int, list[str]]:
    table = deltalake.DeltaTable(str(root), version=version)
    paths = table.get_add_actions(flatten=True).column("path").to_pylist()
    return table.version(), sorted(paths)


def drop_log_before(root: Path, version: int, keep: tuple[str, ...] | None = None) -> None:
    """Delete every commit, checkpoint and crc up to ``version`` except its checkpoint(s);
    with ``keep`` (names), also the other checkpoints of ``version`` and unkept sidecars."""
    for name in log_names(root):
        parsed = parse_log_file(name, 1, 0)
        if parsed is None or parsed.version > version:
            continue
        if parsed.version == version and parsed.is_checkpoint and (keep is None or name in keep):
            continue
        os.remove(root / "_delta_log" / name)
    sidecars = root / "_delta_log" / "_sidecars"
    if keep is not None and sidecars.exists():
        for path in sidecars.iterdir():
            if path.name not in keep:
                path.unlink()


def kernel_rows(root: Path) -> list[str]:
    """The table's rows as delta-kernel-rs (polars-deltalake) reads them; for the conformance
    tables that ship their log without data files, the schema of the snapshot it loads."""
    _, paths = delta_rs_files(root)
    if not all((root / unquote(path)).exists() for path in paths):
        return [repr(polars_deltalake.TableState(str(root)).schema())]
    return sorted(repr(row) for row in polars_deltalake.read_delta(str(root)).rows())


def check_hint(root: Path, result: checkpoints.CheckpointResult) -> None:
    hint = parse_last_checkpoint((root / "_delta_log" / "_last_checkpoint").read_text())
    assert hint.checksum is not None
    assert hint.version == result.version
    assert hint.size == result.num_actions
    assert hint.size_in_bytes == result.size_in_bytes
    assert hint.num_of_add_files == result.num_of_add_files
    assert hint.parts == (result.parts if result.parts > 1 else None)
    top = root / "_delta_log" / result.paths[0].rsplit("/", 1)[1]
    if not top.name.endswith(".json"):
        assert hint.v2_checkpoint is None
        return
    # A UUID-named checkpoint: delta-spark's v2Checkpoint, which its readers may use instead
    # of the top-level file (so it must say exactly what the file says).
    actions = _json_actions(top)
    sidecars = [a["sidecar"] for a in actions if "sidecar" in a]
    assert hint.v2_checkpoint == {
        "path": top.name,
        "sizeInBytes": top.stat().st_size,
        "modificationTime": top.stat().st_mtime_ns // 1_000_000,
        "nonFileActions": [a for a in actions if "sidecar" not in a],
        "sidecarFiles": sidecars,
    }
    for sidecar in sidecars:
        stat = (root / "_delta_log" / "_sidecars" / sidecar["path"]).stat()
        assert (sidecar["sizeInBytes"], sidecar["modificationTime"]) == (
            stat.st_size,
            stat.st_mtime_ns // 1_000_000,
        )


def checkpoint_and_verify(
    spark: Any, root: Path, part_size: int | None, *, uuid_named: bool | None = None
) -> checkpoints.CheckpointResult:
    """Checkpoint the latest version, then prove every reader loads that state from it alone."""
    before = state_of(spark, root)
    rows_before = kernel_rows(root)
    table = DeltaTable.for_path(spark, str(root))
    if uuid_named is None:
        result = table.create_checkpoint(part_size=part_size)
    else:
        snapshot = table.snapshot()
        result = checkpoints.write_checkpoint(snapshot, part_size, uuid_named=uuid_named)
    assert result.version == before["version"]
    assert result.num_of_add_files == len(before["adds"])
    names = log_names(root)
    assert not [n for n in names if n.startswith(checkpoints.STAGING_PREFIX)]
    written = tuple(path.rsplit("/", 1)[1] for path in result.paths)
    first = parse_log_file(written[0], 1, 0)
    assert first is not None and first.version == result.version
    if first.kind is LogFileKind.CHECKPOINT:
        assert written == (checkpoint_name(result.version),)
    elif first.kind is LogFileKind.MULTIPART_CHECKPOINT:
        assert written == tuple(
            multipart_checkpoint_name(result.version, part, result.parts)
            for part in range(1, result.parts + 1)
        )
    else:
        assert first.kind is LogFileKind.UUID_CHECKPOINT
    check_hint(root, result)
    drop_log_before(root, result.version, keep=written)
    assert state_of(spark, root) == before
    version, paths = delta_rs_files(root)
    assert version == before["version"]
    assert paths == sorted(path for path, _, _ in before["adds"])
    assert kernel_rows(root) == rows_before
    return result


# Classic and multi-part alternate over the tables: every table is checkpointed once (the suite
# must stay within CI's time), and both layouts meet checkpoints, DVs, txns and domain metadata.
@pytest.mark.parametrize(
    ("relative", "part_size"),
    [(table, None if i % 2 else 2) for i, table in enumerate(CONFORMANCE_TABLES)],
)
def test_conformance_table_checkpoint(
    spark: Any, conformance_table: Any, relative: str, part_size: int | None
) -> None:
    checkpoint_and_verify(spark, conformance_table(relative), part_size)


def test_v2_table_classic_named_v2_checkpoint(spark: Any, conformance_table: Any) -> None:
    root = conformance_table(V2_TABLE)
    with pytest.raises(DeltaError, match="DELTA_CHECKPOINT_UNSUPPORTED"):
        snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
        checkpoints.write_checkpoint(snapshot, 1, uuid_named=False)
    checkpoint_and_verify(spark, root, None, uuid_named=False)
    rows = pq.read_table(root / "_delta_log" / checkpoint_name(2), columns=["checkpointMetadata"])
    assert rows.column(0).drop_null().to_pylist() == [{"version": 2, "tags": None}]


def _json_actions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def age_log_files(log: Path, up_to: int | None = None) -> float:
    """Set the log files (of versions up to ``up_to``) 60 days back, one second apart in version
    order, so that cleanup sees them expired; the base time (s)."""
    old = time.time() - 60 * DAY_S
    for path in sorted(log.iterdir()):
        parsed = parse_log_file(path.name, 1, 0)
        if parsed is not None and (up_to is None or parsed.version <= up_to):
            os.utime(path, (old + parsed.version, old + parsed.version))
    return old


def _without_nulls(value: Any) -> Any:
    """JSON-like ``value`` with null fields left out (a parquet row has every field)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _canonical_actions(actions: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(_without_nulls(a), sort_keys=True) for a in actions)


@pytest.mark.cluster
def test_v2_policy_table_gets_uuid_named_checkpoint_with_sidecars(
    spark: Any, conformance_table: Any, tmp_path: Path
) -> None:
    """delta.checkpointPolicy=v2: a UUID-named top-level JSON file and parquet sidecars that
    every reader loads alone; cleanup keeps the sidecars a retained checkpoint references, and
    first copies the latest checkpoint to a classic name, as delta-spark does."""
    root = conformance_table(V2_TABLE)
    result = checkpoint_and_verify(spark, root, 1)  # one action per sidecar: several sidecars
    log = root / "_delta_log"
    top, sidecars = result.paths[0].rsplit("/", 1)[1], result.paths[1:]
    assert 1 < len(sidecars) <= result.num_of_add_files  # empty hash partitions: no sidecar
    actions = _json_actions(log / top)
    kinds = sorted(next(iter(action)) for action in actions)
    assert kinds == sorted(
        ["checkpointMetadata", "metaData", "protocol", *["sidecar"] * len(sidecars)]
    )
    assert {a["sidecar"]["path"] for a in actions if "sidecar" in a} == {
        path.rsplit("/", 1)[1] for path in sidecars
    }
    for path in sidecars:
        columns = pq.read_schema(log / "_sidecars" / path.rsplit("/", 1)[1]).names
        assert columns == ["add", "remove"]
    # A second checkpoint (after a commitInfo-only commit) makes the first one expire: cleanup
    # deletes it and its sidecars, keeps the retained checkpoint's, and sweeps old strays.
    commit = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "NOOP"}}
    (log / commit_name(3)).write_text(json.dumps(commit) + "\n")
    rows_before = kernel_rows(root)
    second = DeltaTable.for_path(spark, str(root)).create_checkpoint()
    second_top = second.paths[0].rsplit("/", 1)[1]
    kept = {path.rsplit("/", 1)[1] for path in second.paths[1:]}
    compat = log / checkpoint_name(3)
    assert DeltaTable.for_path(spark, str(root)).cleanup_metadata() == []
    assert not compat.exists()  # nothing deleted: no compatibility checkpoint either
    stray = log / "_sidecars" / "stray.parquet"
    pq.write_table(pa.table({"add": pa.array([None], pa.struct([("path", pa.string())]))}), stray)
    old = age_log_files(log)
    for path in (log / "_sidecars").iterdir():
        os.utime(path, (old, old))
    # A dead writer's staging folder: swept and listed by the cleanup (not by the publish of
    # its compatibility checkpoint, which runs first).
    dead = log / f"{checkpoints.STAGING_PREFIX}dead"
    (dead / "_temporary").mkdir(parents=True)
    for path in (dead / "_temporary", dead):
        os.utime(path, (old, old))
    hint = (log / "_last_checkpoint").read_text()
    table = DeltaTable.for_path(spark, str(root))
    to_delete = {path.rsplit("/", 1)[1] for path in table.cleanup_metadata(dry_run=True)}
    assert top in to_delete and not compat.exists()  # a dry run writes nothing
    deleted = {path.rsplit("/", 1)[1] for path in table.cleanup_metadata()}
    assert deleted == to_delete
    # The compatibility checkpoint: the top-level file's actions, sidecars referenced as they
    # are; the hint still names the UUID-named checkpoint.
    assert _canonical_actions(
        pq.read_table(compat).to_pylist(maps_as_pydicts="strict")
    ) == _canonical_actions(_json_actions(log / second_top))
    assert (log / "_last_checkpoint").read_text() == hint
    assert top in deleted and stray.name in deleted and dead.name in deleted
    assert not dead.exists()
    assert {path.rsplit("/", 1)[1] for path in sidecars} <= deleted
    assert set(os.listdir(log / "_sidecars")) == kept
    assert kernel_rows(root) == rows_before
    assert delta_rs_files(root)[0] == 3
    state = state_of(spark, root)
    assert state["version"] == 3
    # Every reader loads version 3 from the compatibility checkpoint alone.
    only_compat = tmp_path / "only-compat"
    shutil.copytree(root, only_compat)
    (only_compat / "_delta_log" / second_top).unlink()
    assert state_of(spark, only_compat) == state
    assert delta_rs_files(only_compat) == delta_rs_files(root)
    assert kernel_rows(only_compat) == rows_before


def _top_level_actions(path: Path) -> list[dict[str, Any]]:
    """A checkpoint file's actions (JSON lines, or parquet rows without their null columns)."""
    if path.suffix == ".json":
        return _json_actions(path)
    return pq.read_table(path).to_pylist(maps_as_pydicts="strict")


@pytest.mark.parametrize(
    "relative",
    [
        "golden/v2-checkpoint-parquet/delta",
        "kernel/v2-checkpoints-parquet-with-sidecars/delta",
        "delta-rs/checkpoint-v2-table/delta",
    ],
)
def test_cleanup_copies_a_uuid_named_checkpoint_every_reader_loads(
    spark: Any, conformance_table: Any, tmp_path: Path, relative: str
) -> None:
    """A cleanup of an aged V2 table (UUID-named parquet or JSON checkpoint, with or without
    sidecars) writes the classic-named copy of its latest checkpoint, holding the same actions;
    with the UUID-named file and the hint gone, every reader loads the table from the copy."""
    root = conformance_table(relative)
    before = (state_of(spark, root), delta_rs_files(root), kernel_rows(root))
    log = root / "_delta_log"
    age_log_files(log)
    version = max(  # the latest checkpoint's
        parsed.version
        for parsed in (parse_log_file(path.name, 1, 0) for path in log.iterdir())
        if parsed is not None and parsed.kind is LogFileKind.UUID_CHECKPOINT
    )
    assert DeltaTable.for_path(spark, str(root)).cleanup_metadata()
    tops = [
        p
        for p in log.iterdir()
        if re.fullmatch(rf"{version:020d}\.checkpoint(\.[-\w]+)?\.\w+", p.name)
    ]
    uuid_named = [p for p in tops if p.name != checkpoint_name(version)]
    assert len(uuid_named) == 1 and len(tops) == 2
    compat = log / checkpoint_name(version)
    assert _canonical_actions(_top_level_actions(compat)) == _canonical_actions(
        _top_level_actions(uuid_named[0])
    )
    uuid_named[0].unlink()
    (log / "_last_checkpoint").unlink()
    assert (state_of(spark, root), delta_rs_files(root), kernel_rows(root)) == before


def random_delta_rs_table(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    for commit in range(rng.randint(4, 9)):
        n = rng.randint(1, 30)
        data = pa.table(
            {
                "id": pa.array([rng.randint(0, 1000) for _ in range(n)], pa.int64()),
                "part": pa.array([rng.choice(["a", "b", "c"]) for _ in range(n)]),
            }
        )
        partition_by = ["part"] if seed % 2 == 0 else None
        deltalake.write_deltalake(str(root), data, mode="append", partition_by=partition_by)
        if commit and rng.random() < 0.4:
            deltalake.DeltaTable(str(root)).delete(f"id < {rng.randint(0, 700)}")
    if rng.random() < 0.5:
        deltalake.DeltaTable(str(root)).delete(f"part = '{rng.choice('abc')}'")


@pytest.mark.parametrize(("seed", "part_size"), [(0, None), (1, 3), (2, 3), (3, None)])
def test_random_delta_rs_tables(
    spark: Any, tmp_path: Path, seed: int, part_size: int | None
) -> None:
    root = tmp_path / "t"
    random_delta_rs_table(root, seed)
    checkpoint_and_verify(spark, root, part_size)


def _hint_text(root: Path) -> str | None:
    path = root / "_delta_log" / "_last_checkpoint"
    return path.read_text() if path.exists() else None


def test_checkpoint_of_an_updated_snapshot(spark: Any, tmp_path: Path) -> None:
    """A snapshot built by update() (the commits since its first replay in a replay of their
    own, superseding checkpoint and replayed rows) checkpoints the state a new snapshot has:
    every reader loads it from the checkpoint alone."""
    root = tmp_path / "t"
    random_delta_rs_table(root, 2)
    table = DeltaTable.for_path(spark, str(root))
    table.create_checkpoint()
    data = pa.table({"id": pa.array([7, 8], pa.int64()), "part": pa.array(["a", "b"])})
    deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])
    snapshot = table.snapshot()
    assert snapshot.state.num_of_files > 0
    deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])
    snapshot = snapshot.update()
    assert snapshot.state.num_of_files > 0
    deltalake.DeltaTable(str(root)).delete("part = 'a'")
    updated = snapshot.update()
    assert updated._reconstructed.updates is not None
    before = state_of(spark, root)
    result = checkpoints.write_checkpoint(updated)
    assert result.version == before["version"]
    assert result.num_of_add_files == len(before["adds"])
    drop_log_before(root, result.version, keep=(checkpoint_name(result.version),))
    assert state_of(spark, root) == before
    assert delta_rs_files(root) == (before["version"], sorted(p for p, _, _ in before["adds"]))


@pytest.mark.worker_errors
def test_failed_write_leaves_nothing(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    before_names, before_hint = log_names(root), _hint_text(root)

    def explode() -> None:  # nested: pickled by value, the server cannot import tests
        raise RuntimeError("injected failure inside the checkpoint writer")

    _after_first_written_batch(monkeypatch, explode)
    with pytest.raises(Exception, match="injected failure"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint()
    assert log_names(root) == before_names
    assert _hint_text(root) == before_hint


@pytest.mark.worker_errors
def test_failed_publish_and_mismatch_publish_nothing_visible(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    before = state_of(spark, root)
    before_names, before_hint = log_names(root), _hint_text(root)
    original = checkpoints._publish_request

    def mismatch(*args: Any) -> Any:
        request = original(*args)
        return dataclasses.replace(request, expected_adds=request.expected_adds + 1)

    monkeypatch.setattr(checkpoints, "_publish_request", mismatch)
    # One file: checked against the add count its write job observed; parts: the queried one.
    for part_size in (None, 2):
        with pytest.raises(CheckpointSnapshotMismatchError, match="doesn't match"):
            DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=part_size)
        assert log_names(root) == before_names
        assert _hint_text(root) == before_hint

    def crash_after_one_part(*args: Any) -> Any:
        return dataclasses.replace(original(*args), fail_after_parts=1)

    monkeypatch.setattr(checkpoints, "_publish_request", crash_after_one_part)
    with pytest.raises(Exception, match="injected failure"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=2)
    # One complete part of an incomplete set: every reader ignores it; the hint is unchanged.
    assert _hint_text(root) == before_hint
    assert not [n for n in log_names(root) if "staging" in n]
    assert state_of(spark, root) == before
    assert delta_rs_files(root)[0] == before["version"]
    monkeypatch.setattr(checkpoints, "_publish_request", original)
    checkpoint_and_verify(spark, root, 2)  # a re-run completes the set


def _server_retries_failed_tasks(spark: Any) -> bool:
    """Whether the server runs a failed task again: a cluster, or ``local[N,F]`` with F > 1
    (plain ``local[N]`` never retries)."""
    master = spark.conf.get("spark.master")
    if master.startswith("local"):
        return "," in master and int(master.rstrip("]").rsplit(",", 1)[1]) > 1
    return int(spark.conf.get("spark.task.maxFailures", "4")) > 1


@pytest.mark.worker_errors
def test_a_publish_that_fails_once_is_finished_by_the_task_retry(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first attempt of the publish task renames one part of two and dies; Spark's retry
    finds that part in place, moves the other, writes the hint and removes the staging folder:
    the same checkpoint as an undisturbed publish, which every reader loads alone."""
    if not _server_retries_failed_tasks(spark):
        pytest.skip("the server never retries a failed task (local[*]): make test-retries")
    root = conformance_table(CONFORMANCE_TABLES[0])
    original = checkpoints._publish_request

    def transient_crash(*args: Any) -> Any:
        return dataclasses.replace(original(*args), fail_after_parts=1, fail_in_attempts=1)

    monkeypatch.setattr(checkpoints, "_publish_request", transient_crash)
    assert checkpoint_and_verify(spark, root, 2).parts >= 2


@pytest.mark.parametrize(
    "relative",
    [
        "golden/dv-partitioned-with-checkpoint/delta",
        "kernel/app-txn-no-checkpoint/delta",
        "delta-rs/table-with-domain-metadata/delta",
    ],
)
def test_a_single_file_checkpoint_observes_the_state_it_writes(
    spark: Any, conformance_table: Any, relative: str
) -> None:
    """A snapshot whose state was never queried gets it from the checkpoint's own write job
    (observed metrics), equal to the queried state: no state query runs."""
    root = conformance_table(relative)
    table = DeltaTable.for_path(spark, str(root))
    queried = table.snapshot().state
    snapshot = table.snapshot()
    with mock.patch.object(snapshot_module, "compute_state", wraps=compute_state) as query:
        result = checkpoints.write_checkpoint(snapshot)
        assert snapshot.state_known
        assert snapshot.state == queried
    assert not query.called
    assert result.num_of_add_files == queried.num_of_files
    assert result.num_actions == (
        queried.num_of_files
        + queried.num_of_removes
        + queried.num_of_set_transactions
        + queried.num_of_domain_metadata
        + 2
    )


@pytest.mark.usefixtures("checkpoint_files_joined")
def test_without_observed_metrics_the_state_query_counts_the_checkpoint(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that returns no observed metrics: the state query runs after the write, and
    the add count is checked against it as before."""
    root = conformance_table(CONFORMANCE_TABLES[0])

    no_metrics = types.SimpleNamespace(get={})
    monkeypatch.setattr(checkpoints, "observing", lambda frame, _: (frame, no_metrics))
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    with mock.patch.object(snapshot_module, "compute_state", wraps=compute_state) as query:
        result = checkpoints.write_checkpoint(snapshot)
    assert query.called
    assert result.num_of_add_files == snapshot.state.num_of_files
    monkeypatch.undo()
    assert state_of(spark, root)["version"] == result.version


@pytest.mark.cluster
def test_concurrent_checkpoints_of_one_version(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("dat/multi_partitioned/delta")
    before = state_of(spark, root)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=2)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert parse_last_checkpoint(_hint_text(root) or "").version == before["version"]
    drop_log_before(root, before["version"])
    assert state_of(spark, root) == before
    assert delta_rs_files(root)[0] == before["version"]


@pytest.mark.parametrize("part_size", [None, 2])
def test_another_writers_checkpoint_of_the_version_is_kept_byte_for_byte(
    spark: Any, tmp_path: Path, part_size: int | None
) -> None:
    """delta-rs checkpointed the latest version; ours of the same version keeps its file (it
    replaced it before: on an object store a reader mid-file would mix two files' bytes) and
    writes the hint, true of the file it names; both readers load the table from the
    checkpoint alone. (The hint once gave the kept file our schema, with typed stats it lacks:
    delta-rs then read no stats at all, and counted 0 rows.)"""
    deltalake = pytest.importorskip("deltalake")
    root = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(
            str(root), pa.table({"id": [i], "p": [str(i % 2)]}), mode="append", partition_by=["p"]
        )
    theirs = deltalake.DeltaTable(str(root))
    theirs.create_checkpoint()
    log = root / "_delta_log"
    existing = {path.name: path.read_bytes() for path in log.glob("*.checkpoint*.parquet")}
    (log / "_last_checkpoint").unlink()
    before = state_of(spark, root)
    result = DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=part_size)
    assert result.version == before["version"] == 2
    for name, content in existing.items():
        assert (log / name).read_bytes() == content
    stats = deltalake.DeltaTable(str(root)).get_add_actions(flatten=True).column("num_records")
    assert stats.to_pylist() == [1, 1, 1]
    hint = parse_last_checkpoint(_hint_text(root) or "")
    assert hint.version == 2
    if part_size is None:  # the hint names delta-rs's file, kept
        (kept,) = existing
        assert hint.checkpoint_schema is None
        assert hint.size == pq.read_metadata(log / kept).num_rows == result.num_actions
    drop_log_before(root, before["version"])
    assert state_of(spark, root) == before
    assert delta_rs_files(root)[0] == before["version"]


def test_checkpoint_errors(spark: Any, tmp_path: Path, conformance_table: Any) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    with pytest.raises(CheckpointNonExistTableError):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(-1)
    with pytest.raises(MissingDeltaTableError):
        DeltaTable.for_path(spark, str(tmp_path / "nothing")).create_checkpoint()
    with pytest.raises(DeltaError, match="DELTA_VERSION_NOT_FOUND"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(1000)


@pytest.mark.parametrize(
    ("relative", "error"),
    [
        ("golden/collations-table/delta", UnsupportedFeaturesForWriteError),
        ("kernel/catalog_managed_0/delta", UnsupportedFeaturesForReadError),
    ],
)
def test_no_write_to_a_table_with_features_we_do_not_honor(
    spark: Any, conformance_table: Any, relative: str, error: type[DeltaError]
) -> None:
    root = conformance_table(relative)
    names_before = log_names(root)
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(error, match=r"at version \d+ requires"):
        table.create_checkpoint()
    for dry_run in (True, False):
        with pytest.raises(error):
            table.cleanup_metadata(dry_run=dry_run)
    assert log_names(root) == names_before


def test_checkpoint_of_an_older_version_keeps_newer_hint(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    random_delta_rs_table(root, 7)
    table = DeltaTable.for_path(spark, str(root))
    at_one = state_of(spark, root, 1)
    latest = table.create_checkpoint()
    older = table.create_checkpoint(1)
    assert older.last_checkpoint is None
    assert parse_last_checkpoint(_hint_text(root) or "").version == latest.version
    drop_log_before(root, 1)
    assert state_of(spark, root, 1) == at_one
    assert delta_rs_files(root, 1)[0] == 1


def test_a_hint_naming_a_missing_newer_checkpoint_is_replaced(spark: Any, tmp_path: Path) -> None:
    """A ``_last_checkpoint`` beyond the table (left by a table recreated at the same path)
    names no file: delta-rs fails on it, so our checkpoint's hint replaces it."""
    root = tmp_path / "t"
    random_delta_rs_table(root, 7)
    hint = root / "_delta_log" / "_last_checkpoint"
    hint.write_text('{"version":40,"size":12}')
    table = DeltaTable.for_path(spark, str(root))
    latest = table.latest_version()
    with pytest.raises(deltalake.exceptions.DeltaError, match="_last_checkpoint hint"):
        deltalake.DeltaTable(str(root))
    result = table.create_checkpoint()
    assert result.last_checkpoint is not None
    assert parse_last_checkpoint(_hint_text(root) or "").version == latest
    version, paths = delta_rs_files(root)
    assert (version, len(paths)) == (latest, len(state_of(spark, root)["adds"]))


def test_another_writers_incomplete_multi_part_checkpoint_is_never_completed(
    spark: Any, tmp_path: Path
) -> None:
    """Parts of another writer's unfinished multi-part checkpoint at the names ours would take:
    its split of the actions need not be ours, so completing its set with our parts could lose
    an action or hold one twice. Nothing is written; readers ignore the incomplete set. Our
    own unfinished set is completed."""
    root = tmp_path / "t"
    for i in range(8):
        deltalake.write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    table = DeltaTable.for_path(spark, str(root))
    expected = delta_rs_files(root)
    written = table.create_checkpoint(part_size=2)
    count = written.parts
    assert count >= 3
    log = root / "_delta_log"
    names = [multipart_checkpoint_name(written.version, i + 1, count) for i in range(count)]
    # Our own incomplete set (a checkpoint of ours that died publishing) is split as ours is:
    # completed, the parts there kept.
    (log / names[-1]).unlink()
    kept = {name: (log / name).read_bytes() for name in names[:-1]}
    assert table.create_checkpoint(part_size=2).last_checkpoint is not None
    assert {name: (log / name).read_bytes() for name in names[:-1]} == kept
    assert delta_rs_files(root) == expected
    parts = [pq.read_table(log / name) for name in names]
    # Another writer's split, its last part not yet written: a part holds one of that part's
    # adds instead of one of its own (the same add count: the count check cannot tell).
    with_add = [i for i, part in enumerate(parts) if part.column("add").null_count < len(part)]
    changed, missing = parts[with_add[0]], parts[with_add[-1]]
    own = changed.column("add").is_valid().to_pylist().index(True)
    moved = missing.column("add").is_valid().to_pylist().index(True)
    others = [changed.slice(0, own), changed.slice(own + 1), missing.slice(moved, 1)]
    pq.write_table(pa.concat_tables(others), log / names[with_add[0]])
    (log / names[with_add[-1]]).unlink()
    (log / "_last_checkpoint").unlink()
    before = log_names(root)
    with pytest.raises(CheckpointUnsupportedError, match="incomplete multi-part checkpoint"):
        table.create_checkpoint(part_size=2)
    assert log_names(root) == before
    assert delta_rs_files(root) == expected


DAY_S = 86_400


@pytest.mark.cluster
def test_cleanup_dry_run_and_real(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(10):
        deltalake.write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    table = DeltaTable.for_path(spark, str(root))
    for version in (3, 6, 9):
        table.create_checkpoint(version)
    log = root / "_delta_log"
    age_log_files(log, up_to=6)
    data_before = sorted(p.name for p in root.iterdir() if p.suffix == ".parquet")
    expected = sorted(
        f"{table.log_dir}/{name}"
        for name in log_names(root)
        if (parsed := parse_log_file(name, 1, 0)) is not None and parsed.version < 6
    )
    assert expected == sorted(
        [f"{table.log_dir}/{commit_name(v)}" for v in range(6)]
        + [f"{table.log_dir}/{checkpoint_name(3)}"]
    )
    names_before = log_names(root)
    assert sorted(table.cleanup_metadata(dry_run=True)) == expected
    assert log_names(root) == names_before
    assert sorted(table.cleanup_metadata()) == expected
    assert sorted(f"{table.log_dir}/{n}" for n in set(names_before) - set(log_names(root))) == (
        expected
    )
    assert sorted(p.name for p in root.iterdir() if p.suffix == ".parquet") == data_before
    for version in range(6, 10):
        assert state_of(spark, root, version)["version"] == version
        assert delta_rs_files(root, version)[0] == version
    assert table.cleanup_metadata() == []  # nothing more expired


def test_cleanup_takes_the_hadoop_checksum_files_of_what_it_deletes(
    spark: Any, conformance_table: Any
) -> None:
    """delta-spark on a local disk writes a hidden ``.<name>.crc`` beside each log file, and
    its cleanup deletes both; ours too, and leaves the others. A replaced ``_last_checkpoint``
    loses its stale one."""
    root = conformance_table("golden/basic-with-inserts-deletes-checkpoint/delta")
    log = root / "_delta_log"
    age_log_files(log)
    table = DeltaTable.for_path(spark, str(root))
    assert table.cleanup_metadata()
    names = {path.name for path in log.iterdir()}
    orphans = {n for n in names if n.endswith(".crc") and n[1 : -len(".crc")] not in names}
    assert orphans == set()
    assert {f".{name}.crc" for name in names if not name.startswith(".")} <= names
    table.create_checkpoint()
    assert "._last_checkpoint.crc" not in {path.name for path in log.iterdir()}


@pytest.mark.cluster
def test_cleanup_disabled_or_without_hint(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(3):
        deltalake.write_deltalake(
            str(root),
            pa.table({"id": [i]}),
            mode="append",
            configuration={"delta.enableExpiredLogCleanup": "false"},
        )
    table = DeltaTable.for_path(spark, str(root))
    table.create_checkpoint(1)
    old = time.time() - 60 * DAY_S
    for name in log_names(root):
        os.utime(root / "_delta_log" / name, (old, old))
    assert table.cleanup_metadata() == []
    assert next(f for f in table.list_log().files if f.kind is LogFileKind.COMMIT).version == 0
    # Staging folders of dead writers are swept even then (they are not log files); a folder
    # something wrote into within the last day may belong to a running writer and stays.
    stale, live = (root / "_delta_log" / f"{checkpoints.STAGING_PREFIX}{n}" for n in ("a", "b"))
    for folder in (stale, live):
        (folder / "_temporary").mkdir(parents=True)
        (folder / "_temporary" / "part-00000.parquet").write_bytes(b"partial")
    for path in [stale, *stale.rglob("*")]:
        os.utime(path, (old, old))
    expected = [f"{table.log_dir}/{stale.name}"]
    assert table.cleanup_metadata(dry_run=True) == expected and stale.exists()
    assert table.cleanup_metadata() == expected
    assert not stale.exists() and live.exists()


# --- Typed stats and partition values (delta.checkpoint.writeStatsAsStruct) -----------------


def checkpoint_adds(root: Path, result: checkpoints.CheckpointResult) -> list[dict[str, Any]]:
    """The ``add`` values of the written checkpoint files (parts or sidecars)."""
    adds: list[dict[str, Any]] = []
    for uri in result.paths:
        path = Path(uri.removeprefix("file:"))
        if path.suffix == ".parquet":
            column = pq.read_table(path, columns=["add"]).column(0)
            adds += [add for add in column.to_pylist() if add is not None]
    return adds


def delta_rs_stats(root: Path) -> list[tuple[Any, ...]]:
    """delta-rs's flattened add actions (path, size, stats, partition values) per file."""
    actions = pa.table(deltalake.DeltaTable(str(root)).get_add_actions(flatten=True))
    return sorted(tuple(row.values()) for row in actions.to_pylist())


def test_stats_parsed_and_partition_values_parsed(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    random_delta_rs_table(root, 0)  # partitioned by "part", stats on "id"
    result = DeltaTable.for_path(spark, str(root)).create_checkpoint()
    adds = checkpoint_adds(root, result)
    assert len(adds) == result.num_of_add_files > 0
    for add in adds:
        stats = json.loads(add["stats"])
        assert add["stats_parsed"] == {
            "numRecords": stats["numRecords"],
            "minValues": {"id": stats["minValues"]["id"]},
            "maxValues": {"id": stats["maxValues"]["id"]},
            "nullCount": {"id": stats["nullCount"]["id"]},
        }
        assert add["partitionValues_parsed"] == {"part": dict(add["partitionValues"])["part"]}


def _mark_typed_stats(result: checkpoints.CheckpointResult) -> str:
    """Rewrite the checkpoint so its first add's ``stats_parsed.numRecords`` disagrees with its
    JSON ``stats`` (a value only reuse can carry on); that add's path."""
    path = Path(result.paths[0].removeprefix("file:"))
    table = pq.read_table(path)
    adds = table.column("add").to_pylist()
    index = next(i for i, add in enumerate(adds) if add is not None)
    adds[index]["stats_parsed"]["numRecords"] += 1000
    column = pa.array(adds, type=table.schema.field("add").type)
    pq.write_table(table.set_column(table.schema.get_field_index("add"), "add", column), path)
    return str(adds[index]["path"])


def _numbers_of_records(root: Path, result: checkpoints.CheckpointResult) -> dict[str, Any]:
    return {
        add["path"]: (add["stats_parsed"]["numRecords"], json.loads(add["stats"])["numRecords"])
        for add in checkpoint_adds(root, result)
    }


@pytest.mark.usefixtures("checkpoint_files_joined")
def test_typed_stats_of_the_previous_checkpoint_are_reused(spark: Any, tmp_path: Path) -> None:
    """A live file read from a checkpoint whose ``stats_parsed`` has the type being written
    keeps it (not parsed again); files added since, or a checkpoint of another type, are
    parsed from ``stats``."""
    root = tmp_path / "t"
    random_delta_rs_table(root, 4)
    table = DeltaTable.for_path(spark, str(root))
    marked = _mark_typed_stats(table.create_checkpoint())
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "part": pa.array(["a", "b"])})
    deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])
    second = _numbers_of_records(root, table.create_checkpoint())
    parsed, in_json = second.pop(marked)
    assert parsed == in_json + 1000
    assert second and all(parsed == in_json for parsed, in_json in second.values())
    # Another stats type (no indexed column): every file's stats are parsed again.
    _set_configuration(spark, root, {"delta.dataSkippingNumIndexedCols": "0"})
    third = _numbers_of_records(root, table.create_checkpoint())
    assert marked in third and all(parsed == in_json for parsed, in_json in third.values())


@pytest.mark.usefixtures("checkpoint_files_joined")
def test_one_task_converts_the_rows_only_when_few_stats_are_left_to_parse(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A single-file checkpoint's rows are read and converted by its one writing task unless
    many adds' stats must be parsed (then every core parses and shuffles to the writer)."""
    root = tmp_path / "t"
    random_delta_rs_table(root, 4)
    table = DeltaTable.for_path(spark, str(root))

    def one_task() -> bool:
        snapshot = table.snapshot()
        try:
            parsed_type = checkpoints.stats_parsed_type(snapshot)
            return checkpoints._one_task_converts(snapshot, parsed_type)
        finally:
            snapshot.unpersist()

    assert not one_task()  # no checkpoint yet: every add's stats are to be parsed
    table.create_checkpoint()
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "part": pa.array(["a", "b"])})
    deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])
    assert one_task()  # the checkpoint carries them: one small commit's adds are left
    monkeypatch.setattr(checkpoints, "SERIAL_PARSE_BYTES", 0)
    assert not one_task()
    _set_configuration(spark, root, {"delta.checkpoint.writeStatsAsStruct": "false"})
    assert one_task()  # no typed stats to write
    _set_configuration(
        spark,
        root,
        {"delta.checkpoint.writeStatsAsStruct": "true", "delta.dataSkippingNumIndexedCols": "0"},
    )
    monkeypatch.undo()
    assert not one_task()  # the checkpoint's typed stats are of another type


def _set_configuration(spark: Any, root: Path, settings: dict[str, str]) -> None:
    """Commit a metaData action adding ``settings`` to the table configuration."""
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    metadata = snapshot.metadata.to_action()
    metadata["configuration"] = {**metadata["configuration"], **settings}
    action = {"metaData": {k: v for k, v in metadata.items() if v is not None}}
    (root / "_delta_log" / commit_name(snapshot.version + 1)).write_text(json.dumps(action) + "\n")


def _stats_by_path(spark: Any, root: Path) -> dict[str, dict[str, Any]]:
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    rows = snapshot.all_files().select("path", "stats").collect()
    snapshot.unpersist()
    return {row["path"]: json.loads(row["stats"]) for row in rows}


def test_struct_stats_only_with_column_mapping(spark: Any, conformance_table: Any) -> None:
    """writeStatsAsJson=false: only typed stats, keyed by physical names; delta-rs and our
    reader still see every file's statistics, read from ``stats_parsed`` alone."""
    root = conformance_table("delta-rs/table_with_column_mapping/delta")
    _set_configuration(spark, root, {"delta.checkpoint.writeStatsAsJson": "false"})
    stats_before, ours_before = delta_rs_stats(root), _stats_by_path(spark, root)
    result = checkpoint_and_verify(spark, root, None)
    adds = checkpoint_adds(root, result)
    schema = json.loads(state_of(spark, root)["metadata"].schema_string)
    physical = {
        f["name"]: f["metadata"]["delta.columnMapping.physicalName"] for f in schema["fields"]
    }
    data_column, partition_column = physical["Super Name"], physical["Company Very Short"]
    for add in adds:
        assert "stats" not in add
        assert set(add["stats_parsed"]["minValues"]) == {data_column}
        assert add["partitionValues_parsed"] == {
            partition_column: dict(add["partitionValues"])[partition_column]
        }
    assert delta_rs_stats(root) == stats_before
    ours = _stats_by_path(spark, root)
    for path, stats in ours_before.items():
        assert {k: ours[path][k] for k in stats} == stats


# --- A server killed in the middle of a checkpoint ------------------------------------------

KILL_PORTS = range(15013, 15020)


def _kill_port() -> int:
    from delta_connect_py.embedded import _port_open, free_port

    return next((port for port in KILL_PORTS if not _port_open(port)), None) or free_port()


def _worker_python() -> str:
    vanilla = Path(__file__).resolve().parents[2] / ".venv-worker" / "bin" / "python"
    return os.environ.get("DELTA_CONNECT_WORKER_PYTHON") or (
        str(vanilla) if vanilla.exists() else sys.executable
    )


def _doomed_session(remote: str) -> Any:
    """A session to a server that will be killed: few, short retries, so the client gives up
    in seconds instead of minutes once the server is gone."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client.retries import DefaultPolicy

    from delta_connect_py.session import prepare_session

    session = SparkSession.builder.remote(remote).create()
    policy = DefaultPolicy(max_retries=2, initial_backoff=100, max_backoff=200)
    session._client.set_retry_policies([policy])
    prepare_session(session)
    return session


def _wait_for(condition: Any, what: str, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Spark's Python daemon leaves the JVM's process group)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def _kill_tree(pids: list[int]) -> None:
    """SIGKILL every process, as if the machine died, and wait until they are gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def gone() -> bool:
        return not any(Path(f"/proc/{pid}").exists() and _running(pid) for pid in pids)

    _wait_for(gone, "the killed server's processes to exit", 60)


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _staging_dirs(root: Path) -> list[Path]:
    return [
        p for p in (root / "_delta_log").iterdir() if p.name.startswith(checkpoints.STAGING_PREFIX)
    ]


def _after_first_written_batch(
    monkeypatch: pytest.MonkeyPatch, action: Any, flush_bytes: int = 0
) -> None:
    """Each checkpoint writer task writes its first batch, then runs ``action`` (on the
    server's worker). With ``flush_bytes``, the batch is first repeated until that many bytes
    have gone out: the worker's output stream is buffered, and a small batch would otherwise
    never reach the writer before ``action`` stalls the task."""
    original = checkpoints.checkpoint_frame

    def wrapped_frame(*args: Any) -> Any:
        frame = original(*args)

        def write_then_act(batches: Any) -> Any:
            for batch in batches:
                yield batch
                sent = batch.nbytes
                while sent < flush_bytes and batch.num_rows:
                    yield batch
                    sent += batch.nbytes
                action()

        return frame.mapInArrow(write_then_act, frame.schema)

    monkeypatch.setattr(checkpoints, "checkpoint_frame", wrapped_frame)


def _checkpoint_files(root: Path, version: int) -> list[str]:
    """Names of ``version``'s checkpoint files; each must be a complete parquet file."""
    names = []
    for name in log_names(root):
        parsed = parse_log_file(name, 1, 0)
        if parsed is not None and parsed.is_checkpoint and parsed.version == version:
            pq.read_metadata(root / "_delta_log" / name)  # raises on a partial file
            names.append(name)
    return names


@pytest.mark.embedded
def test_server_killed_mid_checkpoint(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of the whole server (JVM and Python workers) while the writer tasks are writing
    the parts: no checkpoint file appears, the hint is untouched, readers (ours on another
    server, delta-rs, delta-kernel-rs) ignore the staging folder left behind, and a re-run
    completes the checkpoint and removes that folder once it is stale. (A failure after some
    parts were renamed is covered by test_failed_publish_and_mismatch_publish_nothing_visible.)
    """
    from delta_connect_py.embedded import EmbeddedServer

    root = tmp_path / "t"
    random_delta_rs_table(root, 2)
    before, rows_before, hint_before = state_of(spark, root), kernel_rows(root), _hint_text(root)

    def stall() -> None:  # nested: pickled by value; stalls the writer so the kill lands mid-write
        import time as worker_time

        worker_time.sleep(600)

    server = EmbeddedServer(port=_kill_port(), worker_python=_worker_python()).start()
    try:
        doomed = _doomed_session(server.remote)
        # Padding rows go into a part file that is never published: the server dies first.
        _after_first_written_batch(monkeypatch, stall, flush_bytes=1 << 20)
        outcome: list[BaseException | None] = []

        def run() -> None:
            try:
                DeltaTable.for_path(doomed, str(root)).create_checkpoint(part_size=2)
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        _wait_for(lambda: _staging_dirs(root), "the staging folder")
        _wait_for(lambda: list(_staging_dirs(root)[0].rglob("part-*")), "a writer's open file")
        assert server.process is not None
        _kill_tree(_process_tree(server.process.pid))
        server.process.wait(timeout=60)
        thread.join(timeout=120)
        with contextlib.suppress(Exception):
            doomed.stop()
        assert outcome and outcome[0] is not None  # the client saw the failure
    finally:
        server.stop()
        monkeypatch.undo()
    # Nothing under a final name (a partial file there would fail to parse); the hint unchanged.
    assert _checkpoint_files(root, before["version"]) == []
    assert _hint_text(root) == hint_before
    assert _staging_dirs(root)  # the dead writer's folder is left behind ...
    assert state_of(spark, root) == before  # ... and ignored by every reader
    assert delta_rs_files(root) == (before["version"], sorted(p for p, _, _ in before["adds"]))
    assert kernel_rows(root) == rows_before
    # Stale (created two days ago, by the time in its name; file times do not count): the
    # next checkpoint's publish removes it.
    folder = _staging_dirs(root)[0]
    old_ms = int((time.time() - 2 * DAY_S) * 1000)
    folder.rename(folder.with_name(staging_folder_name(old_ms, folder.name.rsplit(".", 1)[1])))
    checkpoint_and_verify(spark, root, 2)
