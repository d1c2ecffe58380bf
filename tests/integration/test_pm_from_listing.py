"""A local log's listing brings the protocol and metadata lines of its commits.

A latest snapshot whose segment has no checkpoint then takes its P&M from them, with no job of
its own, and a snapshot extended by new commits takes theirs likewise. What it takes must equal
what the P&M read of the same commits finds, the in-commit timestamp included, and a damaged
line must still be reported by that read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from delta_connect_py import DeltaTable
from delta_connect_py.errors import CorruptLogFileError
from delta_connect_py.plans import protocol_metadata
from tests.conftest import CONFORMANCE

pytestmark = pytest.mark.integration


@pytest.fixture
def pm_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The versions whose P&M were read by a job of their own, in order."""
    read: list[int] = []
    real = protocol_metadata._log_rows

    def counting(spark: Any, segment: Any, log_dir: str) -> Any:
        read.append(segment.version)
        return real(spark, segment, log_dir)

    monkeypatch.setattr(protocol_metadata, "_log_rows", counting)
    return read


def _without_checksums(path: Path) -> Path:
    for checksum in (path / "_delta_log").glob("*.crc"):
        checksum.unlink()
    return path


def test_a_snapshot_takes_its_pm_from_the_listing(
    spark: Any, conformance_table: Any, pm_reads: list[int]
) -> None:
    path = _without_checksums(conformance_table("delta-rs/cdc_ict_table/delta"))
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    from_listing = table.snapshot().protocol_and_metadata
    assert pm_reads == []
    segment = table.log_segment()
    read = protocol_metadata.protocol_and_metadata(spark, segment, table.log_dir)
    assert pm_reads == [segment.version]
    assert from_listing == read
    assert read.in_commit_timestamp is not None  # the table writes in-commit timestamps


def test_an_extended_snapshot_takes_the_new_commits_pm_from_the_listing(
    spark: Any, tmp_path: Path, pm_reads: list[int]
) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2]}))
    write_deltalake(str(path), pa.table({"id": [3]}), mode="append")
    table = DeltaTable.for_path(spark, str(path))
    first = table.snapshot()
    first.state  # noqa: B018 (computed: a later snapshot extends it)
    RsTable(str(path)).alter.set_table_properties({"delta.logRetentionDuration": "interval 9 days"})
    _without_checksums(path)
    extended = table.snapshot()
    assert extended.version == first.version + 1
    assert extended.metadata.configuration["delta.logRetentionDuration"] == "interval 9 days"
    assert pm_reads == []
    fresh = DeltaTable.for_path(spark, str(path), snapshot_cache=False).snapshot()
    assert extended.protocol_and_metadata == fresh.protocol_and_metadata
    assert extended.state == fresh.state


def test_a_damaged_metadata_line_is_still_reported(
    spark: Any, conformance_table: Any, pm_reads: list[int]
) -> None:
    path = _without_checksums(conformance_table("delta-rs/cdc_ict_table/delta"))
    newest = sorted((path / "_delta_log").glob("*.json"))[-1]
    # A metaData action without its id: Spark's parser takes it, the protocol does not.
    newest.write_text(newest.read_text() + '{"metaData":{"format":{"provider":"parquet"}}}\n')
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    with pytest.raises(CorruptLogFileError, match="metaData action has no id"):
        table.snapshot()
    assert pm_reads  # the listing's lines were not taken: the P&M read ran and reported it


def test_history_takes_the_ict_settings_from_the_listing(
    spark: Any, conformance_table: Any, pm_reads: list[int]
) -> None:
    path = _without_checksums(conformance_table("delta-rs/cdc_ict_table/delta"))
    rows = DeltaTable.for_path(spark, str(path)).history().collect()
    assert pm_reads == []
    expected = {}
    for commit in (path / "_delta_log").glob("*.json"):
        info = next(
            json.loads(line) for line in commit.read_text().splitlines() if "commitInfo" in line
        )
        expected[int(commit.name[:20])] = info["commitInfo"]["inCommitTimestamp"]
    assert {row["version"]: int(row["timestamp"].timestamp() * 1000) for row in rows} == expected


