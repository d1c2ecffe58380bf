"""Spark Connect sessions for delta_connect_py.

Responsibility: :func:`connect` returns a Spark Connect session (an explicit ``remote``, else
``SPARK_REMOTE``, else the embedded default server), and :func:`prepare_session` makes any
Connect session ready for our plans: our worker code is shipped by value (the server never
imports delta_connect_py), and once per session the server's Spark version is read and its
Python version checked against ours.

Invariants: shipping by value is registered before any of our functions is pickled; a server
older than Spark 4.0 raises :class:`~delta_connect_py.errors.UnsupportedServerVersionError`
before any of our code runs on it; a server older than the client's Spark line gets the
settings that client reads but the server does not define (``settings_for_server``) before any
``createDataFrame``; a client/server Python minor-version mismatch raises
:class:`~delta_connect_py.errors.PythonVersionMismatchError` naming both versions; a session
``connect`` created is released on the server when this process exits (sessions the caller made
are the caller's), never delaying exit by more than ``RELEASE_TIMEOUT_SECONDS``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark import __version__ as CLIENT_PYSPARK

import delta_connect_py
from delta_connect_py.errors import (
    PythonVersionMismatchError,
    ServerEnvironmentError,
    UnsupportedServerVersionError,
)
from delta_connect_py.pyspark_client import spark_line
from delta_connect_py.worker.archives import in_worker

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from delta_connect_py.embedded import EmbeddedServer

_embedded: EmbeddedServer | None = None
_prepared_sessions: set[str] = set()
_sessions: dict[str, SparkSession] = {}

CLIENT_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The oldest Spark line whose Connect server runs our plans, and what we say is supported.
OLDEST_SERVER = (4, 0)
SUPPORTED_SERVERS = "Spark Connect servers of Spark 4.0 and 4.1"
#: Settings a pyspark 4.1 client reads on every ``createDataFrame`` of local data, which Spark
#: 4.0 does not define (``SQL_CONF_NOT_FOUND``); set to Spark 4.1's defaults. A 4.0 server
#: accepts unknown ``spark.sql.*`` keys. They only size the chunks of a local relation above
#: ``spark.sql.session.localRelationCacheThreshold`` (64 MiB), which a 4.0 server could not
#: read either; ours are listings and small descriptor tables.
LOCAL_RELATION_CHUNK_CONF = {
    "spark.sql.session.localRelationChunkSizeRows": "10000",
    "spark.sql.session.localRelationChunkSizeBytes": str(16 << 20),
    "spark.sql.session.localRelationBatchOfChunksSizeBytes": str(1 << 30),
}
#: How long process exit waits for the server to release a session (an unreachable server
#: would otherwise be retried for minutes).
RELEASE_TIMEOUT_SECONDS = 5.0


def connect(remote: str | None = None) -> SparkSession:
    """A Spark Connect session: ``remote``, else ``$SPARK_REMOTE``, else the embedded server.

    The embedded server (a local Spark Connect server process on 127.0.0.1) is started on first
    use and stopped when this Python process exits.
    """
    from pyspark.sql import SparkSession

    target = remote or os.environ.get("SPARK_REMOTE") or _embedded_remote()
    spark = _sessions.get(target)
    if spark is None or getattr(spark, "is_stopped", False):
        # create(), not getOrCreate(): the latter returns any open session, whatever its remote.
        spark = SparkSession.builder.remote(target).create()
        _sessions[target] = spark
        # Registered after the embedded server's own atexit hook, so it runs before the server
        # stops. Without it the server keeps the session, its cached states and its Python
        # worker processes until the session times out (an hour by default).
        atexit.register(_release, spark)
    prepare_session(spark)
    return spark


def _release(spark: SparkSession) -> None:
    """Release ``spark``'s server-side session, waiting at most ``RELEASE_TIMEOUT_SECONDS``."""

    def stop() -> None:
        # The server may already be gone: then nothing is left to release.
        with contextlib.suppress(Exception):
            spark.stop()

    releaser = threading.Thread(target=stop, name="delta-connect-release", daemon=True)
    releaser.start()
    releaser.join(RELEASE_TIMEOUT_SECONDS)


def _embedded_remote() -> str:
    global _embedded
    if _embedded is None or _embedded.process is None:
        from delta_connect_py.embedded import EmbeddedServer

        worker_python = os.environ.get("DELTA_CONNECT_WORKER_PYTHON", sys.executable)
        _embedded = EmbeddedServer(worker_python=worker_python).start()
    return _embedded.remote


def register_worker_code() -> None:
    """Pickle delta_connect_py's functions by value, so the server need not import us."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(delta_connect_py)  # type: ignore[no-untyped-call]


def _worker_python_version(_: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import sys as worker_sys

    version = f"{worker_sys.version_info.major}.{worker_sys.version_info.minor}"
    yield pa.RecordBatch.from_pydict({"python": [version]})


def session_key(spark: SparkSession) -> str:
    """The session's name, unique in this process: its Connect session id."""
    return str(getattr(spark, "session_id", id(spark)))


def prepare_session(spark: SparkSession) -> None:
    """Ship our code by value, check the server's Spark version (applying the settings an
    older server needs for this client) and its worker Python, once per session."""
    register_worker_code()
    session_id = session_key(spark)
    if session_id in _prepared_sessions:
        return
    try:
        # An analysis request, no job: read before the probe, which a Spark 3.5 server's worker
        # fails to unpickle (a raw traceback instead of the versions).
        settings = settings_for_server(spark.version, CLIENT_PYSPARK)
        if settings:
            from delta_connect_py.plans.spark import set_conf

            set_conf(spark, settings)
        probe = spark.range(0, 1, 1, 1)  # one partition: one probe row
        rows = probe.mapInArrow(in_worker(_worker_python_version), "python string").collect()
    except Exception as exc:
        raise translate_server_error(exc) from exc
    server_python = rows[0]["python"]
    if server_python != CLIENT_PYTHON:
        raise PythonVersionMismatchError(server_version=server_python, client_version=CLIENT_PYTHON)
    _prepared_sessions.add(session_id)


def settings_for_server(server_version: str, client_version: str) -> dict[str, str]:
    """The session settings a Spark Connect server of ``server_version`` needs for a pyspark
    ``client_version`` client.

    Raises ``DELTA_CONNECT_UNSUPPORTED_SERVER_VERSION`` for a server older than Spark 4.0. A
    version string we cannot read is let through with no settings: the server decides.
    """
    server, client = spark_line(server_version), spark_line(client_version)
    if server is None:
        return {}
    if server < OLDEST_SERVER:
        raise UnsupportedServerVersionError(
            server_version=server_version,
            client_version=client_version,
            supported=SUPPORTED_SERVERS,
        )
    if server < (4, 1) and client is not None and client >= (4, 1):
        return dict(LOCAL_RELATION_CHUNK_CONF)
    return {}


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
    from delta_connect_py.plans.action_lines import corrupt_line_error

    invalid_line = corrupt_line_error(text)
    if invalid_line is not None:
        return invalid_line
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
