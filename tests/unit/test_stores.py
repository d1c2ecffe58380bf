"""worker.stores: storage_options checked and mapped, schemes the workers cannot open, and a
``_last_checkpoint`` the worker cannot read reported as unreachable without retries."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from delta_connect_py.errors import InvalidStorageOptionsError, UnsupportedFileSystemError
from delta_connect_py.worker.failures import WorkerFailure, decode_worker_failure
from delta_connect_py.worker.log_files import (
    CORRUPT,
    UNREACHABLE,
    LastCheckpointRead,
    _read_with_tries,
    path_in_store,
)
from delta_connect_py.worker.stores import (
    StorageOptions,
    access_failure,
    check_worker_access,
    open_store,
    unsupported_scheme,
)

SECRET = "s3cr3t-value"


def test_options_are_checked_and_hidden() -> None:
    options = StorageOptions.of({"aws_access_key_id": "AK", "AWS_SECRET_ACCESS_KEY": SECRET})
    assert options.given("AWS_ACCESS_KEY_ID") == "AK"
    assert SECRET not in repr(options) and "AWS_SECRET_ACCESS_KEY" in repr(options)
    assert pickle.loads(pickle.dumps(options)) == options
    with pytest.raises(InvalidStorageOptionsError, match="AWS_SECRET_KEY"):
        StorageOptions.of({"AWS_SECRET_KEY": SECRET})
    assert not StorageOptions.of(None)


def test_options_win_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert StorageOptions.of({"AWS_REGION": "us-west-2"}).get("AWS_REGION") == "us-west-2"
    assert StorageOptions.of({}).get("AWS_REGION") == "eu-west-1"


def test_s3_options_map_onto_pyarrow_without_a_region_lookup() -> None:
    options = StorageOptions.of(
        {
            "AWS_ACCESS_KEY_ID": "AK",
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
            "AWS_ALLOW_HTTP": "true",
        }
    )
    filesystem, path = open_store("s3a://bucket/table/_delta_log", options)
    assert path == "bucket/table/_delta_log"
    assert filesystem.region == "us-east-1"  # no lookup: an endpoint is given


def test_gcs_options_open_a_pyarrow_file_system() -> None:
    """Opened without a request; the retry bound is a timedelta, as pyarrow requires."""
    from pyarrow import fs

    options = StorageOptions.of(
        {"GOOGLE_ENDPOINT_URL": "http://127.0.0.1:1", "GOOGLE_ANONYMOUS": "true"}
    )
    filesystem, path = open_store("gs://bucket/table/_delta_log", options)
    assert isinstance(filesystem, fs.GcsFileSystem)
    assert path == "bucket/table/_delta_log"


def test_azure_options_open_a_pyarrow_file_system() -> None:
    from pyarrow import fs

    options = StorageOptions.of({"AZURE_STORAGE_ACCOUNT_KEY": "a2V5"})
    uri = "abfss://container@account.dfs.core.windows.net/table/_delta_log"
    filesystem, path = open_store(uri, options)
    assert isinstance(filesystem, fs.AzureFileSystem)
    assert path == "container/table/_delta_log"


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("s3a://b/t/_delta_log/x", "b/t/_delta_log/x"),
        ("gs://b/t", "b/t"),
        ("abfss://container@account.dfs.core.windows.net/t/x", "container/t/x"),
        ("file:/tmp/t", "/tmp/t"),
    ],
)
def test_path_in_store(uri: str, path: str) -> None:
    assert path_in_store(uri) == path


@pytest.mark.parametrize("uri", ["wasbs://c@a.blob.core.windows.net/t", "dbfs:/t", "adl://a/t"])
def test_schemes_pyarrow_cannot_open(uri: str) -> None:
    assert unsupported_scheme(uri) is not None
    with pytest.raises(UnsupportedFileSystemError, match="create_checkpoint"):
        check_worker_access(uri, "create_checkpoint")


@pytest.mark.parametrize("uri", ["s3a://b/t", "s3://b/t", "abfss://c@a.dfs.core.windows.net/t"])
def test_schemes_pyarrow_opens(uri: str) -> None:
    assert unsupported_scheme(uri) is None
    check_worker_access(uri, "create_checkpoint")


def test_access_failure_names_operation_and_keys_not_values() -> None:
    options = StorageOptions.of({"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ACCESS_KEY_ID": "AK"})
    error = access_failure("create_checkpoint", "s3a://b/t", OSError("403 Forbidden"), options)
    text = str(error)
    assert error.error_class == "DELTA_CONNECT_WORKER_FILE_ACCESS"
    assert "create_checkpoint" in text and "403 Forbidden" in text and "s3a://b/t" in text
    assert "AWS_SECRET_ACCESS_KEY" in text and SECRET not in text


def test_access_failure_shows_settings_but_no_secret() -> None:
    """A wrong endpoint is the usual cause, and GCS's client does not name it: the error does."""
    options = StorageOptions.of(
        {"GOOGLE_ENDPOINT_URL": "http://127.0.0.1:9", "GOOGLE_ANONYMOUS": "true"}
    )
    error = access_failure("create_checkpoint", "gs://b/t", OSError("UNAVAILABLE"), options)
    assert "(GOOGLE_ANONYMOUS=true, GOOGLE_ENDPOINT_URL=http://127.0.0.1:9)" in str(error)
    secret = StorageOptions.of({"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "eu-west-1"})
    text = str(access_failure("cleanup_metadata", "s3a://b/t", OSError("403"), secret))
    assert "AWS_REGION=eu-west-1" in text and SECRET not in text


def test_unreadable_hint_is_unreachable_at_once(tmp_path: Path) -> None:
    """A hint that cannot be read (here: a directory) is not retried (retrying would sleep
    an hour here) and is not called corrupt; a hint that does not parse is."""
    log_dir = tmp_path / "_delta_log"
    (log_dir / "_last_checkpoint").mkdir(parents=True)
    request = LastCheckpointRead(log_dir=f"file:{log_dir}", tries=3, retry_seconds=3600)
    uri = f"file:{log_dir}/_last_checkpoint"
    assert _read_with_tries(uri, request)[0] == UNREACHABLE
    (log_dir / "_last_checkpoint").rmdir()
    (log_dir / "_last_checkpoint").write_text("{not json")
    quick = LastCheckpointRead(log_dir=f"file:{log_dir}", tries=2, retry_seconds=0)
    assert _read_with_tries(uri, quick)[0] == CORRUPT


@pytest.mark.parametrize("uri", ["hdfs://namenode:8020/t", "wasbs://c@a.blob.core.windows.net/t"])
def test_stores_a_worker_cannot_open_fail_as_delta_errors(uri: str) -> None:
    """Here pyarrow has no libhdfs/JVM, and never a wasb file system: the worker raises the
    client's DeltaError, and an unopenable hint is unreachable, not a failed listing."""
    with pytest.raises(WorkerFailure) as raised:
        open_store(uri, StorageOptions())
    decoded = decode_worker_failure(str(raised.value))
    assert isinstance(decoded, UnsupportedFileSystemError)
    request = LastCheckpointRead(log_dir=f"{uri}/_delta_log", retry_seconds=3600)
    assert _read_with_tries(f"{uri}/_delta_log/_last_checkpoint", request)[0] == UNREACHABLE
