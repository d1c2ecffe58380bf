"""Change data feed on a real server: conformance tables, delta-rs as the oracle, errors, stream.

delta-rs (``deltalake``) is the oracle for every column except ``_commit_timestamp``: delta-rs
takes it from ``commitInfo.timestamp`` (or the in-commit timestamp), delta-spark and we from the
in-commit timestamp, else the commit file's monotonized modification time. On the in-commit
timestamp table the two agree, so there it is compared too.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import threading
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_connect_py import DeltaTable
from delta_connect_py.cli import main
from delta_connect_py.errors import (
    CdcStartVersionAfterLatestError,
    ChangeDataLossError,
    InvalidCdcRangeError,
    MissingChangeDataError,
    UnsupportedChangeDataError,
)
from delta_connect_py.protocol.cdf import BASE_INDEX, DeltaSourceOffset, next_offset
from delta_connect_py.protocol.filenames import commit_name

CDF_ON = {"delta.enableChangeDataFeed": "true"}
T0 = 1_700_000_000  # seconds


def _rows(frame: Any, *, with_timestamp: bool = False) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of (column, value) pairs, without _commit_timestamp by default."""
    result = []
    for row in frame.collect():
        values = row.asDict()
        if not with_timestamp:
            values.pop("_commit_timestamp")
        result.append(tuple(sorted((k, _plain(v)) for k, v in values.items())))
    return sorted(result, key=repr)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        stamp = value if value.tzinfo else value.astimezone()
        return int(stamp.timestamp() * 1000)
    return value


def _rs_rows(path: Path, start: int = 0, *, with_timestamp: bool = False) -> list[tuple[Any, ...]]:
    table = pa.table(RsDeltaTable(str(path)).load_cdf(starting_version=start).read_all())
    result = []
    for values in table.to_pylist():
        if not with_timestamp:
            values.pop("_commit_timestamp")
        result.append(tuple(sorted((k, _plain(v)) for k, v in values.items())))
    return sorted(result, key=repr)


def _batch(ids: list[int], names: list[str], parts: list[str]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array(names, pa.string()),
            "part": pa.array(parts, pa.string()),
        }
    )


