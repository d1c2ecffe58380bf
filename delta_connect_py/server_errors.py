"""Server-side failures we recognise, turned into DeltaErrors.

Responsibility: :func:`translate_server_error` reads the text of an exception a Spark Connect
request raised (a worker's encoded Delta error, a Python version mismatch, a log file Spark
could not read, workers without pyarrow) and returns the DeltaError it stands for.

Invariants: it never raises and never runs a request; an exception it does not recognise is
returned as it is, so callers re-raise the original.
"""

from __future__ import annotations

import re

from delta_connect_py.errors import PythonVersionMismatchError, ServerEnvironmentError


def translate_server_error(exc: BaseException) -> Exception:
    """Turn a known server-side failure into a DeltaError; anything else is returned as is."""
    from delta_connect_py.errors import DeltaError
    from delta_connect_py.worker.failures import decode_worker_failure

    if isinstance(exc, DeltaError):
        return exc
    text = str(exc)
    decoded = decode_worker_failure(text)
    if decoded is not None:
        return decoded
    mismatch = re.search(
        r"different version:? (\d+\.\d+)\S* than that in driver:? (\d+\.\d+)", text
    )
    if mismatch:
        return PythonVersionMismatchError(
            server_version=mismatch.group(1), client_version=mismatch.group(2)
        )
    unreadable = _unreadable_log_file(text)
    if unreadable is not None:
        return unreadable
    if "No module named 'pyarrow'" in text:
        return ServerEnvironmentError(
            message="The Spark Connect server's Python workers have no pyarrow. Point the "
            "server's PYSPARK_PYTHON at a Python with pyarrow installed."
        )
    return exc if isinstance(exc, Exception) else RuntimeError(text)


#: Spark's error when a file source cannot read a file: its sub-class, then the file, which
#: Spark ends with a period (the path itself may hold spaces).
_FAILED_READ_FILE = re.compile(
    r"\[(FAILED_READ_FILE\.\w+)\] Encountered error while reading file (.+?)\.(?:\s|$)"
)
#: Left to ``plans.loading.malformed_commits_reported``, which also names the line.
_MALFORMED_RECORD = "MALFORMED_RECORD_IN_PARSING"


def _unreadable_log_file(text: str) -> Exception | None:
    """``DELTA_CORRUPT_LOG_FILE`` for Spark's failure to read a file of a ``_delta_log`` (a
    checkpoint or sidecar that is not parquet, or damaged); None for any other failure."""
    from delta_connect_py.errors import CorruptLogFileError

    found = _FAILED_READ_FILE.search(text)
    if found is None or _MALFORMED_RECORD in text:
        return None
    condition, file = found.groups()
    log_dir, separator, _ = file.partition("/_delta_log/")
    if not separator:
        return None  # a data file: not the log's
    return CorruptLogFileError(
        file=file, path=log_dir + "/_delta_log", reason=f"Spark could not read it ({condition})"
    )
