"""Every table under ../shared/conformance, replayed by us and compared with independent results.

Oracles, in order of preference: the upstream-intended outcome (delta-spark's behaviour for
tables delta-rs cannot load, and the error class for broken logs), DAT's expected version
metadata, and delta-rs (``deltalake``) for version, protocol, metadata, the live file set, sizes
and transactions. Each deliberate difference from delta-rs is listed in DELTA_RS_DEVIATIONS.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from deltalake import DeltaTable as RsDeltaTable

from delta_connect_py import DeltaTable
from delta_connect_py.errors import (
    DeltaError,
    InvalidProtocolVersionError,
    MissingDeltaTableError,
    StateRecoverError,
    UnsupportedFeaturesForReadError,
    VersionsNotContiguousError,
)
from tests.conftest import CONFORMANCE

INDEX = (
    json.loads((CONFORMANCE / "index.json").read_text())["tables"] if CONFORMANCE.exists() else []
)

#: Broken logs: the error class delta-spark raises (upstream expectation) and we must raise.
EXPECTED_ERRORS: dict[str, type[DeltaError]] = {
    "golden/versions-not-contiguous/delta": VersionsNotContiguousError,
    "golden/no-delta-log-folder/delta": MissingDeltaTableError,
    "golden/deltalog-state-reconstruction-without-metadata/delta": StateRecoverError,
    "golden/deltalog-state-reconstruction-without-protocol/delta": StateRecoverError,
    **{
        f"golden/deltalog-state-reconstruction-from-checkpoint-missing-{what}/delta": (
            StateRecoverError
        )
        for what in ("metadata", "protocol")
    },
    "golden/deltalog-invalid-protocol-version/delta": InvalidProtocolVersionError,
    "delta-rs/err-logs-table_c/delta": VersionsNotContiguousError,
    "delta-rs/err-logs-table_d/delta": UnsupportedFeaturesForReadError,
    "delta-rs/err-logs-table_e/delta": UnsupportedFeaturesForReadError,
    "delta-rs/err-logs-table_f/delta": UnsupportedFeaturesForReadError,
    "delta-rs/err-logs-table_h/delta": UnsupportedFeaturesForReadError,
    "delta-rs/err-logs-table_i/delta": UnsupportedFeaturesForReadError,
    # catalogManaged: commits 1-2 exist only as staged commits a catalog must ratify.
    "kernel/catalog_managed_0/delta": UnsupportedFeaturesForReadError,
}

#: Tables delta-rs rejects but delta-spark reads (old writers' metaData without schemaString):
#: upstream's stated outcome, (version, live files).
SPARK_ONLY_TABLES: dict[str, tuple[int, int]] = {
    "golden/corrupted-last-checkpoint/delta": (10, 11),
    "golden/update-deleted-directory/delta": (0, 10),
    # delta-spark canonicalizes '/x' and 'file:/x' / 'file:///x' to one key; kernel-rs does not.
    "golden/canonicalized-paths-special-a/delta": (1, 0),
    "golden/canonicalized-paths-special-b/delta": (1, 0),
}

#: Delta-Spark unit-test tables whose DV files use a test-only name prefix (INDEX.md caveat): their
#: logs replay, but no generic reader (delta-rs included) can open the DV payloads to compare.
DV_PAYLOADS_UNRESOLVABLE = {
    "golden/spark-table-with-dv-small/delta",
    "golden/spark-table-with-dv-special-char/delta",
}

#: Deliberate differences from delta-rs 1.6.6, each a delta-rs deviation from delta-spark.
DELTA_RS_DEVIATIONS: dict[str, str] = {}


def _table_ids(entries: list[dict[str, Any]]) -> list[str]:
    return [entry["table_path"] for entry in entries]


def _snapshot(spark: Any, table_path: str, version: int | None = None) -> Any:
    return DeltaTable.for_path(spark, str(CONFORMANCE / table_path)).snapshot(version)


def _rs_live_files(table: RsDeltaTable) -> dict[str, int]:
    actions = table.get_add_actions(flatten=True)
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    return {unquote(path): size for path, size in zip(paths, sizes, strict=True)}


def _our_live_files(snapshot: Any) -> dict[str, int]:
    rows = snapshot.all_files().select("path", "size").collect()
    return {unquote(row["path"]): row["size"] for row in rows}


def _relative(path: str, table_root: str) -> str:
    path = unquote(path)
    # delta-rs reports paths with symlinks resolved.
    for root in (table_root, os.path.realpath(table_root)):
        for prefix in (f"file://{root}/", f"file:{root}/", f"{root}/"):
            if path.startswith(prefix):
                return path[len(prefix) :]
    return path


def _rs_deleted_rows(table: RsDeltaTable, table_root: str) -> dict[str, int]:
    """Files with a deletion vector -> rows it deletes, as delta-rs reads them."""
    import pyarrow as pa

    vectors = pa.RecordBatchReader.from_stream(table.deletion_vectors()).read_all()
    return {
        _relative(path, table_root): selection.count(False)
        for path, selection in zip(
            vectors.column("filepath").to_pylist(),
            vectors.column("selection_vector").to_pylist(),
            strict=True,
        )
    }


def _our_deleted_rows(snapshot: Any) -> dict[str, int]:
    rows = (
        snapshot.all_files()
        .where("deletionVector IS NOT NULL")
        .select("path", "deletionVector.cardinality")
        .collect()
    )
    return {unquote(row["path"]): row["cardinality"] for row in rows}


def _assert_matches_delta_rs(snapshot: Any, entry: dict[str, Any]) -> None:
    rs = RsDeltaTable(str(CONFORMANCE / entry["table_path"]))
    assert snapshot.version == rs.version()
    rs_protocol = rs.protocol()
    assert snapshot.protocol.min_reader_version == rs_protocol.min_reader_version
    assert snapshot.protocol.min_writer_version == rs_protocol.min_writer_version
    assert set(snapshot.protocol.reader_features or ()) == set(rs_protocol.reader_features or ())
    assert set(snapshot.protocol.writer_features or ()) == set(rs_protocol.writer_features or ())
    rs_metadata = rs.metadata()
    assert snapshot.metadata.id == rs_metadata.id
    assert list(snapshot.metadata.partition_columns) == list(rs_metadata.partition_columns)
    assert dict(snapshot.metadata.configuration) == dict(rs_metadata.configuration)
    ours, theirs = _our_live_files(snapshot), _rs_live_files(rs)
    assert ours == theirs
    assert snapshot.state.num_of_files == len(theirs)
    assert snapshot.state.size_in_bytes == sum(theirs.values())
    for app_id, version in snapshot.transactions.items():
        assert rs.transaction_version(app_id) == version
    has_dvs = "deletionVectors" in (rs_protocol.reader_features or ())
    if has_dvs and entry["table_path"] not in DV_PAYLOADS_UNRESOLVABLE:
        root = str(CONFORMANCE / entry["table_path"])
        assert _our_deleted_rows(snapshot) == _rs_deleted_rows(rs, root)


#: Also replayed on the standalone cluster (marker ``cluster``, ``make test-cluster``):
#: V2 sidecar and classic checkpoints, deletion vectors, CDC files, a damaged hint (multi-part
#: checkpoints are written and read there by test_checkpoint.py).
CLUSTER_TABLES = {
    "golden/dv-partitioned-with-checkpoint/delta",
    "golden/corrupted-last-checkpoint/delta",
    "kernel/v2-checkpoints-parquet-with-sidecars/delta",
    "kernel/cdf-table-with-cdc-and-dvs/delta",
}


def _cluster_marked(entries: list[dict[str, Any]]) -> list[Any]:
    """The entries as parameters, those of :data:`CLUSTER_TABLES` marked ``cluster``."""
    return [
        pytest.param(
            entry,
            id=entry["table_path"],
            marks=[pytest.mark.cluster] if entry["table_path"] in CLUSTER_TABLES else [],
        )
        for entry in entries
    ]


@pytest.mark.parametrize("entry", _cluster_marked(INDEX))
def test_table_replays_like_upstream(spark: Any, entry: dict[str, Any]) -> None:
    table_path = entry["table_path"]
    if table_path in EXPECTED_ERRORS:
        with pytest.raises(EXPECTED_ERRORS[table_path]) as info:
            _snapshot(spark, table_path).state  # noqa: B018 - the state job must fail too
        assert table_path.split("/")[1] in str(info.value) or info.value.message_parameters
        return
    snapshot = _snapshot(spark, table_path)
    if table_path in SPARK_ONLY_TABLES:
        assert (snapshot.version, snapshot.state.num_of_files) == SPARK_ONLY_TABLES[table_path]
        return
    assert entry["delta_rs"]["loads"], f"{table_path}: no oracle listed for this table"
    if table_path in DELTA_RS_DEVIATIONS:
        pytest.skip(DELTA_RS_DEVIATIONS[table_path])
    _assert_matches_delta_rs(snapshot, entry)


DAT_CASES = sorted(
    path
    for path in (CONFORMANCE / "dat").glob("*/expected/*/table_version_metadata.json")
    if CONFORMANCE.exists()
)


@pytest.mark.parametrize(
    "expected_file", DAT_CASES, ids=[f"{p.parents[2].name}-{p.parent.name}" for p in DAT_CASES]
)
def test_dat_version_metadata(spark: Any, expected_file: Path) -> None:
    expected = json.loads(expected_file.read_text())
    case = expected_file.parents[2]
    version = None if expected_file.parent.name == "latest" else expected["version"]
    snapshot = DeltaTable.for_path(spark, str(case / "delta")).snapshot(version)
    assert snapshot.version == expected["version"]
    assert snapshot.protocol.min_reader_version == expected["min_reader_version"]
    assert snapshot.protocol.min_writer_version == expected["min_writer_version"]
    assert dict(snapshot.metadata.configuration) == expected["properties"]


def test_the_conformance_tables_are_found() -> None:
    """Without the tables every parametrized test above is skipped, and a run would look green
    while checking nothing."""
    where = f"{CONFORMANCE} (put ../shared beside the repository, or set DELTA_CONFORMANCE_DIR)"
    assert len(INDEX) >= 100, f"expected 100+ conformance tables in {where}, found {len(INDEX)}"
    assert DAT_CASES, f"no dat cases under {where}"
