"""Spark and gRPC failures classified into one-line DeltaErrors.

Responsibility: the one place that reads a failure raised by the Spark Connect client (a server
error with its JVM trace, a worker's PythonException, a gRPC status) and says which
:class:`~delta_connect_py.errors.DeltaError` it is: an error a worker encoded, the server being
unreachable or restarted, a value that cannot be cast, a file system the server lacks, a refused
write, a file that disappeared, an unreadable log file, a Python or pyarrow mismatch on the
workers. :func:`raising_delta_errors` raises the DeltaError with the original failure kept as
``error.cause`` and not chained, so a user sees our one line, not the server's trace.

Invariants: a failure we do not recognise is returned (and re-raised) unchanged; classification
reads text and status codes only, never contacts the server; a worker-encoded DeltaError wins
over every text pattern (its message may quote any of them).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from delta_connect_py.connections import retry_bound_seconds, session_address, session_for_address
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
    StorageAccessDeniedError,
)
from delta_connect_py.plans.action_lines import corrupt_line_error
from delta_connect_py.plans.checkpoint_strings import not_utf8_failure
from delta_connect_py.worker.failures import decode_worker_failure

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's error when a file source cannot read a file: its sub-class, then the file, which
#: Spark ends with a period (the path itself may hold spaces).
_FAILED_READ_FILE = re.compile(
    r"\[(FAILED_READ_FILE\.\w+)\] Encountered error while reading file (.+?)\.(?:\s|$)"
)
#: Left to ``plans.loading.malformed_commits_reported``, which also names the line.
_MALFORMED_RECORD = "MALFORMED_RECORD_IN_PARSING"
_CAST_INVALID_INPUT = re.compile(
    r"\[CAST_INVALID_INPUT\] The value (.+?) of the type \"?([^\"]+?)\"? cannot be cast to "
    r"\"?([^\"]+?)\"? because"
)
_NO_FILE_SYSTEM = re.compile(r'No FileSystem for scheme "?([\w.+-]+)"?')
_MISSING_FILE_SYSTEM_CLASS = re.compile(
    r"Class (org\.apache\.hadoop\.fs\.\S+|\S+FileSystem) not found"
)
#: Hadoop file system classes a stock server lacks, by the scheme they serve.
_FILE_SYSTEM_SCHEMES = {
    "S3AFileSystem": "s3a",
    "SecureAzureBlobFileSystem": "abfss",
    "AzureBlobFileSystem": "abfs",
    "NativeAzureFileSystem": "wasb",
    "GoogleHadoopFileSystem": "gs",
}
#: Refusals of a write or read by the store, as Hadoop, Python and the object stores word them.
_ACCESS_DENIED = re.compile(
    r"(Mkdirs failed to create [^\s]+|Read-only file system|Permission denied|"
    r"AccessDenied(?:Exception)?[^\n]*|Operation not permitted)"
)
#: The file a refusal names, where the text gives one (a quoted one whole, spaces and all).
_REFUSED_PATH = re.compile(
    r"(?:Mkdirs failed to create |Cannot (?:delete|create|open|write) file |Permission denied: )"
    r"(?:'([^']+)'|([^\s']+))"
)
#: A file gone between the listing (or the plan's analysis) and the read: Spark's message
#: ends its path with a period, then its SQL state or the line's end (a path may hold spaces).
MISSING_PATH = re.compile(r"Path does not exist: (.+?)\.?(?= SQLSTATE:|\n|$)")
_PATH_NOT_FOUND = re.compile(r"\[PATH_NOT_FOUND\] " + MISSING_PATH.pattern)
_FILE_NOT_EXIST = re.compile(
    r"\[FAILED_READ_FILE\.FILE_NOT_EXIST\] Encountered error while reading file (.+?)\. File"
)
_FILE_NOT_FOUND = re.compile(
    r"(?:java\.io\.FileNotFoundException|FileNotFoundError)[:\s]+"
    r"(?:File (.+?) does not exist|\[Errno 2\][^']*'([^']+)'|([^\s']+))"
)
_SESSION_GONE = re.compile(
    r"\[(INVALID_HANDLE\.(?:SESSION_CHANGED|SESSION_NOT_FOUND|SESSION_CLOSED)|"
    r"NO_ACTIVE_SESSION|NO_ACTIVE_OR_DEFAULT_SESSION)\]"
)
_GRPC_ADDRESS = re.compile(r"ipv[46]:((?:\[[^\]]+\]|[\w.-]+):\d+)")
_FIRST_LINE_LENGTH = 300


@contextmanager
def raising_delta_errors(spark: SparkSession | None = None) -> Iterator[None]:
    """Failures raised inside the block that we recognise, raised as one-line DeltaErrors
    (``spark``: the session the block uses, whose address and retry bound the error names)."""
    try:
        yield
    except Exception as exc:
        translated = translate_server_error(exc, spark)
        if translated is exc:
            raise
        raise translated from None


def translate_server_error(exc: BaseException, spark: SparkSession | None = None) -> Exception:
    """The DeltaError ``exc`` is (``cause`` set to the failure it was read from: ``exc``, or
    the last attempt's failure under a pyspark 4.0 ``RetriesExceeded``), or ``exc`` itself when
    unknown."""
    if isinstance(exc, DeltaError):
        return exc
    failure = _last_attempts_failure(exc)
    text = str(failure)
    for classify in _CLASSIFIERS:
        error = classify(failure, text, spark)
        if error is not None:
            error.cause = failure
            return error
    return exc if isinstance(exc, Exception) else RuntimeError(text)


def _last_attempts_failure(exc: BaseException) -> BaseException:
    """The failure to classify: when a pyspark 4.0 client's retries run out, it raises
    ``RetriesExceeded`` from the last attempt's failure (4.1 and later raise that failure
    itself, and have no such class), and only that failure says what happened (an unreachable
    server's UNAVAILABLE)."""
    import pyspark.errors

    given_up: type | None = getattr(pyspark.errors, "RetriesExceeded", None)
    last = exc.__cause__
    if given_up is not None and isinstance(exc, given_up) and last is not None:
        return last
    return exc


def _worker_error(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    return decode_worker_failure(text)


def _invalid_action_line(
    exc: BaseException, text: str, spark: SparkSession | None
) -> DeltaError | None:
    return corrupt_line_error(text)


def _checkpoint_string_not_utf8(
    exc: BaseException, text: str, spark: SparkSession | None
) -> DeltaError | None:
    return not_utf8_failure(text)


def _unavailable(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    """gRPC UNAVAILABLE after the session's retries: nothing answers at the address."""
    if _grpc_status(exc) != "UNAVAILABLE":
        return None
    return ServerUnavailableError(
        address=_address(spark, text), bound=_retry_bound(spark, text), reason=_grpc_details(text)
    )


def _session_gone(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    found = _SESSION_GONE.search(text)
    if found is None:
        return None
    return SessionLostError(address=_address(spark, text), reason=found.group(1))


def _python_mismatch(
    exc: BaseException, text: str, spark: SparkSession | None
) -> DeltaError | None:
    mismatch = re.search(
        r"different version:? (\d+\.\d+)\S* than that in driver:? (\d+\.\d+)", text
    )
    if mismatch is None:
        return None
    return PythonVersionMismatchError(
        server_version=mismatch.group(1), client_version=mismatch.group(2)
    )


def _no_pyarrow(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    if "No module named 'pyarrow'" not in text:
        return None
    return ServerEnvironmentError(
        message="The Spark Connect server's Python workers have no pyarrow. Point the "
        "server's PYSPARK_PYTHON at a Python with pyarrow installed."
    )


def _unreadable_log_file(
    exc: BaseException, text: str, spark: SparkSession | None
) -> DeltaError | None:
    """``DELTA_CORRUPT_LOG_FILE`` for Spark's failure to read a file of a ``_delta_log`` (a
    checkpoint or sidecar that is not parquet, or damaged); None for any other failure."""
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


def _cast_failed(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    found = _CAST_INVALID_INPUT.search(text)
    if found is None:
        return None
    value, source_type, target_type = found.groups()
    return CastFailedError(value=value, source_type=source_type, target_type=target_type)


def _file_system_missing(
    exc: BaseException, text: str, spark: SparkSession | None
) -> DeltaError | None:
    scheme = _NO_FILE_SYSTEM.search(text)
    if scheme is not None:
        return ServerFileSystemMissingError(scheme=scheme.group(1), reason=scheme.group(0))
    missing = _MISSING_FILE_SYSTEM_CLASS.search(text)
    if missing is None:
        return None
    class_name = missing.group(1).rsplit(".", 1)[-1]
    return ServerFileSystemMissingError(
        scheme=_FILE_SYSTEM_SCHEMES.get(class_name, "the path's"),
        reason=f"class {missing.group(1)} not found",
    )


def _access_denied(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    found = _ACCESS_DENIED.search(text)
    if found is None:
        return None
    refused = _REFUSED_PATH.search(text)
    path = _matched(refused) if refused else "the table"
    return StorageAccessDeniedError(path=path, reason=_one_line(found.group(0)))


def _file_not_found(exc: BaseException, text: str, spark: SparkSession | None) -> DeltaError | None:
    for pattern, reason in (
        (_PATH_NOT_FOUND, "PATH_NOT_FOUND"),
        (_FILE_NOT_EXIST, "FAILED_READ_FILE.FILE_NOT_EXIST"),
        (_FILE_NOT_FOUND, None),
    ):
        found = pattern.search(text)
        if found is not None:
            return ServerFileNotFoundError(
                file=_matched(found), reason=reason or _one_line(found.group(0))
            )
    return None


def _matched(found: re.Match[str]) -> str:
    """The group of ``found`` that matched, of a pattern whose alternatives each have one."""
    return next(group for group in found.groups() if group is not None)


_Classifier = Callable[[BaseException, str, "SparkSession | None"], "DeltaError | None"]
#: In order: a worker's own DeltaError first, the transport next, then the most specific texts.
_CLASSIFIERS: tuple[_Classifier, ...] = (
    _worker_error,
    _invalid_action_line,
    _checkpoint_string_not_utf8,
    _unavailable,
    _session_gone,
    _python_mismatch,
    _unreadable_log_file,
    _no_pyarrow,
    _cast_failed,
    _file_system_missing,
    _access_denied,
    _file_not_found,
)


def _grpc_status(exc: BaseException) -> str | None:
    """The gRPC status code name of ``exc`` (pyspark's wrapper or a raw ``grpc.RpcError``)."""
    code: Any = None
    status_of = getattr(exc, "getGrpcStatusCode", None)
    if callable(status_of):
        code = status_of()
    elif callable(getattr(exc, "code", None)):
        try:
            code = exc.code()  # type: ignore[attr-defined]
        except Exception:  # not a gRPC call after all
            return None
    return getattr(code, "name", None)


def _grpc_details(text: str) -> str:
    found = re.search(r'details = "([^"]*)"', text)
    return _one_line(found.group(1) if found else text)


def _address(spark: SparkSession | None, text: str) -> str:
    """The server's address: the session's, else the one gRPC names, else a description."""

    address = session_address(spark) if spark is not None else None
    if address:
        return address
    found = _GRPC_ADDRESS.search(text)
    return f"sc://{found.group(1)}" if found else "the session's address"


def _retry_bound(spark: SparkSession | None, text: str) -> str:

    if spark is None:
        found = _GRPC_ADDRESS.search(text)
        spark = session_for_address(found.group(1)) if found else None
    seconds = retry_bound_seconds(spark) if spark is not None else None
    return f"{seconds:g} s" if seconds is not None else "the session's retry policy"


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    if len(line) <= _FIRST_LINE_LENGTH:
        return line
    return line[: _FIRST_LINE_LENGTH - 3] + "..."


def caused_by(error: Exception, exc: BaseException) -> Exception:
    """``error`` with ``exc`` kept as its ``cause`` when it is a DeltaError made from ``exc``
    (raise the result ``from None``)."""
    if isinstance(error, DeltaError) and error is not exc and error.cause is None:
        error.cause = exc
    return error


_T = TypeVar("_T")


def _translating(function: Callable[..., _T]) -> Callable[..., _T]:
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> _T:
        spark = getattr(args[0], "spark", None) if args else None
        with raising_delta_errors(spark if _is_session(spark) else None):
            return function(*args, **kwargs)

    return call


def _is_session(value: object) -> bool:
    return value is not None and hasattr(value, "client")


def public_calls_raise_delta_errors(cls: type[_T]) -> type[_T]:
    """Class decorator: every public method and property of ``cls`` raises the failures we
    recognise as one-line DeltaErrors (:func:`raising_delta_errors`).

    The boundary, not the jobs: pyspark contacts the server while a plan is being built too
    (``DataFrame.columns`` is an analysis request), so a server that is gone, or restarted, is
    met anywhere inside a call.
    """
    for name, attribute in _public_attributes(cls).items():
        if name == "spark":
            continue
        wrapped: Any
        if isinstance(attribute, property) and attribute.fget is not None:
            wrapped = property(
                _translating(attribute.fget), attribute.fset, attribute.fdel, attribute.__doc__
            )
        elif isinstance(attribute, functools.cached_property):
            wrapped = functools.cached_property(_translating(attribute.func))
            wrapped.__set_name__(cls, name)
        elif isinstance(attribute, classmethod):
            wrapped = classmethod(_translating(attribute.__func__))
        elif isinstance(attribute, staticmethod) or not callable(attribute):
            continue
        else:
            wrapped = _translating(attribute)
        setattr(cls, name, wrapped)
    return cls


def _public_attributes(cls: type) -> dict[str, Any]:
    """The public attributes ``cls`` defines or inherits from the package's own base classes
    (a facade's methods may live on the base it extends), the nearest definition first."""
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass is object:
            continue
        for name, attribute in vars(klass).items():
            if not name.startswith("_"):
                found.setdefault(name, attribute)
    return found