def test_a_polled_snapshot_without_state_lists_once_and_reads_no_pm(
    spark: Any, tmp_path: Path, pm_reads: list[int], listings: list[str]
) -> None:
    """A cached snapshot whose state was never computed is not extended: the listing brings
    the P&M lines of every commit, for the snapshot built afresh; ``update()`` of such a
    snapshot builds the new one from its own listing."""
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1]}))
    table = DeltaTable.for_path(spark, str(path))
    first = table.snapshot()
    write_deltalake(str(path), pa.table({"id": [2]}), mode="append")
    second = table.snapshot()
    write_deltalake(str(path), pa.table({"id": [3]}), mode="append")
    listed_before_update = len(listings)
    third = first.update()
    assert (first.version, second.version, third.version) == (0, 1, 2)
    assert len(listings) == listed_before_update + 1
    assert pm_reads == []
    assert third.state.num_of_files == 3


#: Tables whose latest segment starts from a parquet checkpoint: classic, multi-part, V2 with
#: sidecars, checkpoints with struct-only stats, and ones lacking P&M or with commits after.
_CHECKPOINTED = [
    "golden/checkpoint/delta",
    "golden/multi-part-checkpoint/delta",
    "golden/v2-checkpoint-parquet/delta",
    "golden/kernel-pagination-multi-part-checkpoints/delta",
    "golden/deltalog-state-reconstruction-from-checkpoint-missing-protocol/delta",
    "golden/deltalog-state-reconstruction-from-checkpoint-missing-metadata/delta",
    "golden/dv-with-columnmapping/delta",
    "golden/spark-delta-0.1.0/delta",
    "golden/only-checkpoint-files/delta",
    "kernel/v2-checkpoints-parquet-with-sidecars/delta",
    "kernel/v1-multi-part-struct-stats-only/delta",
    "kernel/app-txn-checkpoint/delta",
    "delta-rs/table-with-domain-metadata/delta",
    "delta-rs/delta-1.2.1-only-struct-stats/delta",
    "delta-rs/latest_not_checkpointed/delta",
]


def _pm_or_error(read: Any) -> Any:
    try:
        return read()
    except Exception as error:  # compared: both ways must fail alike
        return type(error)


@pytest.mark.parametrize("name", _CHECKPOINTED)
def test_a_checkpointed_snapshot_takes_the_checkpoints_pm_from_the_listing(
    spark: Any, conformance_table: Any, pm_reads: list[int], name: str
) -> None:
    """What the listing's read of the checkpoint gives equals the P&M read of the same
    segment, and a segment that lacks an action is still refused the same way."""
    path = _without_checksums(conformance_table(name))
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    from_listing = _pm_or_error(lambda: table.snapshot().protocol_and_metadata)
    taken = not pm_reads
    segment = table.log_segment()
    read = _pm_or_error(
        lambda: protocol_metadata.protocol_and_metadata(spark, segment, table.log_dir)
    )
    assert from_listing == read
    if isinstance(read, protocol_metadata.ProtocolAndMetadata):
        assert taken == (segment.checkpoint is not None), "the listing's P&M were not taken"


def test_a_checkpoint_spark_cannot_read_is_read_around_when_the_state_is_read(
    spark: Any, conformance_table: Any, pm_reads: list[int]
) -> None:
    """pyarrow reads a checkpoint whose footer names a column's path wrongly; Spark's reader
    refuses it. The snapshot takes the listing's P&M; its state's read of the checkpoint then
    fails, and the version is rebuilt around it, as the P&M read would have done."""
    path = conformance_table("golden/checkpoint/delta")
    checkpoint = path / "_delta_log" / f"{10:020d}.checkpoint.parquet"
    chunk_path = b"\x08metaData\x06format\x07options\tkey_value\x05value"
    damaged = checkpoint.read_bytes().replace(chunk_path, chunk_path.replace(b"format", b"formau"))
    assert damaged != checkpoint.read_bytes()
    checkpoint.write_bytes(damaged)
    table = DeltaTable.for_path(spark, str(path), snapshot_cache=False)
    snapshot = table.snapshot()
    assert pm_reads == [] and snapshot.protocol_and_metadata.from_listed_checkpoint
    with pytest.raises(CorruptLogFileError):  # Spark's own read of it
        protocol_metadata.protocol_and_metadata(spark, snapshot.segment, table.log_dir)
    files = {unquote(row["path"]) for row in snapshot.all_files().select("path").collect()}
    pristine = RsTable(str(CONFORMANCE / "golden/checkpoint/delta"))
    assert files == {unquote(p) for p in pristine.get_add_actions().column("path").to_pylist()}
    assert snapshot._reconstructed.checkpoint is None
    assert snapshot.state.num_of_files == len(files)
