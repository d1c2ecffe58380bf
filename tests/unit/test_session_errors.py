"""Server failures the client recognises become DeltaErrors with the facts a user needs."""

from __future__ import annotations

import pytest

from delta_connect_py.errors import (
    CastFailedError,
    CorruptLogFileError,
    DeltaError,
    PythonVersionMismatchError,
    ServerEnvironmentError,
    ServerFileNotFoundError,
    ServerFileSystemMissingError,
    ServerUnavailableError,
    SessionLostError,
    StateRecoverError,
    StorageAccessDeniedError,
)
from delta_connect_py.session import translate_server_error
from delta_connect_py.worker.failures import WorkerFailure


def test_python_version_mismatch_names_both_versions() -> None:
    server_text = (
        "[PYTHON_VERSION_MISMATCH] Python in worker has different version: 3.10 than that in "
        "driver: 3.11, PySpark cannot run with different minor versions."
    )
    error = translate_server_error(RuntimeError(server_text))
    assert isinstance(error, PythonVersionMismatchError)
    assert error.message_parameters == {"server_version": "3.10", "client_version": "3.11"}
    assert "3.10" in str(error) and "3.11" in str(error)


def test_worker_without_pyarrow() -> None:
    error = translate_server_error(RuntimeError("ModuleNotFoundError: No module named 'pyarrow'"))
    assert isinstance(error, ServerEnvironmentError)
    assert "PYSPARK_PYTHON" in str(error)


def test_worker_failure_round_trips_through_spark_error_text() -> None:
    failure = WorkerFailure(StateRecoverError(operation="metadata", version=5))
    wrapped = RuntimeError(f"Job aborted: PythonException: Traceback ...\n{failure}\n\tat org...")
    error = translate_server_error(wrapped)
    assert isinstance(error, StateRecoverError)
    assert str(error) == (
        "[DELTA_STATE_RECOVER_ERROR] The metadata of your Delta table could not be recovered "
        "while Reconstructing version: 5. Did you manually delete files in the _delta_log "
        "directory?"
    )


def test_a_state_differing_from_a_checksum_file_names_both_sources() -> None:
    """When the protocol or metadata came from a version checksum, the replay's differing one
    does not mean deleted files: either file may be the damaged one, and the message says so
    (and survives the worker's encoding)."""
    crc = "/t/_delta_log/00000000000000000007.crc"
    failure = WorkerFailure(StateRecoverError(operation="protocol", version=7, checksum_file=crc))
    error = translate_server_error(RuntimeError(f"PythonException: {failure}"))
    assert isinstance(error, StateRecoverError)
    text = str(error)
    assert f"differs from the one in the version checksum file {crc}" in text
    assert "one of the two is damaged" in text
    assert "manually delete" not in text


def test_unknown_failures_pass_through_unchanged() -> None:
    original = RuntimeError("something else")
    assert translate_server_error(original) is original
    assert not isinstance(translate_server_error(original), DeltaError)


def _failed_read(file: str, cause: str = "Could not read footer.") -> RuntimeError:
    return RuntimeError(
        "Job aborted. Caused by: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] "
        f"Encountered error while reading file {file}. {cause}"
    )


def test_an_unreadable_log_file_is_a_corrupt_log_file() -> None:
    file = "file:/t/_delta_log/00000000000000000010.checkpoint.parquet"
    error = translate_server_error(_failed_read(file))
    assert isinstance(error, CorruptLogFileError)
    assert error.message_parameters["file"] == file
    assert error.message_parameters["path"] == "file:/t/_delta_log"
    assert "FAILED_READ_FILE.NO_HINT" in str(error)


def test_an_unreadable_log_file_under_a_table_path_with_spaces() -> None:
    name = "00000000000000000004.checkpoint.0000000001.0000000004.parquet"
    file = f"file:/my tables/t 1/_delta_log/{name}"
    error = translate_server_error(_failed_read(file, "Could not read footer."))
    assert isinstance(error, CorruptLogFileError)
    assert error.message_parameters["file"] == file
    assert error.message_parameters["path"] == "file:/my tables/t 1/_delta_log"


