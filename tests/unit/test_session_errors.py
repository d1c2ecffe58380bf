"""Server failures the client recognises become DeltaErrors with the facts a user needs."""

from __future__ import annotations

from delta_connect_py.errors import (
    CorruptLogFileError,
    DeltaError,
    PythonVersionMismatchError,
    ServerEnvironmentError,
    StateRecoverError,
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
