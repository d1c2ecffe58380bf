"""The checkpoint publish and delete worker bodies under Spark's task retries, without Spark.

Spark runs a failed task again (4 attempts on a cluster): each body here is called as a retry
would call it, on the file system an earlier attempt left, and must end in the same result.
The same bodies run on a real server (local[*,4] and the standalone cluster) in
``tests/integration/test_checkpoint.py``.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_connect_py.errors import CheckpointSnapshotMismatchError
from delta_connect_py.protocol.filenames import checkpoint_name, multipart_checkpoint_name
from delta_connect_py.protocol.staging import staging_folder_name
from delta_connect_py.worker.checkpoint_files import (
    REFUSAL_NAME,
    DeleteRequest,
    PublishRequest,
    delete_log_files,
    publish_checkpoint,
)
from delta_connect_py.worker.failures import decode_error

ADD = pa.struct([("path", pa.string()), ("size", pa.int64())])
SCHEMA = pa.schema([("add", ADD), ("protocol", pa.struct([("minReaderVersion", pa.int32())]))])
ONE_ROW = [pa.record_batch({"id": [0]})]


def _stage(log: Path, parts: dict[int, int]) -> Path:
    """A staging folder as Spark's writer leaves it: ``parts`` maps partition -> add rows."""
    staging = log / staging_folder_name(1_000, uuid.uuid4().hex)
    staging.mkdir(parents=True)
    for part, adds in parts.items():
        rows = [{"add": {"path": f"f{part}-{i}", "size": 1}, "protocol": None} for i in range(adds)]
        if part == 0:
            rows.append({"add": None, "protocol": {"minReaderVersion": 1}})
        table = pa.Table.from_pylist(rows, schema=SCHEMA)
        pq.write_table(table, staging / f"part-{part:05d}-{uuid.uuid4()}-c000.snappy.parquet")
    (staging / "_SUCCESS").write_bytes(b"")
    return staging


def _request(log: Path, staging: Path, **changes: Any) -> PublishRequest:
    fields: dict[str, Any] = {
        "table_root": f"file:{log.parent}",
        "log_dir": f"file:{log}",
        "staging_dir": f"file:{staging}",
        "version": 3,
        "num_parts": 1,
        "multi_part": False,
        "expected_adds": 2,
        "checkpoint_schema": None,
        "now_ms": 2_000,
    }
    return PublishRequest(**{**fields, **changes})


def _rows(request: PublishRequest) -> list[dict[str, Any]]:
    return [row for batch in publish_checkpoint(request, ONE_ROW) for row in batch.to_pylist()]