def test_an_unreadable_data_file_or_malformed_commit_line_is_left_as_it_is() -> None:
    data_file = _failed_read("file:/t/part-0.parquet")
    assert translate_server_error(data_file) is data_file
    data_file = _failed_read("file:/my t/p=_delta_log x/part-0.parquet")
    assert translate_server_error(data_file) is data_file
    # Left to malformed_commits_reported, which also quotes the line.
    malformed = _failed_read(
        "file:/t/_delta_log/00000000000000000001.json", "[MALFORMED_RECORD_IN_PARSING] ..."
    )
    assert translate_server_error(malformed) is malformed


# Spark failures classified into one-line DeltaErrors (texts as a Spark 4.1 server sends them).


def test_a_cast_failure_names_the_value_and_both_types() -> None:
    text = (
        "[CAST_INVALID_INPUT] The value 'abc' of the type \"STRING\" cannot be cast to "
        '"BIGINT" because it is malformed. Correct the value as per the syntax.\n\nJVM stacktrace:'
    )
    original = RuntimeError(text)
    error = translate_server_error(original)
    assert isinstance(error, CastFailedError)
    assert error.message_parameters == {
        "value": "'abc'",
        "source_type": "STRING",
        "target_type": "BIGINT",
    }
    assert error.cause is original


def test_a_scheme_without_a_file_system() -> None:
    no_scheme = translate_server_error(
        RuntimeError(
            '(org.apache.hadoop.fs.UnsupportedFileSystemException) No FileSystem for scheme "foo"'
        )
    )
    assert isinstance(no_scheme, ServerFileSystemMissingError)
    assert no_scheme.message_parameters["scheme"] == "foo"
    no_class = translate_server_error(
        RuntimeError(
            "(java.lang.RuntimeException) java.lang.ClassNotFoundException: Class "
            "org.apache.hadoop.fs.s3a.S3AFileSystem not found"
        )
    )
    assert isinstance(no_class, ServerFileSystemMissingError)
    assert no_class.message_parameters["scheme"] == "s3a"
    assert "hadoop-aws" in str(no_class)


def test_refused_writes_name_the_path() -> None:
    mkdirs = translate_server_error(
        RuntimeError(
            "Job aborted due to stage failure: ... java.io.IOException: Mkdirs failed to create "
            "file:/t/_delta_log/_delta_connect_staging.1.a/_temporary/0 (exists=false)"
        )
    )
    assert isinstance(mkdirs, StorageAccessDeniedError)
    assert mkdirs.message_parameters["path"].startswith("file:/t/_delta_log/")
    read_only = translate_server_error(
        RuntimeError(
            "PythonException: ... OSError: [Errno 30] Cannot delete file "
            "'/t/_delta_log/00000000000000000000.json'. Detail: [errno 30] Read-only file system"
        )
    )
    assert isinstance(read_only, StorageAccessDeniedError)
    assert read_only.message_parameters["path"] == "/t/_delta_log/00000000000000000000.json"
    assert "Read-only file system" in read_only.message_parameters["reason"]
    denied = translate_server_error(RuntimeError("java.nio.file.AccessDeniedException: s3a://b/t"))
    assert isinstance(denied, StorageAccessDeniedError)


def test_a_file_gone_mid_read() -> None:
    error = translate_server_error(
        RuntimeError(
            "Caused by: java.io.FileNotFoundException: File file:/t/part-1.parquet does not exist"
        )
    )
    assert isinstance(error, ServerFileNotFoundError)
    assert error.message_parameters["file"] == "file:/t/part-1.parquet"


def test_a_worker_error_wins_over_the_texts_it_quotes() -> None:
    failure = WorkerFailure(StateRecoverError(operation="metadata", version=5))
    wrapped = RuntimeError(f"Permission denied ... Read-only file system\n{failure}")
    assert isinstance(translate_server_error(wrapped), StateRecoverError)


def test_unavailable_and_lost_sessions() -> None:
    class Unavailable(RuntimeError):
        def getGrpcStatusCode(self) -> object:
            import grpc

            return grpc.StatusCode.UNAVAILABLE

    text = (
        'status = StatusCode.UNAVAILABLE\n\tdetails = "failed to connect to all addresses; last '
        'error: UNKNOWN: ipv4:127.0.0.1:1: Failed to connect to remote host: Connection refused"'
    )
    error = translate_server_error(Unavailable(text))
    assert isinstance(error, ServerUnavailableError)
    assert error.message_parameters["address"] == "sc://127.0.0.1:1"
    assert "Connection refused" in error.message_parameters["reason"]
    assert "\n" not in str(error)
    lost = translate_server_error(RuntimeError("[INVALID_HANDLE.SESSION_CHANGED] The handle ..."))
    assert isinstance(lost, SessionLostError)
    assert "connect()" in str(lost)


