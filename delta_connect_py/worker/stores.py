"""The store a server-side Python worker opens itself, and the credentials it opens it with.

Responsibility: :class:`StorageOptions` (delta-rs's ``storage_options`` names, e.g.
``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ``AZURE_STORAGE_ACCOUNT_KEY``) checked on the
client and mapped onto ``pyarrow.fs`` arguments in the worker by :func:`open_store`; which URI
schemes a worker can open at all (:func:`unsupported_scheme`); and the wording of the error a
worker's failed file operation becomes (:func:`access_failure`).

Why workers open the store at all: Spark Connect reads and lists through the server's Hadoop
file systems (and their ``spark.hadoop.fs.*`` credentials), but cannot write a file under an
exact name, rename or delete one. Those few operations (publishing a checkpoint, writing
``_last_checkpoint``, deleting expired log files) and reading ``_last_checkpoint`` (a name every
Spark file source hides) run in a mapInArrow worker with pyarrow, which never sees Hadoop's
settings: it uses these options, else its own environment (``AWS_*``, ``~/.aws``, instance
roles; ``AZURE_*``; ``GOOGLE_APPLICATION_CREDENTIALS``).

Invariants: option values never appear in a ``repr``, an error message or a log line (they do
travel in the Spark plan, pickled with the worker function: prefer short-lived credentials);
unknown option names are refused on the client before any job; S3 clients built here make at
most two attempts per request with bounded timeouts, so missing or wrong credentials fail a call
within seconds, not after minutes of retries.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from delta_connect_py.errors import (
    InvalidStorageOptionsError,
    UnsupportedFileSystemError,
    WorkerFileAccessError,
)
from delta_connect_py.worker.failures import WorkerFailure

if TYPE_CHECKING:
    import pyarrow.fs

S3_OPTIONS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT",
    "AWS_ALLOW_HTTP",
    "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME",
    "AWS_EXTERNAL_ID",
    "AWS_SKIP_SIGNATURE",
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
)
AZURE_OPTIONS = (
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_SAS_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_TENANT_ID",
    "AZURE_STORAGE_USE_EMULATOR",
)
GCS_OPTIONS = ("GOOGLE_ENDPOINT_URL", "GOOGLE_PROJECT_ID", "GOOGLE_ANONYMOUS")
SUPPORTED_OPTIONS = frozenset((*S3_OPTIONS, *AZURE_OPTIONS, *GCS_OPTIONS))
#: Settings, not secrets: an error shows their values, since a wrong endpoint or region is the
#: usual cause and the store's own message does not always name it.
SHOWN_OPTIONS = frozenset(
    (
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT",
        "AWS_ALLOW_HTTP",
        "AWS_SKIP_SIGNATURE",
        "AWS_VIRTUAL_HOSTED_STYLE_REQUEST",
        "AZURE_STORAGE_ACCOUNT_NAME",
        "AZURE_STORAGE_USE_EMULATOR",
        "GOOGLE_ENDPOINT_URL",
        "GOOGLE_PROJECT_ID",
        "GOOGLE_ANONYMOUS",
    )
)

#: Schemes pyarrow opens in the worker (``hdfs`` only where libhdfs and a JVM are installed).
_S3_SCHEMES = ("s3", "s3a", "s3n")
_AZURE_SCHEMES = ("abfs", "abfss")
_GCS_SCHEMES = ("gs", "gcs")
_LOCAL_SCHEMES = ("file",)
#: Hadoop schemes pyarrow cannot open at all, and why.
_UNSUPPORTED: dict[str, str] = {
    "wasb": "pyarrow has no file system for the legacy Azure Blob (wasb) driver; use abfss://",
    "wasbs": "pyarrow has no file system for the legacy Azure Blob (wasb) driver; use abfss://",
    "dbfs": "dbfs: is a Databricks file system that only Databricks runtimes can open",
    "adl": "pyarrow has no file system for Azure Data Lake Gen1 (adl)",
}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")
_TIMEOUT_SECONDS = 20.0
_CONNECT_TIMEOUT_SECONDS = 5.0


@dataclass(frozen=True)
class StorageOptions:
    """Credentials and settings for a worker's own store access; values hidden from ``repr``."""

    items: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, options: Mapping[str, str] | None) -> StorageOptions:
        """Checked options (names upper-cased as delta-rs accepts them)."""
        if not options:
            return NO_STORAGE_OPTIONS
        normalized = {str(k).upper(): str(v) for k, v in options.items()}
        unknown = sorted(set(normalized) - SUPPORTED_OPTIONS)
        if unknown:
            raise InvalidStorageOptionsError(
                unknown=", ".join(unknown), supported=", ".join(sorted(SUPPORTED_OPTIONS))
            )
        return cls(tuple(sorted(normalized.items())))

    def get(self, *names: str) -> str | None:
        """The first of ``names`` given here, else the first set in the worker's environment."""
        given = dict(self.items)
        for name in names:
            if given.get(name):
                return given[name]
        for name in names:
            if os.environ.get(name):
                return os.environ[name]
        return None

    def given(self, name: str) -> str | None:
        return dict(self.items).get(name)

    def __bool__(self) -> bool:
        return bool(self.items)

    def __repr__(self) -> str:
        return f"StorageOptions({', '.join(k for k, _ in self.items) or 'none'})"


