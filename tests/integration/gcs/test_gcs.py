"""Delta tables on GCS (fake-gcs-server on loopback, the GCS connector): every read equal to the
same table on local disk and to delta-rs reading the same objects; checkpoints written on
gs:// enough alone; errors that name what to fix and write nothing."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from deltalake import DeltaTable as RsDeltaTable
from pyarrow import fs

from delta_connect_py import DeltaTable
from delta_connect_py.errors import WorkerFileAccessError
from delta_connect_py.protocol.staging import staging_folder_name
from tests.conftest import sorted_rows
from tests.gcs_server import FakeGcsServer
from tests.integration.gcs.conftest import TABLES, gs_uri, local_uri
from tests.object_store_server import delete_covered_log_files

pytestmark = pytest.mark.gcs

FILE_KEYS = ("path", "size", "partitionValues", "deletionVector")


def _paths(snapshot: Any) -> list[str]:
    return sorted(row["path"] for row in snapshot.all_files().select("path").collect())


def _rs_paths(uri: str, rs_options: dict[str, str], version: int | None = None) -> list[str]:
    table = RsDeltaTable(uri, storage_options=rs_options, version=version)
    return sorted(table.get_add_actions(flatten=True).column("path").to_pylist())


def _log_names(emulator: FakeGcsServer, uri: str) -> set[str]:
    key = uri.split("://", 1)[1] + "/_delta_log"
    infos = emulator.store().get_file_info(fs.FileSelector(key, recursive=True))
    return {info.path[len(key) + 1 :] for info in infos if info.type == fs.FileType.File}


@pytest.mark.parametrize("name", sorted(set(TABLES) - {"cdfict"}))
def test_snapshot_equals_local_and_delta_rs(
    spark: Any, storage_options: dict[str, str], rs_options: dict[str, str], name: str
) -> None:
    remote_table = DeltaTable.for_path(spark, gs_uri(name), storage_options=storage_options)
    local_table = DeltaTable.for_path(spark, local_uri(name))
    remote, local = remote_table.snapshot(), local_table.snapshot()
    assert (remote.version, remote.protocol, remote.metadata) == (
        local.version,
        local.protocol,
        local.metadata,
    )
    assert remote.state == local.state
    assert remote.transactions == local.transactions
    remote_files = sorted_rows(remote.all_files().select(*FILE_KEYS))
    assert remote_files == sorted_rows(local.all_files().select(*FILE_KEYS))
    assert sorted_rows(remote.to_df()) == sorted_rows(local.to_df())
    history = ("version", "operation")
    assert sorted_rows(remote_table.history().select(*history)) == sorted_rows(
        local_table.history().select(*history)
    )
    assert RsDeltaTable(gs_uri(name), storage_options=rs_options).version() == remote.version
    assert _rs_paths(gs_uri(name), rs_options) == _paths(remote)


def test_time_travel_equals_local_and_delta_rs(
    spark: Any, storage_options: dict[str, str], rs_options: dict[str, str]
) -> None:
    remote_table = DeltaTable.for_path(spark, gs_uri("ckpt"), storage_options=storage_options)
    local_table = DeltaTable.for_path(spark, local_uri("ckpt"))
    for version in (0, 5, 10, 12):
        remote, local = remote_table.snapshot(version), local_table.snapshot(version)
        assert remote.state == local.state, version
        assert _paths(remote) == _paths(local) == _rs_paths(gs_uri("ckpt"), rs_options, version)


def test_change_data_feed_equals_local(spark: Any, storage_options: dict[str, str]) -> None:
    remote = DeltaTable.for_path(spark, gs_uri("cdfict"), storage_options=storage_options)
    local = DeltaTable.for_path(spark, local_uri("cdfict"))
    assert sorted_rows(remote.load_cdf(0)) == sorted_rows(local.load_cdf(0))


def test_deletion_vectors_remove_rows_read_by_spark(
    spark: Any, storage_options: dict[str, str]
) -> None:
    snapshot = DeltaTable.for_path(
        spark, gs_uri("dvpart"), storage_options=storage_options
    ).snapshot()
    files = snapshot.all_files().collect()
    assert any(row["deletionVector"] is not None for row in files)
    in_files = spark.read.parquet(*[f"{gs_uri('dvpart')}/{row['path']}" for row in files])
    assert snapshot.to_df().count() < in_files.count()


@pytest.mark.parametrize("name", ["ckpt", "v2sidecars"])
def test_checkpoint_on_gcs_is_enough_alone(
    spark: Any,
    emulator: FakeGcsServer,
    gs_copy: Callable[[str], str],
    storage_options: dict[str, str],
    rs_options: dict[str, str],
    name: str,
) -> None:
    uri = gs_copy(name)
    result = DeltaTable.for_path(spark, uri, storage_options=storage_options).create_checkpoint()
    names = _log_names(emulator, uri)
    assert not [n for n in names if n.startswith(("_delta_connect", "_temporary"))]
    assert "_last_checkpoint" in names
    # Only our checkpoint (and later commits) may be needed: delete everything it covers.
    log_key = uri.split("://", 1)[1] + "/_delta_log/"
    delete_covered_log_files(emulator.store(), log_key, names, result)
    expected = DeltaTable.for_path(spark, local_uri(name)).snapshot(result.version)
    fresh = DeltaTable.for_path(spark, uri, storage_options=storage_options).snapshot()
    assert (fresh.version, fresh.state) == (expected.version, expected.state)
    assert _paths(fresh) == _paths(expected) == _rs_paths(uri, rs_options)


def test_wrong_endpoint_is_refused_with_the_options_named_and_nothing_written(
    spark: Any, emulator: FakeGcsServer, gs_copy: Callable[[str], str]
) -> None:
    uri = gs_copy("ckpt")
    before = _log_names(emulator, uri)
    wrong = {"GOOGLE_ENDPOINT_URL": "http://127.0.0.1:9", "GOOGLE_ANONYMOUS": "true"}
    table = DeltaTable.for_path(spark, uri, storage_options=wrong)
    with pytest.raises(WorkerFileAccessError) as raised:
        table.create_checkpoint()
    message = str(raised.value)
    assert "create_checkpoint" in message and uri in message
    assert "the storage_options given (" in message and "127.0.0.1:9" in message
    assert _log_names(emulator, uri) == before


def test_cleanup_metadata_removes_a_dead_writers_staging_folder_only(
    spark: Any,
    emulator: FakeGcsServer,
    gs_copy: Callable[[str], str],
    storage_options: dict[str, str],
) -> None:
    """Deletes on GCS by the workers: a staging folder named two days old goes, with what a dead
    writer left in it; a live writer's folder, the commits and the table's state stay."""
    uri = gs_copy("ckpt")
    log_key = uri.split("://", 1)[1] + "/_delta_log/"
    now_ms = int(time.time() * 1000)
    live = staging_folder_name(now_ms, "live")
    dead = staging_folder_name(now_ms - 2 * 86_400_000, "dead")
    store = emulator.store()
    for name in (live, dead):
        with store.open_output_stream(f"{log_key}{name}/_temporary/0/part-00000.parquet") as out:
            out.write(b"left by a writer")
    before = _log_names(emulator, uri)
    table = DeltaTable.for_path(spark, uri, storage_options=storage_options)
    state = table.snapshot().state
    removed = table.cleanup_metadata()
    assert [p.rstrip("/").rsplit("/", 1)[-1] for p in removed] == [dead]
    after = _log_names(emulator, uri)
    assert after == {n for n in before if not n.startswith(dead)}
    assert any(n.startswith(live) for n in after)
    assert (
        DeltaTable.for_path(spark, uri, storage_options=storage_options).snapshot().state == state
    )