_RETRIES_EXCEEDED = "[RETRIES_EXCEEDED] The maximum number of retries has been exceeded."


def test_retries_run_out_as_a_pyspark_4_0_client_says_so_is_still_unavailable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """pyspark 4.0 raises ``RetriesExceeded`` from the last attempt's failure; 4.1 and later
    raise that failure itself (and have no such class: a stand-in of 4.0's is put in its
    place). Both are the same unreachable server."""
    import grpc
    import pyspark.errors
    from pyspark.errors import PySparkException

    if not hasattr(pyspark.errors, "RetriesExceeded"):

        class FourZerosRetriesExceeded(PySparkException):
            pass

        monkeypatch.setattr(pyspark.errors, "RetriesExceeded", FourZerosRetriesExceeded, False)
    RetriesExceeded = pyspark.errors.RetriesExceeded

    class Unavailable(grpc.RpcError):
        def code(self) -> grpc.StatusCode:
            return grpc.StatusCode.UNAVAILABLE

        def __str__(self) -> str:
            return 'details = "failed to connect to all addresses; ipv4:127.0.0.1:7: refused"'

    last_failure = Unavailable()
    given_up = RetriesExceeded(message=_RETRIES_EXCEEDED)
    given_up.__cause__ = last_failure
    for raised in (given_up, last_failure):
        error = translate_server_error(raised)
        assert isinstance(error, ServerUnavailableError)
        assert error.message_parameters["address"] == "sc://127.0.0.1:7"
        assert error.cause is last_failure
    other = RetriesExceeded(message=_RETRIES_EXCEEDED)
    other.__cause__ = ValueError("not a gRPC failure")
    assert translate_server_error(other) is other


def test_error_texts_name_this_librarys_calls_not_sql() -> None:
    from delta_connect_py.errors import (
        FileReferencedNotFoundError,
        MissingChangeDataError,
        NoStartForCdcReadError,
    )

    texts = [
        str(MissingChangeDataError(start=0, end=3, version=0)),
        str(FileReferencedNotFoundError(path="p", table="t")),
        str(NoStartForCdcReadError(path="t")),
    ]
    for text in texts:
        for sql in ("DESCRIBE HISTORY", "ALTER TABLE", "TBLPROPERTIES", "DELETE statement"):
            assert sql not in text
    assert "DeltaTable.history()" in texts[0] and "load_cdf" in texts[0]
    assert "snapshot(version=...)" in texts[1]
    assert "load_cdf(starting_version=...)" in texts[2]


def test_a_log_file_deleted_after_the_listing() -> None:
    text = (
        "[PATH_NOT_FOUND] Path does not exist: file:/t/_delta_log/00000000000000000005.json. "
        "SQLSTATE: 42K03"
    )
    error = translate_server_error(RuntimeError(text))
    assert isinstance(error, ServerFileNotFoundError)
    assert error.message_parameters["file"] == "file:/t/_delta_log/00000000000000000005.json"
    assert "DeltaTable.snapshot()" in str(error)


SPACED = "/t/ts=2024-02-29 23%3A59%3A59/part-0.parquet"


@pytest.mark.parametrize(
    "text",
    [
        f"[PATH_NOT_FOUND] Path does not exist: file:{SPACED}. SQLSTATE: 42K03\n\nJVM stacktrace:",
        f"java.io.FileNotFoundException: File file:{SPACED} does not exist\n\tat org.apache",
        f"FileNotFoundError: [Errno 2] No such file or directory: '{SPACED}'",
    ],
    ids=["Spark", "Hadoop", "Python"],
)
def test_a_missing_file_whose_path_holds_spaces_is_named_whole(text: str) -> None:
    error = translate_server_error(RuntimeError(text))
    assert isinstance(error, ServerFileNotFoundError)
    assert error.message_parameters["file"].endswith(SPACED)


def test_a_refused_file_whose_quoted_path_holds_spaces_is_named_whole() -> None:
    error = translate_server_error(RuntimeError(f"PermissionError: Permission denied: '{SPACED}'"))
    assert isinstance(error, StorageAccessDeniedError)
    assert error.message_parameters["path"] == SPACED
