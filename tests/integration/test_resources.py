"""Resources: the checkpoint and state of a big table on a server with a small heap, a
checkpoint onto a full file system, and a Python worker killed in the middle of a replay task
(``make test-resources``: a server with 1 GB of driver memory that retries failed tasks; the
killed worker also in ``make test-retries``)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from delta_connect_py.errors import DeltaError
from delta_connect_py.plans import replay as replay_plans
from delta_connect_py.table import DeltaTable

deltalake = pytest.importorskip("deltalake")

pytestmark = pytest.mark.resources

#: The small file system a checkpoint is written onto (room for the table and little else).
TMPFS_BYTES = 8 << 20
#: Files of the table the small-heap test checkpoints (a log only: ~100 MB of JSON commits by
#: default; 1,000,000, the bench's L, by hand), over commits of 10,000 files each.
BIG_TABLE_FILES = int(os.environ.get("DELTA_RESOURCES_BIG_TABLE_FILES", "300000"))
BIG_TABLE_COMMITS = max(1, BIG_TABLE_FILES // 10_000)


def delta_rs_table(root: Path, commits: int) -> None:
    for i in range(commits):
        data = pa.table({"id": list(range(i * 10, i * 10 + 10)), "part": ["ab"[i % 2]] * 10})
        deltalake.write_deltalake(str(root), data, mode="append", partition_by=["part"])


def delta_rs_files(root: Path) -> list[str]:
    actions = deltalake.DeltaTable(str(root)).get_add_actions(flatten=True)
    return sorted(actions.column("path").to_pylist())


def our_files(spark: Any, root: Path) -> list[str]:
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    try:
        return sorted(row["path"] for row in snapshot.all_files().select("path").collect())
    finally:
        snapshot.unpersist()


@pytest.fixture
def small_file_system(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of :data:`TMPFS_BYTES` (root only; the server must run on this machine)."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    size = f"size={TMPFS_BYTES}"
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mount_point)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def fill(file_system: Path) -> None:
    """Write into a filler file until the file system is full."""
    with open(file_system / "filler", "wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    with contextlib.suppress(OSError), open(file_system / "filler-tail", "wb") as out:
        while True:
            out.write(b"\0" * 512)
            out.flush()


def test_checkpoint_onto_a_full_file_system(spark: Any, tmp_path: Path, small_file_system: Path):
    """The staging write (or the publish) runs out of space: a DeltaError, nothing new in
    ``_delta_log`` (no part, no hint, no staging folder), every reader loads the table as it
    was; with the space back, the checkpoint is written."""
    source = tmp_path / "source"
    delta_rs_table(source, 40)
    root = small_file_system / "table"
    shutil.copytree(source, root)
    before_names = sorted(os.listdir(root / "_delta_log"))
    expected = delta_rs_files(root)
    assert our_files(spark, root) == expected  # read before the disk fills (nothing cached)
    fill(small_file_system)
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(DeltaError) as raised:
        table.create_checkpoint()
    assert "space" in str(raised.value).lower(), raised.value
    assert sorted(os.listdir(root / "_delta_log")) == before_names
    assert delta_rs_files(root) == expected
    assert our_files(spark, root) == expected
    for filler in small_file_system.glob("filler*"):
        filler.unlink()
    result = table.create_checkpoint()
    assert result.version == 39
    assert delta_rs_files(root) == expected


@pytest.mark.worker_errors
def test_a_python_worker_killed_mid_replay(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The replay's first task attempt loses its Python worker (SIGKILL after its first
    batch); Spark runs the task again and the state equals delta-rs's."""
    master = spark.conf.get("spark.master")
    if master.startswith("local") and not ("," in master and int(master[:-1].split(",")[1]) > 1):
        pytest.skip("the server never retries a failed task (local[*]): make test-retries")
    root = tmp_path / "t"
    delta_rs_table(root, 12)
    deltalake.DeltaTable(str(root)).delete("id % 3 = 0")
    original = replay_plans.map_in_arrow

    def dying_first_attempt(frame: Any, body: Any, schema: Any) -> Any:
        def body_that_dies(batches: Any) -> Any:  # nested: pickled by value
            import os as worker_os
            import signal as worker_signal

            from pyspark import TaskContext

            context = TaskContext.get()
            for batch in body(batches):
                yield batch
                if context is not None and context.attemptNumber() == 0:
                    worker_os.kill(worker_os.getpid(), worker_signal.SIGKILL)

        return original(frame, body_that_dies, schema)

    monkeypatch.setattr(replay_plans, "map_in_arrow", dying_first_attempt)
    assert our_files(spark, root) == delta_rs_files(root)


def write_big_log(root: Path, files: int, commits: int) -> None:
    """A log-only table: ``files`` adds with stats over ``commits`` commits, no data files."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "part", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    header = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": "big",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": ["part"],
                "configuration": {},
                "createdTime": 0,
            }
        },
    ]
    per_commit = files // commits
    for version in range(commits):
        actions = list(header) if version == 0 else []
        for i in range(version * per_commit, (version + 1) * per_commit):
            stats = {
                "numRecords": 10,
                "minValues": {"id": i * 10},
                "maxValues": {"id": i * 10 + 9},
                "nullCount": {"id": 0},
            }
            add = {
                "path": f"part={'ab'[i % 2]}/f-{i:08d}.parquet",
                "partitionValues": {"part": "ab"[i % 2]},
                "size": 1000 + i % 100,
                "modificationTime": 1_700_000_000_000 + i,
                "dataChange": True,
                "stats": json.dumps(stats),
            }
            actions.append({"add": add})
        lines = "\n".join(json.dumps(action) for action in actions) + "\n"
        (log / f"{version:020d}.json").write_text(lines)


def test_checkpoint_and_state_of_a_big_table_on_a_small_heap(spark: Any, tmp_path: Path) -> None:
    """On the 1 GB server of ``make test-resources``: the checkpoint is written and loads in
    delta-rs, or a DeltaError says why and nothing is published; never a server out of memory
    (a raw error, or a dead server failing every later test)."""
    root = tmp_path / "big"
    write_big_log(root, BIG_TABLE_FILES, BIG_TABLE_COMMITS)
    names_before = sorted(os.listdir(root / "_delta_log"))
    table = DeltaTable.for_path(spark, str(root))
    try:
        result = table.create_checkpoint()
    except DeltaError:
        assert sorted(os.listdir(root / "_delta_log")) == names_before
        raise
    assert result.num_of_add_files == BIG_TABLE_FILES
    snapshot = table.snapshot()
    try:
        assert snapshot.state.num_of_files == BIG_TABLE_FILES
    finally:
        snapshot.unpersist()
    for version in range(BIG_TABLE_COMMITS - 1):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    assert len(delta_rs_files(root)) == BIG_TABLE_FILES
