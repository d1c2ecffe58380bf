"""create_checkpoint and cleanup_metadata on s3a copies, and what happens without credentials.

The server's Python workers have no credentials of their own: with ``storage_options`` they
publish checkpoints and delete files; without, the call fails at once with
``DELTA_CONNECT_WORKER_FILE_ACCESS`` and writes nothing. A checkpoint written here must be
enough on its own: after the commits it covers are deleted, our reader and delta-rs load the
same state as from the original table.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from deltalake import DeltaTable as RsDeltaTable
from pyarrow import fs

from delta_connect_py import DeltaTable
from delta_connect_py.errors import UnsupportedFileSystemError, WorkerFileAccessError
from delta_connect_py.protocol.staging import staging_folder_name
from tests.integration.object_store.conftest import TABLES, cluster_params, local_uri
from tests.object_store_server import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    MotoServer,
    delete_covered_log_files,
)

pytestmark = pytest.mark.object_store


def _store(moto: MotoServer) -> fs.S3FileSystem:
    """The test's own view of the bucket (explicit credentials, no environment)."""
    return fs.S3FileSystem(
        access_key=ACCESS_KEY,
        secret_key=SECRET_KEY,
        region=REGION,
        endpoint_override=moto.endpoint,
        scheme="http",
    )


def _log_names(moto: MotoServer, uri: str) -> set[str]:
    key = uri.split("://", 1)[1] + "/_delta_log"
    infos = _store(moto).get_file_info(fs.FileSelector(key, recursive=True))
    return {info.path[len(key) + 1 :] for info in infos}


def _rs_uri(uri: str) -> str:
    return "s3://" + uri.split("://", 1)[1]


def _file_paths(snapshot: Any) -> list[str]:
    return sorted(row["path"] for row in snapshot.all_files().select("path").collect())


@pytest.mark.parametrize(
    "name", cluster_params(["ckpt", "v2sidecars", "dvpart"], {"ckpt", "dvpart"})
)
def test_checkpoint_on_s3_is_enough_alone(
    spark: Any,
    moto: MotoServer,
    s3_copy: Callable[[str], str],
    storage_options: dict[str, str],
    name: str,
) -> None:
    uri = s3_copy(TABLES[name])
    table = DeltaTable.for_path(spark, uri, storage_options=storage_options)
    result = table.create_checkpoint()
    names = _log_names(moto, uri)
    assert not [n for n in names if n.startswith(("_delta_connect", "_temporary"))]
    assert "_last_checkpoint" in names
    # Only our checkpoint (and later commits) may be needed: delete everything it covers.
    delete_covered_log_files(_store(moto), uri.split("://", 1)[1] + "/_delta_log/", names, result)
    expected = DeltaTable.for_path(spark, local_uri(name)).snapshot(result.version)
    fresh = DeltaTable.for_path(spark, uri).snapshot()
    assert fresh.version == expected.version
    assert fresh.state == expected.state
    assert _file_paths(fresh) == _file_paths(expected)
    rs = RsDeltaTable(_rs_uri(uri), storage_options=storage_options)
    assert rs.version() == expected.version
    rs_paths = sorted(rs.get_add_actions(flatten=True).column("path").to_pylist())
    assert rs_paths == _file_paths(expected)


def test_cleanup_metadata_on_s3(
    spark: Any, moto: MotoServer, s3_copy: Callable[[str], str], storage_options: dict[str, str]
) -> None:
    uri = s3_copy(TABLES["ckpt"])
    table = DeltaTable.for_path(spark, uri, storage_options=storage_options)
    before = _log_names(moto, uri)
    # The copies are minutes old: nothing is past the 30-day retention.
    assert table.cleanup_metadata(dry_run=True) == []
    assert table.cleanup_metadata() == []
    assert _log_names(moto, uri) == before
    local = DeltaTable.for_path(spark, local_uri("ckpt")).snapshot()
    assert DeltaTable.for_path(spark, uri).snapshot().state == local.state