def _write_history(root: Path) -> Path:
    """v0 create (CDF on, partitioned), v1 append, v2 update, v3 delete, v4 merge."""
    path = str(root)
    write_deltalake(
        path,
        _batch([1, 2, 3, 4], ["a", "b", "c", "d"], ["x", "y", "x", "y"]),
        partition_by=["part"],
        configuration=CDF_ON,
    )
    write_deltalake(path, _batch([5, 6], ["e", "f"], ["z", "x"]), mode="append")
    RsDeltaTable(path).update(updates={"name": "'B'"}, predicate="id = 2")
    RsDeltaTable(path).delete("id = 3")
    (
        RsDeltaTable(path)
        .merge(
            _batch([4, 7], ["D", "g"], ["y", "z"]),
            predicate="t.id = s.id",
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return root


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A table root with characters that need escaping in URIs (delta-rs rejects glob ones).
    return _write_history(tmp_path_factory.mktemp("cdf") / "rs t+%")


# ---------------------------------------------------------------------------- conformance

CONFORMANCE_CDF = [
    ("kernel/cdf-table/delta", 0, 23),
    ("delta-rs/simple_table_with_cdc/delta", 0, 3),
    ("delta-rs/checkpoint-cdf-table/delta", 3, 13),
    ("delta-rs/cdc_ict_table/delta", 0, 10),
    # Deletion vectors: a path removed and re-added with a new DV yields only the DV's diff.
    ("kernel/cdf-table-with-cdc-and-dvs/delta", 0, 43),
]


@pytest.mark.parametrize(("relative", "start", "count"), CONFORMANCE_CDF)
def test_conformance_tables_match_expected_counts_and_delta_rs(
    spark: Any, conformance_table: Any, relative: str, start: int, count: int
) -> None:
    root = conformance_table(relative)
    ict = "cdc_ict" in relative
    frame = DeltaTable.for_path(spark, str(root)).load_cdf(start)
    ours = _rows(frame, with_timestamp=ict)
    assert len(ours) == count
    assert ours == _rs_rows(root, start, with_timestamp=ict)


def test_column_mapping_is_refused_clearly(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("kernel/cdf-column-mapping-name-mode/delta")
    with pytest.raises(UnsupportedChangeDataError, match="column mapping"):
        DeltaTable.for_path(spark, str(root)).load_cdf(0)


def test_commit_timestamps_are_monotonized_file_times(spark: Any, conformance_table: Any) -> None:
    root = conformance_table("delta-rs/simple_table_with_cdc/delta")
    # v1's file time goes backwards: delta-spark uses v0's time + 1 ms for it.
    times = {0: T0, 1: T0 - 50, 2: T0 + 100}
    for version, seconds in times.items():
        os.utime(root / "_delta_log" / commit_name(version), (seconds, seconds))
    table = DeltaTable.for_path(spark, str(root))
    stamps = {
        row["_commit_version"]: _plain(row["_commit_timestamp"])
        for row in table.load_cdf(0).select("_commit_version", "_commit_timestamp").collect()
    }
    assert stamps == {1: T0 * 1000 + 1, 2: (T0 + 100) * 1000}
    between = datetime.fromtimestamp(T0 + 50, tz=timezone.utc)
    assert {r["_commit_version"] for r in table.load_cdf(starting_timestamp=between).collect()} == {
        2
    }
    assert {
        r["_commit_version"] for r in table.load_cdf(0, ending_timestamp=between).collect()
    } == {1}


# ---------------------------------------------------------------------------- delta-rs oracle


def test_delta_rs_written_history_matches_delta_rs(spark: Any, history: Path) -> None:
    table = DeltaTable.for_path(spark, str(history))
    ours = _rows(table.load_cdf(0))
    assert ours == _rs_rows(history)
    kinds = Counter(dict(row)["_change_type"] for row in ours)
    assert kinds == {"insert": 7, "update_preimage": 2, "update_postimage": 2, "delete": 1}


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.data())
def test_range_splits_concatenate(spark: Any, history: Path, data: st.DataObject) -> None:
    a = data.draw(st.integers(0, 3))
    b = data.draw(st.integers(a, 3))
    c = data.draw(st.integers(b + 1, 4))
    table = DeltaTable.for_path(spark, str(history))
    whole = _rows(table.load_cdf(a, c))
    split = _rows(table.load_cdf(a, b).unionByName(table.load_cdf(b + 1, c)))
    assert whole == split


# ---------------------------------------------------------------------------- errors


def test_errors(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "late"
    write_deltalake(str(root), _batch([1], ["a"], ["x"]))  # v0: no CDF
    RsDeltaTable(str(root)).alter.set_table_properties(CDF_ON)  # v1
    write_deltalake(str(root), _batch([2], ["b"], ["y"]), mode="append")  # v2
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(MissingChangeDataError) as info:
        table.load_cdf(0)
    assert "range [0 , 2]" in str(info.value) and "version [0]" in str(info.value)
    assert [r["id"] for r in table.load_cdf(1).collect()] == [2]
    with pytest.raises(CdcStartVersionAfterLatestError):
        table.load_cdf(5)
    assert table.load_cdf(5, allow_out_of_range=True).count() == 0
    with pytest.raises(InvalidCdcRangeError):
        table.load_cdf(2, 1)


def test_a_gap_in_the_log_is_a_data_loss_error(spark: Any, history: Path, tmp_path: Path) -> None:
    root = tmp_path / "gap"
    shutil.copytree(history, root)
    RsDeltaTable(str(root)).create_checkpoint()
    (root / "_delta_log" / commit_name(1)).unlink()
    table = DeltaTable.for_path(spark, str(root))
    with pytest.raises(ChangeDataLossError, match="versions 1 are missing"):
        table.load_cdf(0)
    assert len(_rows(table.load_cdf(4))) == 3  # v4 rebuilds from the checkpoint


# ---------------------------------------------------------------------------- streaming


@settings(
    max_examples=2,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(max_files=st.sampled_from([1, 2, 3]), max_bytes=st.sampled_from([None, 1500]))
def test_stream_batches_concatenate_to_load_cdf_and_resume_exactly(
    spark: Any, history: Path, max_files: int, max_bytes: int | None
) -> None:
    table = DeltaTable.for_path(spark, str(history))
    limits = {"max_files_per_trigger": max_files, "max_bytes_per_trigger": max_bytes}
    batches = list(table.stream_cdf(0, stop_when_caught_up=True, poll_seconds=0, **limits))
    assert len(batches) >= 3
    offsets = [offset for offset, _ in batches]
    assert offsets == sorted(offsets)
    assert offsets[-1].position == (5, BASE_INDEX)
    union = batches[0][1]
    for _, frame in batches[1:]:
        union = union.unionByName(frame)
    assert _rows(union) == _rows(table.load_cdf(0))
    # Restarting from any yielded offset (as JSON) gives exactly the batch that followed it.
    for (offset, _), (_, expected) in itertools.pairwise(batches):
        resumed = table.stream_cdf(offset=offset.to_json(), **limits)
        _, frame = next(resumed)
        assert _rows(frame) == _rows(expected)


def test_file_changes_respect_limits(spark: Any, history: Path) -> None:
    table = DeltaTable.for_path(spark, str(history))
    everything = table.cdf_file_changes(0, BASE_INDEX)
    files = [f for f in everything if not f.is_sentinel]
    offset = DeltaSourceOffset(everything.reservoir_id, 0, BASE_INDEX, False)
    seen = []
    while True:
        batch = table.cdf_file_changes(offset.reservoir_version, offset.index, max_files=2)
        admitted = [f for f in batch if not f.is_sentinel]
        assert len(admitted) <= 2 or len({f.version for f in admitted}) == 1
        seen.extend(admitted)
        following = next_offset(offset, batch.files)
        if following == offset:
            break
        offset = following
    assert seen == files
    end = DeltaSourceOffset(everything.reservoir_id, 2, BASE_INDEX, False)
    bounded = table.cdf_file_changes(0, BASE_INDEX, end_offset=end.to_json())
    assert {f.version for f in bounded} == {0, 1, 2}


def test_stream_starts_with_the_snapshot_then_polls(
    spark: Any, history: Path, tmp_path: Path
) -> None:
    root = tmp_path / "poll"
    shutil.copytree(history, root)
    table = DeltaTable.for_path(spark, str(root))
    stream = table.stream_cdf(poll_seconds=0.2)
    offset, first = next(stream)
    snapshot_rows = _rows(first)
    assert {dict(r)["_change_type"] for r in snapshot_rows} == {"insert"}
    assert {dict(r)["_commit_version"] for r in snapshot_rows} == {4}
    assert sorted(dict(r)["id"] for r in snapshot_rows) == [1, 2, 4, 5, 6, 7]
    assert offset.position == (5, BASE_INDEX)
    assert json.loads(offset.to_json())["index"] == -1

    def append_later() -> None:
        time.sleep(1.0)
        write_deltalake(str(root), _batch([9], ["i"], ["x"]), mode="append")

    writer = threading.Thread(target=append_later)
    writer.start()
    offset, frame = next(stream)
    writer.join()
    assert [(dict(r)["id"], dict(r)["_commit_version"]) for r in _rows(frame)] == [(9, 5)]
    assert offset.position == (6, BASE_INDEX)


def test_cli_prints_change_rows(spark_remote: str, history: Path, capsys: Any) -> None:
    args = ["--remote", spark_remote, "cdf", str(history), "--from", "3", "--to", "3"]
    assert main(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["_change_type"], r["_commit_version"]) for r in rows] == [(3, "delete", 3)]
