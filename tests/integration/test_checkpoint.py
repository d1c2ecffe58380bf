"""Checkpoints and expired-log cleanup written on the server, checked with delta-rs and replay."""

from __future__ import annotations

import dataclasses
import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_connect_py import checkpoints
from delta_connect_py.errors import (
    CheckpointNonExistTableError,
    CheckpointSnapshotMismatchError,
    DeltaError,
    MissingDeltaTableError,
)
from delta_connect_py.protocol.filenames import (
    LogFileKind,
    checkpoint_name,
    commit_name,
    multipart_checkpoint_name,
    parse_log_file,
)
from delta_connect_py.protocol.last_checkpoint import parse_last_checkpoint
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


def drop_log_before(root: Path, version: int) -> None:
    """Delete every commit, checkpoint and crc up to ``version`` except its new checkpoint."""
    for name in log_names(root):
        parsed = parse_log_file(name, 1, 0)
        if parsed is None or parsed.version > version:
            continue
        if parsed.version == version and parsed.is_checkpoint:
            continue
        os.remove(root / "_delta_log" / name)


def check_hint(root: Path, result: checkpoints.CheckpointResult) -> None:
    hint = parse_last_checkpoint((root / "_delta_log" / "_last_checkpoint").read_text())
    assert hint.checksum is not None
    assert hint.version == result.version
    assert hint.size == result.num_actions
    assert hint.size_in_bytes == result.size_in_bytes
    assert hint.num_of_add_files == result.num_of_add_files
    assert hint.parts == (result.parts if result.parts > 1 else None)


def checkpoint_and_verify(spark: Any, root: Path, part_size: int | None) -> None:
    before = state_of(spark, root)
    table = DeltaTable.for_path(spark, str(root))
    result = table.create_checkpoint(part_size=part_size)
    assert result.version == before["version"]
    assert result.num_of_add_files == len(before["adds"])
    names = log_names(root)
    assert not [n for n in names if n.startswith(checkpoints.STAGING_PREFIX)]
    if result.parts == 1:
        assert checkpoint_name(result.version) in names
    else:
        for part in range(1, result.parts + 1):
            assert multipart_checkpoint_name(result.version, part, result.parts) in names
    check_hint(root, result)
    drop_log_before(root, result.version)
    assert state_of(spark, root) == before
    version, paths = delta_rs_files(root)
    assert version == before["version"]
    assert paths == sorted(path for path, _, _ in before["adds"])


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


def test_v2_table_gets_classic_named_v2_checkpoint(spark: Any, conformance_table: Any) -> None:
    root = conformance_table(V2_TABLE)
    with pytest.raises(DeltaError, match="DELTA_CHECKPOINT_UNSUPPORTED"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=1)
    checkpoint_and_verify(spark, root, None)
    rows = pa.parquet.read_table(
        root / "_delta_log" / checkpoint_name(2), columns=["checkpointMetadata"]
    )
    assert rows.column(0).drop_null().to_pylist() == [{"version": 2, "tags": None}]


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


def test_failed_write_leaves_nothing(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    before_names, before_hint = log_names(root), _hint_text(root)
    original = checkpoints.checkpoint_frame

    def failing_frame(*args: Any) -> Any:
        frame = original(*args)

        def explode(batches: Any) -> Any:
            for batch in batches:
                yield batch
                raise RuntimeError("injected failure inside the checkpoint writer")

        return frame.mapInArrow(explode, frame.schema)

    monkeypatch.setattr(checkpoints, "checkpoint_frame", failing_frame)
    with pytest.raises(Exception, match="injected failure"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint()
    assert log_names(root) == before_names
    assert _hint_text(root) == before_hint


def test_failed_publish_and_mismatch_publish_nothing_visible(
    spark: Any, conformance_table: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    before = state_of(spark, root)
    before_hint = _hint_text(root)
    original = checkpoints._publish_request

    def mismatch(*args: Any) -> Any:
        request = original(*args)
        return dataclasses.replace(request, expected_adds=request.expected_adds + 1)

    monkeypatch.setattr(checkpoints, "_publish_request", mismatch)
    with pytest.raises(CheckpointSnapshotMismatchError, match="doesn't match"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(part_size=2)
    assert not [n for n in log_names(root) if ".checkpoint.0" in n or "staging" in n]
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


def test_checkpoint_errors(spark: Any, tmp_path: Path, conformance_table: Any) -> None:
    root = conformance_table(CONFORMANCE_TABLES[0])
    with pytest.raises(CheckpointNonExistTableError):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(-1)
    with pytest.raises(MissingDeltaTableError):
        DeltaTable.for_path(spark, str(tmp_path / "nothing")).create_checkpoint()
    with pytest.raises(DeltaError, match="DELTA_VERSION_NOT_FOUND"):
        DeltaTable.for_path(spark, str(root)).create_checkpoint(1000)


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


DAY_S = 86_400


def test_cleanup_dry_run_and_real(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(10):
        deltalake.write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    table = DeltaTable.for_path(spark, str(root))
    for version in (3, 6, 9):
        table.create_checkpoint(version)
    log = root / "_delta_log"
    old = time.time() - 60 * DAY_S
    for name in log_names(root):
        parsed = parse_log_file(name, 1, 0)
        if parsed is not None and parsed.version <= 6:
            os.utime(log / name, (old + parsed.version, old + parsed.version))
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