def test_a_refused_publish_reports_the_same_refusal_on_retry(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    staging = _stage(log, {0: 2})
    request = _request(log, staging, expected_adds=3)
    first = _rows(request)
    assert len(first) == 1 and first[0]["path"] is None
    error = decode_error(first[0]["refusal"])
    assert isinstance(error, CheckpointSnapshotMismatchError)
    assert error.message_parameters == {
        "version": "3",
        "path": request.table_root,
        "written": "2",
        "expected": "3",
    }
    assert (staging / REFUSAL_NAME).exists()  # left for the client's discard job
    assert sorted(p.name for p in log.iterdir()) == [staging.name]  # nothing published
    # A retry (even one that finds the staged files half removed) reports the same refusal.
    for part in staging.glob("part-*"):
        part.unlink()
    assert _rows(request) == first
    assert sorted(p.name for p in log.iterdir()) == [staging.name]


def test_a_publish_retried_after_a_crash_mid_rename_finishes_it(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    staging = _stage(log, {0: 1, 2: 1})  # partition 1 is empty: Spark wrote no file for it
    request = _request(log, staging, num_parts=3, multi_part=True)
    with pytest.raises(RuntimeError, match="injected failure after publishing 1"):
        _rows(_request(log, staging, num_parts=3, multi_part=True, fail_after_parts=1))
    finals = [multipart_checkpoint_name(3, part, 3) for part in (1, 2, 3)]
    assert (log / finals[0]).exists() and staging.exists()  # one part in place, folder kept
    assert not (log / "_last_checkpoint").exists()
    # Every later attempt meets the same crash at once (nothing moved) ...
    with pytest.raises(RuntimeError, match="injected failure after publishing 1"):
        _rows(_request(log, staging, num_parts=3, multi_part=True, fail_after_parts=1))
    # ... and a retry without it finishes the same publish.
    rows = _rows(request)
    assert [row["path"] for row in rows] == [f"file:{log}/{name}" for name in finals]
    assert [row["adds"] for row in rows] == [1, 0, 1]
    assert all(row["refusal"] is None for row in rows)
    assert not staging.exists()
    assert sorted(p.name for p in log.iterdir()) == sorted([*finals, "_last_checkpoint"])
    assert rows[0]["last_checkpoint"] == (log / "_last_checkpoint").read_text()


def test_a_publish_retried_after_it_completed_reports_the_same_files(tmp_path: Path) -> None:
    """The attempt published and removed its staging folder, then died before its result
    reached the driver: the retry reports what is published, not FileNotFoundError."""
    log = tmp_path / "_delta_log"
    staging = _stage(log, {0: 2})
    request = _request(log, staging)
    first = _rows(request)
    assert not staging.exists() and (log / checkpoint_name(3)).exists()
    assert _rows(request) == first


def test_v2_sidecars_keep_their_names_across_attempts(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    staging = _stage(log, {0: 1, 1: 2})
    changes: dict[str, Any] = {
        "num_parts": 2,
        "expected_adds": 3,
        "sidecars": True,
        "checkpoint_uuid": str(uuid.uuid4()),
        "non_file_actions": ('{"checkpointMetadata":{"version":3}}',),
    }
    with pytest.raises(RuntimeError, match="injected failure"):
        _rows(_request(log, staging, fail_after_parts=1, **changes))
    moved = sorted(p.name for p in (log / "_sidecars").iterdir())
    rows = _rows(_request(log, staging, **changes))
    sidecars = sorted(p.name for p in (log / "_sidecars").iterdir())
    assert len(sidecars) == 2 and set(moved) < set(sidecars)
    assert sorted(row["path"].rsplit("/", 1)[1] for row in rows[1:]) == sidecars
    assert sum(row["adds"] for row in rows) == 3
    assert _rows(_request(log, staging, **changes)) == rows  # completed: the same report


def test_deletes_retried_after_a_partial_attempt_succeed(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()
    names = [f"{version:020d}.json" for version in range(3)]
    for name in names:
        (log / name).write_text("{}\n")
    request = DeleteRequest(
        log_dir=f"file:{log}",
        paths=tuple(f"file:{log}/{name}" for name in names),
        retained_checkpoints=(),
        sweep_sidecars=False,
        cutoff_ms=0,
        dry_run=False,
    )
    (log / names[0]).unlink()  # deleted by an earlier attempt
    deleted = [
        row["path"] for batch in delete_log_files(request, ONE_ROW) for row in batch.to_pylist()
    ]
    assert deleted == list(request.paths)
    assert not list(log.iterdir())
    again = [
        row["path"] for batch in delete_log_files(request, ONE_ROW) for row in batch.to_pylist()
    ]
    assert again == deleted


def test_a_file_too_large_for_one_s3_copy_is_refused_before_any_rename(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On S3 a rename is one CopyObject (at most 5 GiB): the publish refuses, suggesting
    part_size, before anything is renamed. The limit is lowered here to the staged file's size
    (a 5 GiB file would not fit the test machine); the rule itself is in test_staging.py."""
    from pyarrow import fs as pafs

    from delta_connect_py.errors import CheckpointUnsupportedError
    from delta_connect_py.protocol import staging as staging_rules
    from delta_connect_py.worker import checkpoint_files

    log = tmp_path / "_delta_log"
    staging = _stage(log, {0: 2})
    size = next(staging.glob("part-*")).stat().st_size
    request = _request(log, staging, log_dir="s3a://bucket/table/_delta_log")
    final = str(log / checkpoint_name(3))
    local = pafs.LocalFileSystem()
    monkeypatch.setattr(staging_rules, "S3_SINGLE_COPY_BYTES", size)
    assert isinstance(checkpoint_files._stage(local, str(staging), [final], request), list)
    monkeypatch.setattr(staging_rules, "S3_SINGLE_COPY_BYTES", size - 1)
    refusal = checkpoint_files._stage(local, str(staging), [final], request)
    assert isinstance(refusal, CheckpointUnsupportedError)
    assert "part_size" in str(refusal) and str(size) in str(refusal)
    assert sorted(p.name for p in log.iterdir()) == [staging.name]
    # The same files on a local file system: no limit.
    assert isinstance(
        checkpoint_files._stage(local, str(staging), [final], _request(log, staging)), list
    )


def test_stale_staging_folders_are_judged_by_the_time_in_their_name(tmp_path: Path) -> None:
    """The sweep of cleanup_metadata (and of every publish): a folder named with its creation
    time is stale by that time alone, whatever its file times (S3 prefixes have none); an
    old-style name keeps the modification-time rule."""
    import os

    log = tmp_path / "_delta_log"
    log.mkdir()
    now, day = 10 * 86_400_000, 86_400_000
    young = log / staging_folder_name(now - 1_000, "young")  # files look ancient: kept
    old = log / staging_folder_name(now - 2 * day, "old")  # files look fresh: swept
    legacy_old, legacy_young = log / "_delta_connect_staging.a", log / "_delta_connect_staging.b"
    for folder in (young, old, legacy_old, legacy_young):
        folder.mkdir()
        (folder / "part-00000-x.parquet").write_bytes(b"partial")
    for path in [young, *young.iterdir(), legacy_old, *legacy_old.iterdir()]:
        os.utime(path, (1.0, 1.0))
    request = DeleteRequest(
        log_dir=f"file:{log}",
        paths=(),
        retained_checkpoints=(),
        sweep_sidecars=False,
        cutoff_ms=0,
        dry_run=False,
        stale_staging_before_ms=now - day,
    )
    rows = [
        row["path"] for batch in delete_log_files(request, ONE_ROW) for row in batch.to_pylist()
    ]
    assert sorted(rows) == sorted(f"file:{log}/{f.name}" for f in (old, legacy_old))
    assert sorted(p.name for p in log.iterdir()) == sorted([young.name, legacy_young.name])
