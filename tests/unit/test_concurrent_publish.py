"""Worker bodies meeting another writer, without Spark: the pause hand-shake the concurrency
tests interleave with, a hint whose checkpoint a concurrent cleanup deleted, and a cleanup whose
retained checkpoint another cleanup deleted (the seeded interleavings on a real server are in
``tests/integration/test_concurrent_writers.py``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyarrow.fs import LocalFileSystem

from delta_connect_py.checkpoints import out_of_space
from delta_connect_py.errors import StorageFullError
from delta_connect_py.worker.checkpoint_files import (
    DeleteRequest,
    delete_log_files,
    write_last_checkpoint,
)
from delta_connect_py.worker.pauses import pause_at

ONE_ROW = [pa.record_batch({"id": [0]})]


def test_pause_waits_for_the_go_ahead_and_can_be_met_again(tmp_path: Path) -> None:
    passed: list[str] = []

    def worker() -> None:
        for _ in range(2):
            pause_at(str(tmp_path), "rename")
            passed.append("rename")

    thread = threading.Thread(target=worker)
    thread.start()
    for expected in (0, 1):
        deadline = time.monotonic() + 10
        while not (tmp_path / "rename.reached").exists():
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert len(passed) == expected  # held at the point until released
        (tmp_path / "rename.reached").rename(tmp_path / "rename.go")
    thread.join(timeout=10)
    assert passed == ["rename", "rename"]
    assert list(tmp_path.iterdir()) == []


def test_no_pause_folder_touches_nothing() -> None:
    pause_at(None, "rename")  # returns at once
    with pytest.raises(ValueError):
        pause_at("/tmp", "a/b")


def test_a_pause_without_go_ahead_times_out(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="no go-ahead"):
        pause_at(str(tmp_path), "hint-read", timeout_s=0.05)


def test_hint_naming_a_deleted_checkpoint_is_removed_again(tmp_path: Path) -> None:
    fs = LocalFileSystem()
    present, gone = tmp_path / "5.checkpoint.parquet", tmp_path / "7.checkpoint.parquet"
    present.write_bytes(b"x")
    hint = tmp_path / "_last_checkpoint"
    assert write_last_checkpoint(
        fs, str(tmp_path), '{"version":5,"size":1}', 5, None, (str(present),)
    )
    assert hint.read_text() == '{"version":5,"size":1}'
    # Deleted by a concurrent cleanup before the replace: no hint rather than a wrong one.
    assert not write_last_checkpoint(
        fs, str(tmp_path), '{"version":7,"size":1}', 7, None, (str(gone),)
    )
    assert not hint.exists()


def test_cleanup_skips_a_retained_checkpoint_another_cleanup_deleted(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    sidecars = log / "_sidecars"
    sidecars.mkdir(parents=True)
    (sidecars / "old.parquet").write_bytes(b"x")
    kept = log / f"{9:020d}.checkpoint.parquet"
    pq.write_table(pa.table({"sidecar": [{"path": "kept.parquet"}]}), kept)
    (sidecars / "kept.parquet").write_bytes(b"x")
    request = DeleteRequest(
        log_dir=f"file:{log}",
        paths=(),
        retained_checkpoints=(f"file:{log}/{7:020d}.checkpoint.parquet",),  # gone meanwhile
        sweep_sidecars=True,
        cutoff_ms=10**13,
        dry_run=False,
    )
    deleted = [row for batch in delete_log_files(request, ONE_ROW) for row in batch.to_pylist()]
    # The checkpoint written since the plan (9) still protects its sidecar.
    assert deleted == [{"path": f"file:{log}/_sidecars/old.parquet"}]
    assert (sidecars / "kept.parquet").exists()


def test_out_of_space_is_recognised() -> None:
    error = out_of_space(
        RuntimeError("java.io.IOException: No space left on device"), "create_checkpoint", "/t/x"
    )
    assert isinstance(error, StorageFullError)
    assert error.getErrorClass() == "DELTA_CONNECT_STORAGE_FULL"
    assert out_of_space(RuntimeError("other"), "create_checkpoint", "/t/x") is None


def test_observed_metrics_without_a_tombstone() -> None:
    """Spark leaves a null metric out: a replay of commits without any remove (a poller's
    update() after appends only) has no ``oldestTombstone``."""
    from delta_connect_py.plans.state import ObservedLayer

    metrics = {
        "sizeInBytes": 10,
        "numOfFiles": 1,
        "numOfRemoves": 0,
        "keysNotPlain": False,
        "numOfMetadata": 0,
        "numOfProtocol": 0,
        "numOfSetTransactions": 0,
        "numOfDomainMetadata": 0,
        "protocol": "[]",
        "metadata": "[]",
        "setTransactions": "[]",
        "domainMetadata": "[]",
    }
    layer = ObservedLayer.from_metrics(metrics, None)
    assert layer.sums.num_of_files == 1