def test_without_worker_credentials_writes_fail_fast_and_write_nothing(
    spark: Any, moto: MotoServer, s3_copy: Callable[[str], str]
) -> None:
    """Reads work, but publishing needs the workers' own access: a DeltaError, nothing
    written (the probe runs before Spark writes the staging folder)."""
    uri = s3_copy(TABLES["ckpt"])
    table = DeltaTable.for_path(spark, uri)
    before = _log_names(moto, uri)
    assert table.snapshot().version == 13
    with pytest.raises(WorkerFileAccessError) as raised:
        table.create_checkpoint()
    message = str(raised.value)
    assert "create_checkpoint" in message and "storage_options" in message
    assert "AWS_ACCESS_KEY_ID" in message and uri in message
    with pytest.raises(WorkerFileAccessError, match="cleanup_metadata"):
        table.cleanup_metadata(dry_run=True)
    assert _log_names(moto, uri) == before


def test_wrong_endpoint_fails_with_the_options_named(
    spark: Any, s3_copy: Callable[[str], str], storage_options: dict[str, str]
) -> None:
    uri = s3_copy(TABLES["ckpt"])
    wrong = {**storage_options, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    table = DeltaTable.for_path(spark, uri, storage_options=wrong)
    with pytest.raises(WorkerFileAccessError) as raised:
        table.create_checkpoint()
    message = str(raised.value)
    assert "the storage_options given (" in message and "127.0.0.1:9" in message
    assert storage_options["AWS_SECRET_ACCESS_KEY"] not in message


def test_schemes_the_workers_cannot_open_fail_before_any_job(spark: Any) -> None:
    table = DeltaTable.for_path(spark, "wasbs://c@account.blob.core.windows.net/t")
    with pytest.raises(UnsupportedFileSystemError, match=r"create_checkpoint.*wasbs"):
        table.create_checkpoint()
    with pytest.raises(UnsupportedFileSystemError, match=r"cleanup_metadata.*dbfs"):
        DeltaTable.for_path(spark, "dbfs:/t").cleanup_metadata()


def test_staging_folders_are_aged_by_their_name_not_by_s3_times(
    spark: Any, moto: MotoServer, s3_copy: Callable[[str], str], storage_options: dict[str, str]
) -> None:
    """S3 prefixes have no modification time: a folder holding only markers (a live writer's,
    before Spark uploads a file) is never stale; one named with a creation time is stale by it."""
    uri = s3_copy(TABLES["ckpt"])
    log_key = uri.split("://", 1)[1] + "/_delta_log/"
    store = _store(moto)
    day_ms = 86_400_000
    now_ms = int(time.time() * 1000)
    markers_only = "_delta_connect_staging.0123456789abcdef"
    live = staging_folder_name(now_ms, "live")
    dead = staging_folder_name(now_ms - 2 * day_ms, "dead")
    for name in (markers_only, live, dead):
        store.create_dir(f"{log_key}{name}/_temporary/0")
    table = DeltaTable.for_path(spark, uri, storage_options=storage_options)
    swept = [p for p in table.cleanup_metadata(dry_run=True) if "_delta_connect_staging" in p]
    assert [p.rstrip("/").rsplit("/", 1)[-1] for p in swept] == [dead]


@pytest.mark.cluster
def test_a_quiet_log_on_s3_is_checked_with_no_listing_and_a_new_commit_is_seen(
    spark: Any,
    moto: MotoServer,
    s3_copy: Callable[[str], str],
    listings: list[str],
) -> None:
    """S3 keeps upload times (whole seconds): once the log is quiet, an unchanged log is told
    by one listing request of the driver, and a commit written after is seen."""
    from delta_connect_py import snapshot_cache
    from delta_connect_py.quiet_log import QUIET_LOG_MARGIN_MS

    snapshot_cache.clear()
    uri = s3_copy(TABLES["ckpt"])
    time.sleep(QUIET_LOG_MARGIN_MS / 1000 + 1)
    table = DeltaTable.for_path(spark, uri)
    first = table.snapshot()
    assert table.snapshot() is first
    assert len(listings) == 1

    key = uri.split("://", 1)[1] + f"/_delta_log/{first.version + 1:020d}.json"
    with _store(moto).open_output_stream(key) as out:
        out.write(b'{"commitInfo":{"timestamp":1,"operation":"OPTIMIZE"}}\n')
    after = table.snapshot()
    assert len(listings) == 2
    assert after.version == first.version + 1
    assert after.state.num_of_files == first.state.num_of_files
    snapshot_cache.clear()
