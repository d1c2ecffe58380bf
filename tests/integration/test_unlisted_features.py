"""A table whose metadata turns on a feature its protocol does not list is refused, as
delta-spark refuses it (``DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH``), never read as the
metadata says: with column mapping on, every column would be null."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from delta_connect_py import DeltaTable
from delta_connect_py.errors import FeaturesProtocolMetadataMismatchError
from tests.integration.feature_mismatch import write_table


def test_metadata_turning_on_an_unlisted_feature_is_refused(spark: Any, tmp_path: Path) -> None:
    root = write_table(tmp_path / "t")
    table = DeltaTable.for_path(spark, str(root))
    calls = {
        "snapshot": table.snapshot,
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
