"""A table whose metadata turns on a feature its protocol does not list is refused, as
delta-spark refuses it (``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH``), never read as the
metadata says: with column mapping on, every column would be null."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import DeltaTable
from delta_connect_py.errors import FeaturesProtocolMetadataMismatchError
from tests.integration.feature_mismatch import write_table, write_table_turning_mapping_on_later


def test_metadata_turning_on_an_unlisted_feature_is_refused(spark: Any, tmp_path: Path) -> None:
    root = write_table(tmp_path / "t")
    table = DeltaTable.for_path(spark, str(root))
    calls = {
        "snapshot": table.snapshot,
        "history": table.history,
        "load_cdf": lambda: table.load_cdf(0),
        "create_checkpoint": table.create_checkpoint,
        "cleanup_metadata": lambda: table.cleanup_metadata(dry_run=True),
    }
    for name, call in calls.items():
        with pytest.raises(FeaturesProtocolMetadataMismatchError, match="columnMapping") as info:
            call()
        assert info.value.getMessageParameters()["version"] == "0", name
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == [f"{0:020d}.json"]


def test_the_same_table_with_the_feature_listed_reads_its_rows(spark: Any, tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", list_column_mapping=True)
    snapshot = DeltaTable.for_path(spark, str(root)).snapshot()
    assert sorted(tuple(row) for row in snapshot.to_df().collect()) == [(1, "x"), (2, "y")]


def test_a_change_data_range_crossing_such_a_metadata_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    """Column mapping turned on by a metaData alone at version 2: a range ending at the latest
    version that starts after the last protocol action is refused at version 2, not read with
    null columns; a range before it is refused at the latest version, whose snapshot every
    batch read loads (delta-spark's too); the snapshots before version 2 still read."""
    root = write_table_turning_mapping_on_later(tmp_path / "t")
    table = DeltaTable.for_path(spark, str(root))
    for (start, end), refused_at in {(1, 3): 2, (2, 3): 2, (1, None): 2, (0, 1): 3}.items():
        with pytest.raises(FeaturesProtocolMetadataMismatchError) as info:
            table.load_cdf(start, end).collect()
        assert info.value.getMessageParameters()["version"] == str(refused_at), (start, end)
    assert table.snapshot(version=1).state.num_of_files == 2
    with pytest.raises(FeaturesProtocolMetadataMismatchError):
        table.snapshot()


def test_a_change_data_stream_stops_at_such_a_metadata(spark: Any, tmp_path: Path) -> None:
    root = write_table_turning_mapping_on_later(tmp_path / "t")
    stream = DeltaTable.for_path(spark, str(root)).stream_cdf(
        starting_version=1, max_files_per_trigger=1, stop_when_caught_up=True
    )
    ids: list[Any] = []
    with pytest.raises(FeaturesProtocolMetadataMismatchError):
        for _, batch in stream:
            ids += [row["id"] for row in batch.collect()]
    assert None not in ids