NO_STORAGE_OPTIONS = StorageOptions()


def scheme_of(uri: str) -> str:
    """The URI's scheme, lower-cased; ``file`` for a plain absolute path."""
    match = _SCHEME.match(uri)
    return match.group(1).lower() if match else "file"


def unsupported_scheme(uri: str) -> str | None:
    """Why a worker cannot open ``uri`` with pyarrow, or None when it can (or may: hdfs)."""
    scheme = scheme_of(uri)
    if scheme in (*_S3_SCHEMES, *_AZURE_SCHEMES, *_GCS_SCHEMES, *_LOCAL_SCHEMES, "hdfs"):
        return None
    return _UNSUPPORTED.get(scheme) or f"pyarrow has no file system for '{scheme}:' URIs"


def check_worker_access(uri: str, feature: str) -> None:
    """Raise (on the client, before any job) when ``feature`` needs a worker to open ``uri``
    with pyarrow and pyarrow has no file system for its scheme."""
    reason = unsupported_scheme(uri)
    if reason is not None:
        raise UnsupportedFileSystemError(
            feature=feature, path=uri, scheme=scheme_of(uri), reason=reason
        )


def open_store(
    uri: str, options: StorageOptions, *, resolve_region: bool = True
) -> tuple[pyarrow.fs.FileSystem, str]:
    """A pyarrow file system and the path in it for a non-local Hadoop-style URI.

    ``resolve_region``: for an S3 bucket whose region no option or environment variable names
    (and no custom endpoint), ask S3 for it (one request, several seconds when S3 cannot be
    reached); off, the SDK's default region is used.
    """
    from pyarrow import fs

    scheme = scheme_of(uri)
    rest = uri.split(":", 1)[1].lstrip("/")
    if scheme in _S3_SCHEMES:
        return _s3(rest, options, resolve_region), rest
    if scheme in _AZURE_SCHEMES:
        return _azure(uri, options)
    if scheme in _GCS_SCHEMES:
        return _gcs(options), rest
    reason = unsupported_scheme(uri)
    if reason is None:
        try:
            filesystem, path = fs.FileSystem.from_uri(uri)
            return filesystem, str(path)
        except OSError as exc:
            if "libhdfs" not in str(exc) and "libjvm" not in str(exc):
                raise
            reason = f"the workers have no libhdfs/JVM for pyarrow's HDFS client: {exc}"
    raise WorkerFailure(
        UnsupportedFileSystemError(
            feature="Reading or writing log files in a Python worker",
            path=uri,
            scheme=scheme,
            reason=reason,
        )
    )


def _s3(
    bucket_and_key: str, options: StorageOptions, resolve_region: bool
) -> pyarrow.fs.S3FileSystem:
    from pyarrow import fs

    endpoint = options.get("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
    scheme = None
    if endpoint is not None:
        scheme, _, endpoint = endpoint.rpartition("://")
        scheme = scheme or ("http" if _true(options.get("AWS_ALLOW_HTTP")) else "https")
    region = options.get("AWS_REGION", "AWS_DEFAULT_REGION")
    if region is None and endpoint is None and resolve_region:
        region = fs.resolve_s3_region(bucket_and_key.split("/", 1)[0])
    return fs.S3FileSystem(
        access_key=options.given("AWS_ACCESS_KEY_ID"),
        secret_key=options.given("AWS_SECRET_ACCESS_KEY"),
        session_token=options.given("AWS_SESSION_TOKEN"),
        anonymous=_true(options.given("AWS_SKIP_SIGNATURE")),
        region=region,
        endpoint_override=endpoint,
        scheme=scheme,
        role_arn=options.given("AWS_ROLE_ARN"),
        session_name=options.given("AWS_ROLE_SESSION_NAME"),
        external_id=options.given("AWS_EXTERNAL_ID"),
        force_virtual_addressing=_true(options.given("AWS_VIRTUAL_HOSTED_STYLE_REQUEST")),
        connect_timeout=_CONNECT_TIMEOUT_SECONDS,
        request_timeout=_TIMEOUT_SECONDS,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=2),
    )


def _azure(uri: str, options: StorageOptions) -> tuple[pyarrow.fs.FileSystem, str]:
    """``abfs[s]://container@account.dfs.core.windows.net/path`` -> (file system,
    ``container/path``)."""
    from pyarrow import fs

    authority, _, path = uri.split("://", 1)[1].partition("/")
    container, _, host = authority.rpartition("@")
    account = options.get("AZURE_STORAGE_ACCOUNT_NAME") or host.split(".", 1)[0]
    kwargs: dict[str, str] = {}
    for option, argument in (
        ("AZURE_STORAGE_ACCOUNT_KEY", "account_key"),
        ("AZURE_CLIENT_ID", "client_id"),
        ("AZURE_CLIENT_SECRET", "client_secret"),
        ("AZURE_TENANT_ID", "tenant_id"),
    ):
        value = options.given(option)
        if value:
            kwargs[argument] = value
    sas = options.given("AZURE_STORAGE_SAS_TOKEN") or options.given("AZURE_STORAGE_SAS_KEY")
    if sas:
        kwargs["sas_token"] = sas
    return fs.AzureFileSystem(account, **kwargs), f"{container}/{path}".rstrip("/")


def _gcs(options: StorageOptions) -> pyarrow.fs.GcsFileSystem:
    from pyarrow import fs

    endpoint = options.given("GOOGLE_ENDPOINT_URL")
    scheme = None
    if endpoint is not None:
        scheme, _, endpoint = endpoint.rpartition("://")
    return fs.GcsFileSystem(
        anonymous=_true(options.given("GOOGLE_ANONYMOUS")),
        endpoint_override=endpoint,
        scheme=scheme or None,
        project_id=options.given("GOOGLE_PROJECT_ID"),
        retry_time_limit=timedelta(seconds=_TIMEOUT_SECONDS),
    )


def _true(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("1", "true", "yes")


def _how_to_give(scheme: str) -> str:
    if scheme in _S3_SCHEMES:
        return (
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN, AWS_REGION; "
            "AWS_ENDPOINT_URL and AWS_ALLOW_HTTP for an S3-compatible store)"
        )
    if scheme in _AZURE_SCHEMES:
        return (
            "AZURE_STORAGE_ACCOUNT_KEY or AZURE_STORAGE_SAS_TOKEN, or AZURE_CLIENT_ID, "
            "AZURE_CLIENT_SECRET and AZURE_TENANT_ID"
        )
    if scheme in _GCS_SCHEMES:
        return "GOOGLE_APPLICATION_CREDENTIALS in the workers' environment"
    return "the store's usual credentials"


def access_failure(
    operation: str, uri: str, exc: BaseException, options: StorageOptions
) -> WorkerFileAccessError:
    """The error a worker's failed file operation on ``uri`` becomes (option values only of
    ``SHOWN_OPTIONS``, never a secret)."""
    scheme = scheme_of(uri)
    source = (
        f"the storage_options given ({', '.join(_described(k, v) for k, v in options.items)})"
        if options
        else "the workers' own environment (no storage_options were given)"
    )
    return WorkerFileAccessError(
        operation=operation,
        path=uri,
        reason=f"{type(exc).__name__}: {exc}"[:600],
        source=source,
        credentials=_how_to_give(scheme),
    )


def _described(name: str, value: str) -> str:
    return f"{name}={value}" if name in SHOWN_OPTIONS else name


def guarded(
    operation: str,
    uri: str,
    options: StorageOptions,
    body: Callable[[Iterable[Any]], Iterator[Any]],
    batches: Iterable[Any],
) -> Iterator[Any]:
    """mapInArrow body: ``body``, with an ``OSError`` from the store (not from a local disk)
    raised as the client's ``DELTA_CONNECT_WORKER_FILE_ACCESS`` naming ``operation``."""
    if scheme_of(uri) in _LOCAL_SCHEMES:
        yield from body(batches)
        return
    try:
        yield from body(batches)
    except OSError as exc:
        raise WorkerFailure(access_failure(operation, uri, exc, options)) from exc


@dataclass(frozen=True)
class AccessProbe:
    """Check that a worker reaches ``log_dir``'s store before a job writes into it."""

    operation: str
    log_dir: str
    options: StorageOptions


def probe_access(probe: AccessProbe, batches: Iterable[Any]) -> Iterator[Any]:
    """mapInArrow body: one metadata request on ``_last_checkpoint`` (present or not) with
    the worker's credentials; yields nothing, raises the file-access error on failure."""
    for _ in batches:
        pass
    try:
        filesystem, log_dir = open_store(probe.log_dir, probe.options)
        filesystem.get_file_info(log_dir.rstrip("/") + "/_last_checkpoint")
    except OSError as exc:
        failure = access_failure(probe.operation, probe.log_dir, exc, probe.options)
        raise WorkerFailure(failure) from exc
    yield from ()
